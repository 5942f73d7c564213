"""A real cluster (Docker containers or network namespaces) as a run drives it.

Wraps a :class:`~floodmark.harness.cluster.Cluster` with what a run needs besides its
nodes: the machine's monotonic clock and ``asyncio.run``, fault plans applied through the
node-control interface (:class:`~floodmark.backends.node_faults.NodeFaultApplier`), roles read
from the real ZooKeeper (:class:`~floodmark.backends.zk_view.ZooKeeperView`), clients on real
sockets (:class:`~floodmark.backends.real_clients.RealClientHost`), and the removal of what
crashed runs left behind.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from floodmark.backends import cleanup
from floodmark.backends.interrupts import cancelled_on_interrupt, quiet_about_interrupts
from floodmark.backends.node_faults import NodeFaultApplier
from floodmark.backends.real_clients import RealClientHost
from floodmark.backends.zk_view import ZooKeeperView
from floodmark.harness.cluster import Cluster
from floodmark.harness.config import TestConfig
from floodmark.harness.faults import BrokerSlot, ClusterView
from floodmark.reference.protocol.zk_layout import BrokerRegistration
from floodmark.run_dirs.rundir import RunDir

T = TypeVar("T")


class RealBackend:
    deterministic = False  # real processes, real time: a seed replays the harness's choices only

    def __init__(self, name: str, cluster: Cluster, config: TestConfig, seed: int) -> None:
        self.name = name
        self.cluster = cluster
        self.config = config
        self.seed = seed
        self.faults = NodeFaultApplier(cluster, stop_timeout=2 * config.zk_session_timeout,
                                       registered=self._registered, registration=self._registration,
                                       out_of_isr=self._out_of_isr)
        self._view: ZooKeeperView | None = None
        self._clients: RealClientHost | None = None

    def _registered(self, broker_id: int) -> bool | None:
        return None if self._view is None else self._view.registered(broker_id)

    def _registration(self, broker_id: int) -> BrokerRegistration | None:
        return None if self._view is None else self._view.registration(broker_id)

    def _out_of_isr(self, broker_id: int) -> list[tuple[str, int]]:
        return [] if self._view is None else self._view.out_of_isr(broker_id, self.config.topic_names)

    def clock_ns(self) -> int:
        return time.monotonic_ns()

    def remove_leftovers(self) -> list[str]:
        # Every backend's leftovers, not only this one's: a SIGKILLed Docker run is cleaned
        # by the next local run too.
        return cleanup.remove_stale_runs(docker_too=True)

    def setup(self) -> None:
        self.cluster.setup()
        self._view = ZooKeeperView(self.cluster.zookeeper_address)

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        # asyncio.run, but an interrupt (SIGTERM too) cancels the run's task rather than
        # raising in whatever it was doing (see backends.interrupts).
        with asyncio.Runner() as runner:
            loop = runner.get_loop()
            quiet_about_interrupts(loop)
            task = loop.create_task(main)
            with cancelled_on_interrupt(task):
                return loop.run_until_complete(task)

    def client_host(self) -> RealClientHost:
        if self._clients is None:  # one per run: the workload's sessions and admin faults share it
            self._clients = RealClientHost(self.cluster.zookeeper_address, self.seed)
        return self._clients

    async def observe(self) -> ClusterView:
        brokers = tuple(BrokerSlot(b.name, b.broker_id or 0, b.log_dirs) for b in self.cluster.brokers)
        protocols = {b.name: b.inter_broker_protocol or self.config.inter_broker_protocol
                     for b in self.cluster.brokers}
        partitions = self.config.topic_partitions
        view = self._view
        if view is None:
            return ClusterView(self.cluster.zookeeper.name, brokers, partitions, self.config.zk_session_timeout,
                               protocols=protocols)
        roles = await asyncio.to_thread(view.snapshot, partitions, self.config.topic_names)
        return ClusterView(self.cluster.zookeeper.name, brokers, roles.partitions, self.config.zk_session_timeout,
                           roles.controller, roles.leaders, roles.replicas, protocols)

    def teardown(self, collect_into: RunDir | None) -> None:
        if self._view is not None:
            view, self._view = self._view, None
            view.close()
        self.cluster.teardown(collect_into=collect_into)

    def force_cleanup(self) -> None:
        if self.name == "docker":
            cleanup.remove_docker_resources(self.cluster.run_id, stale_only=False)
        else:
            cleanup.remove_local_run(self.cluster.run_id)
