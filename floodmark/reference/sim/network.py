"""The simulated network: messages between node names, with latency and faults.

Every message travels one directed *link* (source, destination) with a small latency drawn
from the world's seeded generator. Delivery on a link is FIFO, like bytes on one TCP
connection, so a request sent after another never overtakes it.

Faults act on links and nodes, with the effects a real network has on TCP:

* a **partition** or one-way **cut** blocks links: messages on them are silently lost, so a
  request whose request or response is lost ends in ``TimeoutError``;
* a **crashed** node refuses connections (``ConnectionRefusedError``, a ``ConnectionError``)
  and its in-flight requests break with ``ConnectionResetError`` on the other side;
* a **paused** node receives requests but handles them only when it resumes.

Requests go through the wire codec by default, so a message that could not be sent over
TCP fails in the simulation too.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable
from typing import Any, Protocol

from floodmark.reference.protocol import wire
from floodmark.reference.protocol.messages import ErrorResponse
from floodmark.reference.runtime import Handler
from floodmark.reference.sim.loop import VirtualTimeLoop
from floodmark.reference.sim.node import SimNode

ZK = "zk"  # the name of the simulated ZooKeeper server on the network
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"  # a handler raised instead of answering

log = logging.getLogger(__name__)


class _Call:
    """One request in flight, so a crash can break it."""

    def __init__(self, source: str, destination: str, reply: asyncio.Future[Any]) -> None:
        self.source = source
        self.destination = destination
        self.reply = reply


class NetworkWorld(Protocol):
    """What the network uses of its world (``sim.world``, which imports this module)."""

    @property
    def loop(self) -> VirtualTimeLoop: ...

    @property
    def nodes(self) -> dict[str, SimNode]: ...

    def node(self, name: str) -> SimNode: ...

    def record_failure(self, name: str, what: str, error: BaseException) -> None: ...


class SimNetwork:
    def __init__(
        self, world: NetworkWorld, rng: random.Random, *,
        min_latency: float = 0.0005, max_latency: float = 0.002, check_wire: bool = True,
    ) -> None:
        self.world = world
        self.random = rng
        self.min_latency = min_latency
        self.max_latency = max_latency
        self.check_wire = check_wire
        self.blocked: set[tuple[str, str]] = set()  # directed links that lose every message
        self._last_arrival: dict[tuple[str, str], float] = {}
        self._handlers: dict[str, tuple[int, Handler]] = {}  # node -> (incarnation, handler)
        self._calls: dict[_Call, None] = {}
        self._handling: dict[str, dict[asyncio.Task[Any], None]] = {}  # node -> handler tasks

    # ------------------------------------------------------------------ faults

    def partition(self, side_a: set[str] | frozenset[str], side_b: set[str] | frozenset[str]) -> None:
        for a in sorted(side_a):
            for b in sorted(side_b):
                self.blocked.add((a, b))
                self.blocked.add((b, a))

    def cut(self, source: str, destination: str) -> None:
        self.blocked.add((source, destination))

    def heal(self) -> None:
        self.blocked.clear()

    def link_up(self, source: str, destination: str) -> bool:
        return (source, destination) not in self.blocked

    # ------------------------------------------------------------------ transport

    def deliver(
        self, source: str, destination: str, on_arrival: Callable[[], None],
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        """Carry one message; ``on_arrival`` runs at the destination unless the link drops it."""
        loop = self.world.loop
        link = (source, destination)
        arrival = loop.time() + self.random.uniform(self.min_latency, self.max_latency)
        # Strictly later than the previous message on the link: the loop's timer heap does
        # not keep insertion order among equal times.
        arrival = max(arrival, math.nextafter(self._last_arrival.get(link, -1.0), math.inf))
        self._last_arrival[link] = arrival

        def arrive() -> None:
            if self.link_up(source, destination):
                on_arrival()
            elif on_lost is not None:
                on_lost()

        loop.call_at(arrival, arrive)

    def serve(self, node: str, incarnation: int, handler: Handler) -> None:
        self._handlers[node] = (incarnation, handler)

    def stop_serving(self, node: str, incarnation: int) -> None:
        if self._handlers.get(node, (None,))[0] == incarnation:
            del self._handlers[node]

    def close_node(self, node: str, incarnation: int) -> None:
        """The node closed its network: stop serving, drop handlers in progress, break its calls."""
        if self._handlers.get(node, (None,))[0] != incarnation:
            return
        self.stop_serving(node, incarnation)
        for task in list(self._handling.pop(node, {})):
            if task is not asyncio.current_task():
                task.cancel()
        self.break_connections(node, f"{node} closed its connections")

    async def request(self, source: str, incarnation: int, destination: str, message: Any,
                      timeout: float) -> Any:
        node = self.world.node(source)
        await node.gate(incarnation)
        if self.check_wire:
            message = wire.round_trip(message)
        reply: asyncio.Future[Any] = self.world.loop.create_future()
        call = _Call(source, destination, reply)
        self._calls[call] = None
        self.deliver(source, destination, lambda: self._arrive(call, message))
        try:
            return await asyncio.wait_for(reply, timeout)
        finally:
            self._calls.pop(call, None)
            await node.gate(incarnation)

    def _arrive(self, call: _Call, message: Any) -> None:
        target = self.world.nodes.get(call.destination)
        serving = self._handlers.get(call.destination)
        if target is None or serving is None or not target.is_current(serving[0]):
            self._answer_with_error(call, ConnectionRefusedError(f"{call.destination} refused the connection"))
            return
        incarnation, handler = serving
        task = target.start_task(self.world.loop, incarnation, self._handle(call, handler, message),
                                 f"handle {type(message).__name__} from {call.source}")
        handling = self._handling.setdefault(call.destination, {})
        handling[task] = None
        task.add_done_callback(lambda t: handling.pop(t, None))

    async def _handle(self, call: _Call, handler: Handler, message: Any) -> None:
        try:
            response = await handler(call.source, message)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a handler bug must not take the node down; the caller hears of it
            log.exception("%s: handler failed on %s", call.destination, type(message).__name__)
            self.world.record_failure(call.destination, f"handler for {type(message).__name__}", e)
            response = ErrorResponse(UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")
        if self.check_wire:
            response = wire.round_trip(response)
        self.deliver(call.destination, call.source, lambda: _resolve(call.reply, response))

    def _answer_with_error(self, call: _Call, error: Exception) -> None:
        self.deliver(call.destination, call.source, lambda: _fail(call.reply, error))

    def break_connections(self, node: str, why: str | None = None) -> None:
        """A node crashed or closed its network: requests to it and from it die with a reset."""
        for call in list(self._calls):
            if node in (call.source, call.destination):
                peer = call.source if call.destination == node else call.destination
                error = ConnectionResetError(f"connection to {peer} reset: {why or f'{node} crashed'}")
                self.world.loop.call_soon(_fail, call.reply, error)


def _resolve(reply: asyncio.Future[Any], value: Any) -> None:
    if not reply.done():
        reply.set_result(value)


def _fail(reply: asyncio.Future[Any], error: Exception) -> None:
    if not reply.done():
        reply.set_exception(error)
