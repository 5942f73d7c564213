"""The simulated world: nodes, network, ZooKeeper and disks in one deterministic process.

A test builds a world from a seed, adds nodes (each gets a :class:`SimRuntime` and its own
disk), runs protocol coroutines on the virtual-time loop and injects faults between steps::

    world = SimWorld(seed=1)
    n1 = world.add_node("n1")
    world.run(broker_on(n1).start())
    world.partition({"n1"}, {"n2", "zk"})
    world.run_for(10.0)
    world.heal()

Everything random (network latency, each node's generator) flows from the seed, and
nothing depends on real time, so the same seed and the same test give the same run, event
for event. The ZooKeeper server is the node ``"zk"`` for partitions and cuts; it cannot be
crashed or paused (tests that need that use a real ZooKeeper).

A crash cancels the node's tasks, breaks its connections, drops its unsynced disk writes and
leaves its ZooKeeper session to expire after its timeout; ``restart`` starts the next
incarnation on the same disk. Failures of background tasks, handlers and watch callbacks are
logged and collected in :attr:`SimWorld.failures` so tests can assert there were none.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from floodmark.node_events import NodeEvent
from floodmark.reference.sim.disk import SimDisk
from floodmark.reference.sim.loop import SimulationDeadlock, VirtualTimeLoop
from floodmark.reference.sim.network import ZK, SimNetwork
from floodmark.reference.sim.node import SimNode
from floodmark.reference.sim.runtime import SimRuntime
from floodmark.reference.sim.zookeeper import SimZooKeeper

T = TypeVar("T")
log = logging.getLogger(__name__)

VIRTUAL_EPOCH = 1_700_000_000.0  # wall time at the start of every simulation


class SimWorld:
    def __init__(self, seed: int = 0, *, check_wire: bool = True,
                 latency: tuple[float, float] = (0.0005, 0.002)) -> None:
        self.seed = seed
        self.loop = VirtualTimeLoop()
        self.epoch = VIRTUAL_EPOCH
        self.network = SimNetwork(self, random.Random(f"{seed}/network"), min_latency=latency[0],
                                  max_latency=latency[1], check_wire=check_wire)
        self.zk = SimZooKeeper()
        self.nodes: dict[str, SimNode] = {}
        self.runtimes: dict[str, SimRuntime] = {}
        self.failures: list[tuple[str, str, BaseException]] = []  # (node, what, error)
        self._events: dict[str, list[NodeEvent]] = {}
        self._background: dict[asyncio.Task[Any], None] = {}

    # ------------------------------------------------------------------ nodes

    def add_node(self, name: str, disk: SimDisk | None = None) -> SimRuntime:
        if name == ZK or name in self.nodes:
            raise ValueError(f"node name {name!r} is taken")
        self.nodes[name] = SimNode(name, disk if disk is not None else SimDisk())
        self._events[name] = []
        return self._new_runtime(name)

    def node(self, name: str) -> SimNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no simulated node {name!r}") from None

    def runtime(self, name: str) -> SimRuntime:
        """The runtime of the node's current incarnation."""
        return self.runtimes[name]

    def disk(self, name: str) -> SimDisk:
        return self.node(name).disk  # type: ignore[no-any-return]

    def _new_runtime(self, name: str) -> SimRuntime:
        node = self.nodes[name]
        runtime = SimRuntime(self, name, node.incarnation, node.disk,
                             seed=f"{self.seed}/{name}/{node.incarnation}")
        self.runtimes[name] = runtime
        return runtime

    # ------------------------------------------------------------------ running

    def run(self, coro: Awaitable[T]) -> T:
        """Run a coroutine on the virtual-time loop until it finishes; returns its result."""
        try:
            return self.loop.run_until_complete(coro)
        except SimulationDeadlock as e:
            waiting = sorted(t.get_name() for t in asyncio.all_tasks(self.loop) if not t.done())
            raise SimulationDeadlock(f"{e}; tasks waiting: {', '.join(waiting) or 'none'}") from None

    def run_for(self, seconds: float) -> None:
        self.run(asyncio.sleep(seconds))

    def run_until(self, predicate: Callable[[], bool], timeout: float, *, step: float = 0.01) -> bool:
        """Advance time until ``predicate()`` holds (True) or ``timeout`` virtual seconds pass (False)."""

        async def wait() -> bool:
            deadline = self.loop.time() + timeout
            while not predicate():
                if self.loop.time() >= deadline:
                    return False
                await asyncio.sleep(step)
            return True

        return self.run(wait())

    def now(self) -> float:
        return self.loop.time()

    def start_background(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """A task of the world itself (not of any node), e.g. ZooKeeper session heartbeats."""
        task = self.loop.create_task(coro, name=name)
        self._background[task] = None
        task.add_done_callback(lambda t: self._background.pop(t, None))
        return task

    # ------------------------------------------------------------------ faults

    def crash(self, name: str) -> None:
        node = self.node(name)
        if not node.alive:
            return
        self.network.stop_serving(name, node.incarnation)
        node.crash()
        self.network.break_connections(name)
        node.disk.crash()

    def restart(self, name: str) -> SimRuntime:
        node = self.node(name)
        if node.alive:
            raise RuntimeError(f"{name} is running; crash it before restarting it")
        node.restart()
        return self._new_runtime(name)

    def pause(self, name: str) -> None:
        self.node(name).pause()

    def resume(self, name: str) -> None:
        self.node(name).resume()

    def partition(self, side_a: set[str] | frozenset[str], side_b: set[str] | frozenset[str]) -> None:
        self.network.partition(side_a, side_b)

    def cut(self, source: str, destination: str) -> None:
        self.network.cut(source, destination)

    def heal(self) -> None:
        self.network.heal()

    def set_clock_offset(self, name: str, seconds: float) -> None:
        self.node(name).clock_offset = seconds

    def zk_reachable(self, name: str, incarnation: int) -> bool:
        """Can this incarnation exchange messages with ZooKeeper right now?"""
        node = self.nodes.get(name)
        return (node is not None and node.can_act(incarnation)
                and self.network.link_up(name, ZK) and self.network.link_up(ZK, name))

    # ------------------------------------------------------------------ observations

    def record_event(self, name: str, wall: float, kind: str, fields: dict[str, Any]) -> None:
        events = self._events[name]
        events.append(NodeEvent(name, len(events), wall, kind, dict(fields)))

    def events(self, name: str) -> list[NodeEvent]:
        return list(self._events[name])

    def record_failure(self, name: str, what: str, error: BaseException) -> None:
        self.failures.append((name, what, error))

    # ------------------------------------------------------------------ teardown

    def close(self) -> None:
        """Cancel every task still running and close the loop."""
        if self.loop.is_closed():
            return
        tasks = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self.loop.close()

    def __enter__(self) -> SimWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
