"""Assembling a run's parts from its configuration: the cluster, the nemeses, their context.

The runner knows the steps of a run; this module knows which concrete parts a configuration
asks for: the cluster backend (``docker`` containers or ``local`` network namespaces), one
nemesis per fault kind, and the context nemeses consult (who the controller is, who leads a
partition: asked of ZooKeeper when they act).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from floodmark.backends.zk_view import ZooKeeperView
from floodmark.harness.cluster import Cluster, ClusterSpec
from floodmark.harness.config import TestConfig
from floodmark.nemesis.base import NemesisContext
from floodmark.nemesis.compose import Composite


def broker_args(config: TestConfig) -> tuple[str, ...]:
    """Extra ``floodmark broker`` options the test's configuration implies."""
    return (
        "--zk-session-timeout", str(config.zk_session_timeout),
        "--min-insync-replicas", str(config.min_insync_replicas),
    )


def make_cluster(config: TestConfig, spec: ClusterSpec) -> Cluster:
    if config.cluster == "local":
        from floodmark.backends.local import LocalCluster

        return LocalCluster(spec)
    if config.cluster == "docker":
        from floodmark.backends.docker import DockerCluster

        return DockerCluster(spec)
    raise ValueError(f"unknown cluster backend {config.cluster!r}; choose docker or local")


def make_nemeses(kinds: tuple[str, ...]) -> Composite:
    return Composite(kinds)


@contextmanager
def nemesis_context(config: TestConfig, cluster: Cluster) -> Iterator[NemesisContext]:
    """The nemeses' view of the running cluster, closed when the run is done with it."""
    view = ZooKeeperView(cluster.zookeeper_address)
    try:
        yield NemesisContext(
            view=view, partitions=config.topic_partitions, zk_session_timeout=config.zk_session_timeout,
        )
    finally:
        view.close()
