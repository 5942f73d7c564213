"""Client runtimes in the simulated world: the workload's processes on one simulated node.

Every client process of a run lives on the world's ``clients`` node, which no nemesis aims at
(as the harness, on the host of a real cluster, keeps reaching every node). Its sessions share
that node's runtime: its connections, its seeded random stream and its tasks, as the real
sessions share their connections. Ending a session leaves the node running.
"""

from __future__ import annotations

from floodmark.reference.runtime import Runtime
from floodmark.reference.sim.world import SimWorld

CLIENT_NODE = "clients"


class SimClientHost:
    """``workloads.clients.ClientHost`` in a simulated world."""

    def __init__(self, world: SimWorld) -> None:
        self._runtime = world.runtime(CLIENT_NODE) if CLIENT_NODE in world.nodes else world.add_node(CLIENT_NODE)

    def connections(self) -> Runtime:
        return self._runtime

    def session(self, label: str) -> Runtime:
        return self._runtime

    async def end_session(self, runtime: Runtime) -> None:
        """Nothing to release: the node's runtime outlives every session."""

    async def close(self) -> None:
        """Nothing to close: the world closes with the cluster."""
