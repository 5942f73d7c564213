"""An upgrade's hands on real nodes (containers or network namespaces), through ``Node``.

The roll itself (:mod:`floodmark.backends.rolling_upgrade`) is the same on every backend;
on a real node a broker's inter-broker protocol is the ``--inter-broker-protocol`` option of
the command the harness starts it with (``Node.set_inter_broker_protocol``), so a broker
restarted later by any fault, or by heal-all, starts at the version the roll set. A clean
restart is SIGTERM (controlled shutdown; SIGKILL after the stop timeout), then start; the
registration is read from the run's ZooKeeper (``backends.zk_view``). Node commands block,
so they run in worker threads while the clients keep going on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from floodmark.backends.process_state import is_stopped
from floodmark.harness.cluster import Cluster, Node
from floodmark.reference.protocol.zk_layout import BrokerRegistration

Registration = Callable[[int], BrokerRegistration | None]
"""A broker's registration in ZooKeeper now (None: absent, or ZooKeeper did not answer)."""
OutOfIsr = Callable[[int], list[tuple[str, int]]]
"""The partitions assigned to a broker whose ISR in ZooKeeper lacks it now."""


class NodeUpgradeHands:
    """An upgrade's hands on real nodes: the version is the broker's command-line option."""

    def __init__(self, cluster: Cluster, stop_timeout: float, registration: Registration,
                 out_of_isr: OutOfIsr) -> None:
        self.cluster = cluster
        self.stop_timeout = stop_timeout
        self.read_registration = registration
        self.read_out_of_isr = out_of_isr

    def configure(self, node: str, version: str) -> None:
        self.cluster.node(node).set_inter_broker_protocol(version)

    async def held(self, node: str) -> str | None:
        return await asyncio.to_thread(self._held, self.cluster.node(node))

    @staticmethod
    def _held(node: Node) -> str | None:
        pid = node.pid()
        if pid is None:
            return "not running"
        return "paused" if is_stopped(node, pid) else None

    async def pid(self, node: str) -> int | None:
        return await asyncio.to_thread(self.cluster.node(node).pid)

    async def restart(self, node: str) -> None:
        def restart() -> None:
            machine = self.cluster.node(node)
            machine.stop(timeout=self.stop_timeout)
            machine.start()
        await asyncio.to_thread(restart)

    async def start_if_down(self, node: str) -> bool:
        machine = self.cluster.node(node)
        if await asyncio.to_thread(machine.is_running):
            return False
        await asyncio.to_thread(machine.start)
        return True

    async def registration(self, broker_id: int) -> BrokerRegistration | None:
        return await asyncio.to_thread(self.read_registration, broker_id)

    async def out_of_isr(self, broker_id: int) -> list[tuple[str, int]]:
        return await asyncio.to_thread(self.read_out_of_isr, broker_id)
