"""What a simulated node's runtime and ZooKeeper client see of the world.

The world (``sim.world``) owns the virtual-time loop, the network, the ZooKeeper server, the
nodes and the record of events and failures; it builds each node's runtime and ZooKeeper
client and hands them itself. They use it only through :class:`WorldView` (the network
through the narrower ``NetworkWorld`` in ``sim.network``), so ``world`` imports them and
they never import ``world``: the package's imports point one way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol

from floodmark.contracts.node_event_kinds import KnownKind
from floodmark.reference.sim.loop import VirtualTimeLoop
from floodmark.reference.sim.network import SimNetwork
from floodmark.reference.sim.node import SimNode
from floodmark.reference.sim.zookeeper import SimZooKeeper


class WorldView(Protocol):
    @property
    def loop(self) -> VirtualTimeLoop: ...

    @property
    def epoch(self) -> float:
        """Wall time at the start of the simulation."""
        ...

    @property
    def network(self) -> SimNetwork: ...

    @property
    def zk(self) -> SimZooKeeper: ...

    def node(self, name: str) -> SimNode: ...

    def start_background(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """A task of the world itself (not of any node), e.g. ZooKeeper session heartbeats."""
        ...

    def zk_reachable(self, name: str, incarnation: int) -> bool: ...

    def record_event(self, name: str, wall: float, body: KnownKind) -> None: ...

    def record_failure(self, name: str, what: str, error: BaseException) -> None: ...
