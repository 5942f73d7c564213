"""The simulated network: messages between node names, with latency and faults.

Every message travels one directed *link* (source, destination) with a small latency drawn
from the world's seeded generator. Delivery on a link is FIFO, like bytes on one TCP
connection, so a request sent after another never overtakes it.

Faults act on links and nodes, with the effects a real network has on TCP:

* a **partition** or one-way **cut** blocks links: messages on them are silently lost, so a
  request whose request or response is lost ends in ``TimeoutError``. Each partition or cut
  is a :class:`LinkFault` that is healed on its own (``restore``, ``uncut``): a link stays
  blocked while any fault in force blocks it, so overlapping faults heal independently;
  ``heal`` lifts them all. ``lost`` counts the messages each blocked link lost;
* a **crashed** node refuses connections (``ConnectionRefusedError``, a ``ConnectionError``)
  and its in-flight requests break with ``ConnectionResetError`` on the other side;
* a **paused** node receives requests but handles them only when it resumes;
* **message rules** drop, delay, duplicate or reorder chosen messages (see
  ``sim.message_faults``); with no rule in force, delivery does not consult them at all.

Requests go through the wire codec by default, so a message that could not be sent over
TCP fails in the simulation too. With a CPU model (``sim.cpu``), handling takes virtual
time on the receiving node.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from floodmark.reference.protocol import wire
from floodmark.reference.protocol.messages import ErrorResponse
from floodmark.reference.runtime import Handler
from floodmark.reference.sim.cpu import CpuCosts
from floodmark.reference.sim.loop import VirtualTimeLoop
from floodmark.reference.sim.message_faults import ActiveRule, MessageFaults, MessageRule
from floodmark.reference.sim.node import SimNode

ZK = "zk"  # the name of the simulated ZooKeeper server on the network
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"  # a handler raised instead of answering

Link = tuple[str, str]  # (source, destination)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LinkFault:
    """The directed links one partition or cut blocks, until it is restored."""

    links: tuple[Link, ...]


@dataclass(frozen=True)
class _Delivery:
    """A message on its way, as a rule holds it."""

    on_arrival: Callable[[], None]
    on_lost: Callable[[], None] | None
    latency: float


class _Call:
    """One request in flight, so a crash can break it, and what its response needs on arrival."""

    __slots__ = ("source", "destination", "reply", "requester", "timeout", "charged", "priced_by", "price",
                 "handler")

    def __init__(self, source: str, destination: str, reply: asyncio.Future[Any], requester: SimNode) -> None:
        self.source = source
        self.destination = destination
        self.reply = reply
        self.requester = requester
        self.timeout: asyncio.TimerHandle | None = None
        self.charged = False  # the requester's CPU has been charged for reading the response
        # What the response costs, as the responder's costs priced it: the requester, whose
        # costs are nearly always the same, reads the price instead of counting again.
        self.priced_by: CpuCosts | None = None
        self.price = 0.0
        self.handler: asyncio.Task[Any] | None = None  # the responder's task handling it


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
        fault_rng: random.Random | None = None,
    ) -> None:
        self.world = world
        self.random = rng
        self.min_latency = min_latency
        self.max_latency = max_latency
        self.check_wire = check_wire
        self._blocked: dict[Link, int] = {}  # directed link -> how many faults in force block it
        self.lost: Counter[Link] = Counter()  # messages lost to blocked links, per link
        self.message_faults = MessageFaults(fault_rng or random.Random(0))
        self._held: dict[Link, tuple[_Delivery, ActiveRule]] = {}  # reordered, waiting for the next
        self._last_arrival: dict[Link, float] = {}
        self._handlers: dict[str, tuple[int, Handler]] = {}  # node -> (incarnation, handler)
        self._calls: dict[_Call, None] = {}
        self._handling: dict[str, dict[asyncio.Task[Any], None]] = {}  # node -> handler tasks

    # ------------------------------------------------------------------ link faults

    def partition(self, side_a: set[str] | frozenset[str], side_b: set[str] | frozenset[str]) -> LinkFault:
        links: list[Link] = []
        for a in sorted(side_a):
            for b in sorted(side_b):
                links += [(a, b), (b, a)]
        return self._block(links)

    def cut(self, source: str, destination: str) -> LinkFault:
        return self._block([(source, destination)])

    def _block(self, links: list[Link]) -> LinkFault:
        for link in links:
            self._blocked[link] = self._blocked.get(link, 0) + 1
        return LinkFault(tuple(links))

    def restore(self, fault: LinkFault) -> None:
        """Heal one partition or cut: its links carry messages again unless another fault
        in force blocks them too."""
        for link in fault.links:
            self._unblock(link)

    def uncut(self, source: str, destination: str) -> None:
        """Heal one fault blocking the link from ``source`` to ``destination``."""
        if (source, destination) not in self._blocked:
            raise ValueError(f"the link {source} -> {destination} is not cut")
        self._unblock((source, destination))

    def _unblock(self, link: Link) -> None:
        count = self._blocked.get(link, 0)
        if count > 1:
            self._blocked[link] = count - 1
        else:
            self._blocked.pop(link, None)

    def heal(self) -> None:
        """Lift every partition and cut."""
        self._blocked.clear()

    @property
    def blocked(self) -> frozenset[Link]:
        """The directed links that lose every message now."""
        return frozenset(self._blocked)

    def link_up(self, source: str, destination: str) -> bool:
        return (source, destination) not in self._blocked

    # ------------------------------------------------------------------ message faults

    def add_rule(self, rule: MessageRule) -> ActiveRule:
        return self.message_faults.add(rule)

    def remove_rule(self, active: ActiveRule) -> bool:
        """Take a rule out of force and send the messages it still holds; False if it was
        not in force."""
        if not self.message_faults.remove(active):
            return False
        for link in sorted(link for link, (_, rule) in self._held.items() if rule is active):
            self._release(link)
        return True

    # ------------------------------------------------------------------ transport

    def deliver(
        self, source: str, destination: str, on_arrival: Callable[[], None],
        on_lost: Callable[[], None] | None = None, kind: str = "",
    ) -> None:
        """Carry one message of type ``kind``; ``on_arrival`` runs at the destination unless
        the link or a message rule loses it (``on_lost`` runs when a blocked link did).

        Every message draws its latency once, whatever a rule does with it: a rule changes
        no draw by itself, only the consequences of what it did to a message can."""
        link = (source, destination)
        # random.uniform's own expression, without its call: one draw per message.
        latency = self.min_latency + (self.max_latency - self.min_latency) * self.random.random()
        if self.message_faults.rules and kind:
            rule = self.message_faults.decide(kind, source, destination)
            if rule is not None:
                self._act(rule, link, _Delivery(on_arrival, on_lost, latency))
                return
        self._schedule(link, on_arrival, on_lost, latency)
        if self._held and link in self._held:
            self._release(link)

    def _act(self, rule: ActiveRule, link: Link, delivery: _Delivery) -> None:
        action = rule.rule.action
        if action == "drop":
            if delivery.on_lost is not None:
                delivery.on_lost()  # the sender learns of the loss as it would of a cut link's
            return
        if action == "reorder":
            if link not in self._held:
                self._held[link] = (delivery, rule)
                return
            # One message is held per link already: this one is the next message it waits
            # for, and goes first.
            rule.acted -= 1
        arrival = self._schedule(link, delivery.on_arrival, delivery.on_lost, delivery.latency,
                                 rule.rule.delay if action == "delay" else 0.0)
        if action == "duplicate":
            self._schedule(link, delivery.on_arrival, delivery.on_lost, arrival - self.world.loop.time())
        if link in self._held:
            self._release(link)

    def _release(self, link: Link) -> None:
        """Send the message held on ``link``: it arrives after the one sent before it."""
        held, _ = self._held.pop(link)
        self._schedule(link, held.on_arrival, held.on_lost, held.latency)

    def _schedule(self, link: Link, on_arrival: Callable[[], None], on_lost: Callable[[], None] | None,
                  latency: float, delay: float = 0.0) -> float:
        loop = self.world.loop
        # Not before the previous message on the link; at the same time it still arrives
        # after it, as the loop runs timers due together in the order they were set.
        arrival = max(loop.time() + latency, self._last_arrival.get(link, 0.0))
        if delay:
            arrival += delay  # travels on its own: later messages on the link overtake it
        else:
            self._last_arrival[link] = arrival
        loop.plain_call_at(arrival, self._land, link, on_arrival, on_lost)
        return arrival

    def _land(self, link: Link, on_arrival: Callable[[], None], on_lost: Callable[[], None] | None) -> None:
        """A message reaches the end of its link, unless a fault blocks the link now."""
        if link not in self._blocked:
            on_arrival()
            return
        self.lost[link] += 1
        if on_lost is not None:
            on_lost()

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
        tasks = self.world.node(node).tasks
        current = asyncio.current_task()
        for task in list(self._handling.pop(node, {})):
            if task is not current:
                task.cancel()
                tasks.pop(task, None)  # a handler cancelled before it started cannot forget itself
        self.break_connections(node, f"{node} closed its connections")

    async def request(self, source: str, incarnation: int, destination: str, message: Any,
                      timeout: float) -> Any:
        world = self.world
        node = world.nodes.get(source) or world.node(source)
        if not node.alive or node.incarnation != incarnation or node.paused:  # can_act, inline
            await node.gate(incarnation)
        if self.check_wire:
            message = wire.round_trip(message)
        loop = world.loop
        reply: asyncio.Future[Any] = loop.create_future()
        call = _Call(source, destination, reply, node)
        self._calls[call] = None
        self._carry(source, destination, type(message).__name__, self._land_request, call, message)
        # A plain timer on the reply, not asyncio.wait_for: one timer and no extra future or
        # callback per request. The response's arrival cancels it (see ``_land_response``).
        call.timeout = timer = loop.call_at(loop.clock.now + timeout, _time_out, reply)
        try:
            response = await reply
        finally:
            if call.timeout is not None:  # else the response's arrival cancelled it already
                timer.cancel()
            self._calls.pop(call, None)
            if not node.alive or node.incarnation != incarnation or node.paused:
                await node.gate(incarnation)
        if node.cpu is not None and not call.charged:
            # The response arrived while the node was paused: it reads it now it has resumed.
            await node.cpu.handle(response)
            if not node.can_act(incarnation):
                await node.gate(incarnation)
        return response

    def _carry(self, source: str, destination: str, kind: str,
               land: Callable[[Link, _Call, Any], None], call: _Call, message: Any) -> None:
        """:meth:`deliver` for a request or a response: ``land(link, call, message)`` runs
        when it reaches the end of its link. With no message rule in force (nearly always)
        the timer calls ``land`` itself, without a closure per message; with rules, the
        message takes :meth:`deliver`'s path, with the same draws."""
        if self.message_faults.rules:
            self.deliver(source, destination, lambda: land((source, destination), call, message), kind=kind)
            return
        link = (source, destination)
        latency = self.min_latency + (self.max_latency - self.min_latency) * self.random.random()
        loop = self.world.loop
        # _schedule's steps (no delay here), without its call.
        arrival = loop.clock.now + latency
        last = self._last_arrival.get(link, 0.0)
        if last > arrival:
            arrival = last
        self._last_arrival[link] = arrival
        loop.plain_call_at(arrival, land, link, call, message)
        if self._held and link in self._held:
            self._release(link)

    def _land_response(self, link: Link, call: _Call, response: Any) -> None:
        """The response reached the end of its link, unless a fault blocks the link now. Then
        it reached the requester: the timeout no longer applies and the connection's fate no
        longer matters; its CPU reads the response, then the caller has it."""
        if link in self._blocked:
            self.lost[link] += 1
            return
        reply = call.reply
        if reply.done():
            return
        if call.timeout is not None:
            call.timeout.cancel()
            call.timeout = None
        self._calls.pop(call, None)
        cpu = call.requester.cpu
        if cpu is None or call.requester.paused:
            reply.set_result(response)
            return
        call.charged = True
        costs = cpu.costs
        price = call.price if call.priced_by is costs else costs.cost(response)
        self.world.loop.plain_call_at(cpu.charge(price), _resolve, reply, response)

    def _land_request(self, link: Link, call: _Call, message: Any) -> None:
        """The request reached the end of its link, unless a fault blocks the link now. Then
        the destination refuses the connection, or starts a handler once its CPU has read it."""
        if link in self._blocked:
            self.lost[link] += 1
            return
        target = self.world.nodes.get(call.destination)
        serving = self._handlers.get(call.destination)
        if target is None or serving is None or not target.alive or target.incarnation != serving[0]:
            self._answer_with_error(call, ConnectionRefusedError(f"{call.destination} refused the connection"))
            return
        cpu = target.cpu
        if cpu is None or target.paused:
            self._start_handler(call, message, target, serving, False)
            return
        # The CPU works through the request after the work queued before it; the handler
        # starts when that is done: one timer, not a task sleeping in the queue.
        self.world.loop.plain_call_at(cpu.charge(cpu.costs.cost(message)), self._start_handler,
                                      call, message, target, serving, True)

    def _start_handler(self, call: _Call, message: Any, target: SimNode, serving: tuple[int, Handler],
                       charged: bool) -> None:
        incarnation, handler = serving
        if (self._handlers.get(call.destination) is not serving or not target.alive
                or target.incarnation != incarnation):
            return  # the process died or closed its network meanwhile: the caller heard of it
        # One of the node's tasks, as SimNode.start_task makes them, but without a done
        # callback (a turn of the loop per request): _handle forgets itself when it ends, and
        # whoever cancels it before it starts (a crash, closing the network) forgets it then.
        call.handler = task = self.world.loop.create_task(
            self._handle(call, handler, message, target, incarnation, charged),
            name=f"{target.name}:handle {type(message).__name__} from {call.source}")
        target.tasks[task] = None
        handling = self._handling.get(call.destination)
        if handling is None:
            handling = self._handling[call.destination] = {}
        handling[task] = None

    async def _handle(self, call: _Call, handler: Handler, message: Any, node: SimNode, incarnation: int,
                      charged: bool) -> None:
        try:
            if not node.alive or node.incarnation != incarnation or node.paused:  # can_act, inline
                await node.gate(incarnation)
            cpu = node.cpu
            if cpu is not None and not charged:  # arrived while the node was paused: work on it now
                await cpu.handle(message)
                await node.gate(incarnation)  # paused while its CPU worked: the handler waits
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
            if cpu is None:
                self._send_response(call, response, node, incarnation)
            else:
                # Building the response takes CPU time; it leaves when that is done.
                call.priced_by = costs = cpu.costs
                call.price = price = costs.cost(response)
                self.world.loop.plain_call_at(cpu.charge(price), self._send_response, call, response, node,
                                              incarnation)
        finally:
            self._forget_handler(call, node)

    def _forget_handler(self, call: _Call, node: SimNode) -> None:
        task = call.handler
        if task is not None:
            node.tasks.pop(task, None)
            handling = self._handling.get(call.destination)
            if handling is not None:
                handling.pop(task, None)

    def _send_response(self, call: _Call, response: Any, node: SimNode, incarnation: int) -> None:
        if (not node.alive or node.incarnation != incarnation
                or self._handlers.get(call.destination, (None,))[0] != incarnation):
            return  # died or closed its network before the response left: it never does
        if node.paused:
            # Paused before the response left: it leaves when the node resumes.
            async def send_on_resume() -> None:
                self._send_response(call, response, node, incarnation)

            node.start_task(self.world.loop, incarnation, send_on_resume(),
                            f"send {type(response).__name__} to {call.source}")
            return
        self._carry(call.destination, call.source, type(response).__name__, self._land_response, call, response)

    def _answer_with_error(self, call: _Call, error: Exception) -> None:
        # A refused connection is not a message: no rule acts on it.
        self.deliver(call.destination, call.source, lambda: _fail(call.reply, error))

    def break_connections(self, node: str, why: str | None = None) -> int:
        """A node crashed or closed its network: requests to it and from it die with a reset.
        Returns how many requests broke."""
        broken = 0
        for call in list(self._calls):
            if node in (call.source, call.destination):
                peer = call.source if call.destination == node else call.destination
                error = ConnectionResetError(f"connection to {peer} reset: {why or f'{node} crashed'}")
                self.world.loop.call_soon(_fail, call.reply, error)
                broken += 1
        return broken


def _resolve(reply: asyncio.Future[Any], value: Any) -> None:
    if not reply.done():
        reply.set_result(value)


def _time_out(reply: asyncio.Future[Any]) -> None:
    if not reply.done():
        reply.set_exception(TimeoutError())


def _fail(reply: asyncio.Future[Any], error: Exception) -> None:
    if not reply.done():
        reply.set_exception(error)
