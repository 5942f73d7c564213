"""The simulated runtime: what one incarnation of a simulated node hands its protocol code.

It implements :class:`floodmark.reference.runtime.Runtime` on the world's virtual-time
loop. Clocks are virtual: ``monotonic`` is the loop's time and ``wall_time`` is a fixed
virtual epoch plus the loop's time plus this node's clock skew (where clock faults land,
see ``sim.clock``).
Every await passes the node's gate (see ``sim.node``), and every task it spawns belongs to
the node, so a crash cancels it. Events go to the world, which keeps them per node across
restarts.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Coroutine
from typing import Any

from floodmark.contracts.node_event_kinds import KnownKind
from floodmark.reference.runtime import Coordination, Handler, Network, Storage
from floodmark.reference.sim.coordination import connect
from floodmark.reference.sim.world_view import WorldView


class SimNodeNetwork:
    """One incarnation's view of the simulated network (``runtime.Network``)."""

    def __init__(self, world: WorldView, node: str, incarnation: int) -> None:
        self._world = world
        self._node = node
        self._incarnation = incarnation

    def request(self, address: str, message: Any, timeout: float) -> Coroutine[Any, Any, Any]:
        # The network's own coroutine, not one awaiting it: one coroutine less per request.
        return self._world.network.request(self._node, self._incarnation, address, message, timeout)

    async def serve(self, handler: Handler) -> None:
        await self._world.node(self._node).gate(self._incarnation)
        self._world.network.serve(self._node, self._incarnation, handler)

    async def close(self) -> None:
        self._world.network.close_node(self._node, self._incarnation)


class SimRuntime:
    """``runtime.Runtime`` for one incarnation of a simulated node."""

    def __init__(self, world: WorldView, node: str, incarnation: int, storage: Storage, seed: str) -> None:
        self._world = world
        self._sim_node = world.node(node)
        # The loop's clock itself: every read of the time (thousands a simulated second)
        # is then an attribute, not a call of the loop's time().
        self._clock = world.loop.clock
        self.node = node
        self.incarnation = incarnation
        self.advertised_address = node
        self.network: Network = SimNodeNetwork(world, node, incarnation)
        self.storage = storage
        self.random = random.Random(seed)
        self.log = logging.getLogger(f"floodmark.sim.{node}")

    def monotonic(self) -> float:
        return self._clock.now

    def wall_time(self) -> float:
        now = self._clock.now
        return self._world.epoch + now + self._sim_node.clock.skew(now)

    async def sleep(self, seconds: float) -> None:
        node = self._sim_node
        if not node.can_act(self.incarnation) or node.stalls:
            await node.gate(self.incarnation)
        await asyncio.sleep(seconds)
        if not node.can_act(self.incarnation) or node.stalls:
            await node.gate(self.incarnation)

    async def safepoint(self) -> None:
        node = self._sim_node
        if node.stalls:  # else no suspension at all: runs without a stall keep their schedule
            await node.gate(self.incarnation, safepoint=True)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self._sim_node.start_task(self._world.loop, self.incarnation, coro, name, self._report_failure)

    def _report_failure(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self.log.error("task %s failed", task.get_name(), exc_info=error)
            self._world.record_failure(self.node, task.get_name(), error)

    async def coordination(self, session_timeout: float) -> Coordination:
        return await connect(self._world, self.node, self.incarnation, session_timeout)

    def emit(self, event: KnownKind) -> None:
        node = self._sim_node
        if node.alive and node.incarnation == self.incarnation:  # is_current, inline: an event per record
            now = self._clock.now
            self._world.record_event(self.node, self._world.epoch + now + node.clock.skew(now), event)
