"""Tests for floodmark.run.assemble: which parts a configuration asks for."""

from __future__ import annotations

import pytest

from floodmark.backends.local import LocalCluster
from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.config import TestConfig
from floodmark.run.assemble import broker_args, make_cluster, make_nemeses


def test_broker_args_carry_the_durability_and_session_settings() -> None:
    args = broker_args(TestConfig(min_insync_replicas=1, replication_factor=2, zk_session_timeout=4.5))
    assert args == ("--zk-session-timeout", "4.5", "--min-insync-replicas", "1")


def test_cluster_backend_by_name() -> None:
    spec = ClusterSpec(brokers=3, run_id="abc123")
    assert isinstance(make_cluster(TestConfig(cluster="local"), spec), LocalCluster)
    with pytest.raises(ValueError, match="unknown cluster backend"):
        make_cluster(TestConfig().replace(cluster="k8s"), spec)


def test_one_nemesis_per_kind_with_its_shapes() -> None:
    composite = make_nemeses(("partition", "kill"))
    assert sorted(composite.nemeses) == ["kill", "partition"]
    shapes = composite.shapes()
    assert "isolate-one" in shapes["partition"] and "controller" in shapes["kill"]
    assert make_nemeses(()).nemeses == {}
