"""The simulated world: nodes, network, ZooKeeper and disks in one deterministic process.

A test builds a world from a seed, adds nodes (each gets a :class:`SimRuntime` and its own
disk), runs protocol coroutines on the virtual-time loop and injects faults between steps::

    world = SimWorld(seed=1)
    n1 = world.add_node("n1")
    world.run(broker_on(n1).start())
    cut = world.partition({"n1"}, {"n2", "zk"})
    world.run_for(10.0)
    world.restore(cut)

Everything random (network latency, each node's generator, message-fault draws) flows from
the seed, and nothing depends on real time, so the same seed and the same test give the
same run, event for event. The ZooKeeper server is the node ``"zk"`` for partitions and
cuts; it cannot be crashed or paused (tests that need that use a real ZooKeeper).

Faults, each undone on its own where the fault heals, and each returning or exposing the
evidence that it took effect:

* **process death**: ``kill`` (SIGKILL: the page cache survives, nothing written is lost)
  or ``power_loss`` (every write not yet fsynced is lost, see ``sim.disk``; in a world built
  with ``torn_writes`` a random prefix of each file's unsynced bytes survives instead, cut
  anywhere, as a page cache that wrote some back leaves it); ``crash`` is a power loss.
  Either cancels the node's tasks and breaks its connections, and leaves its ZooKeeper
  session to expire after its timeout; ``restart`` starts the next incarnation on the same
  disk. Both return a :class:`ProcessDeath`;
* **pause** / ``resume`` (SIGSTOP, a long garbage-collection pause);
* **task stall**: ``stall_task`` / ``release_stall`` (one thread of a process stuck, such as
  the controller's event thread, while the rest of the process runs on);
* **links**: ``partition`` and ``cut`` return a ``LinkFault`` that ``restore`` heals alone;
  ``uncut`` heals one cut of a link; ``heal`` lifts every link fault;
* **clocks**: ``set_clock_offset`` (a step), ``set_clock_rate`` (from now on, continuous),
  ``reset_clock``; monotonic time never changes (see ``sim.clock``);
* **disks**: ``disk(name)`` has chmod, replace-with-file and injected I/O errors, each
  healed alone (see ``sim.disk``);
* **ZooKeeper**: ``expire_session`` expires a running node's sessions now;
* **messages**: ``add_message_rule`` drops, delays, duplicates or reorders chosen messages
  (see ``sim.message_faults``).

With ``cpu=CpuCosts()`` each node has one CPU and handling messages takes virtual time
(see ``sim.cpu``); without it (the default) handling is instantaneous. Failures of
background tasks, handlers and watch callbacks are logged and collected in
:attr:`SimWorld.failures` so tests can assert there were none.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from floodmark.contracts.node_event_kinds import KnownKind
from floodmark.contracts.node_events import NodeEvent, event_lines
from floodmark.reference.sim.cpu import CpuCosts, SimCpu
from floodmark.reference.sim.disk import SimDisk
from floodmark.reference.sim.disk_faults import PowerLoss
from floodmark.reference.sim.loop import SimulationDeadlock, VirtualTimeLoop
from floodmark.reference.sim.message_faults import ActiveRule, MessageRule
from floodmark.reference.sim.network import ZK, LinkFault, SimNetwork
from floodmark.reference.sim.node import SimNode, TaskStall
from floodmark.reference.sim.runtime import SimRuntime
from floodmark.reference.sim.zookeeper import SimZooKeeper

T = TypeVar("T")
log = logging.getLogger(__name__)

VIRTUAL_EPOCH = 1_700_000_000.0  # wall time at the start of every simulation


@dataclass(frozen=True)
class ProcessDeath:
    """What a kill or a power loss did to a node: the evidence that it took effect."""

    node: str
    incarnation: int  # the incarnation that died (or had died already)
    was_running: bool
    tasks_cancelled: int
    requests_broken: int  # requests to and from the node that failed with a reset
    disk: PowerLoss  # what its disk lost (a kill loses only an open group commit)


@dataclass(frozen=True)
class SessionExpiry:
    """What expiring a node's ZooKeeper sessions did."""

    node: str
    session_ids: tuple[int, ...]
    ephemerals_deleted: tuple[str, ...]


class SimWorld:
    def __init__(self, seed: int = 0, *, check_wire: bool = True,
                 latency: tuple[float, float] = (0.0005, 0.002), cpu: CpuCosts | None = None,
                 torn_writes: bool = False) -> None:
        self.seed = seed
        # Its own generator, so that a world without torn writes draws exactly what it did.
        self._written_back = random.Random(f"{seed}/torn-writes") if torn_writes else None
        self.loop = VirtualTimeLoop()
        self.epoch = VIRTUAL_EPOCH
        self.cpu_costs = cpu
        self.network = SimNetwork(self, random.Random(f"{seed}/network"), min_latency=latency[0],
                                  max_latency=latency[1], check_wire=check_wire,
                                  fault_rng=random.Random(f"{seed}/message-faults"))
        self.zk = SimZooKeeper()
        self.nodes: dict[str, SimNode] = {}
        self.runtimes: dict[str, SimRuntime] = {}
        self.failures: list[tuple[str, str, BaseException]] = []  # (node, what, error)
        # Each node's events as (wall, body), its seq the position: the envelope is made
        # when someone reads them, most often never (a run writes its files from these).
        self._events: dict[str, list[tuple[float, KnownKind]]] = {}
        self._background: dict[asyncio.Task[Any], None] = {}

    # ------------------------------------------------------------------ nodes

    def add_node(self, name: str, disk: SimDisk | None = None, *, cpu: bool = True) -> SimRuntime:
        """A new node, running its first incarnation. ``cpu=False`` exempts it from the
        world's CPU model (e.g. the node hosting the workload's clients)."""
        if name == ZK or name in self.nodes:
            raise ValueError(f"node name {name!r} is taken")
        node_cpu = SimCpu(self.loop, self.cpu_costs) if cpu and self.cpu_costs is not None else None
        self.nodes[name] = SimNode(name, disk if disk is not None else SimDisk(), node_cpu)
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
        return self.node(name).disk

    def cpu(self, name: str) -> SimCpu | None:
        """The node's CPU (what it worked, how long jobs queued), None without a CPU model."""
        return self.node(name).cpu

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

    # ------------------------------------------------------------------ process faults

    def kill(self, name: str) -> ProcessDeath:
        """SIGKILL: the process dies, the machine does not; nothing it wrote is lost."""
        return self._end_process(name, power_loss=False)

    def power_loss(self, name: str) -> ProcessDeath:
        """The machine loses power: the process dies and every write not yet fsynced is
        lost, data and checkpoints alike. Also after a kill: the page cache goes too."""
        return self._end_process(name, power_loss=True)

    def crash(self, name: str) -> ProcessDeath:
        """A power loss (the name the protocol tests use)."""
        return self.power_loss(name)

    def _end_process(self, name: str, *, power_loss: bool) -> ProcessDeath:
        node = self.node(name)
        was_running = node.alive
        tasks = broken = 0
        if was_running:
            self.network.stop_serving(name, node.incarnation)
            tasks = node.crash()
            broken = self.network.break_connections(name)
        if power_loss:
            written_back = self._written_back
            lost = node.disk.power_loss(
                None if written_back is None else lambda unsynced: written_back.randint(0, unsynced))
        else:
            lost = PowerLoss(0, 0, node.disk.process_killed() if was_running else 0)
        return ProcessDeath(name, node.incarnation, was_running, tasks, broken, lost)

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

    def stall_task(self, name: str, task: str, on_strike: Callable[[], None] | None = None) -> TaskStall:
        """Stall one task of the node (``task``: its name without the node's prefix) at its
        next safepoint, until :meth:`release_stall`; ``on_strike`` runs when it strikes.
        The rest of the process runs on (see ``sim.node``)."""
        return self.node(name).stall(f"{name}:{task}", self.loop.time(), on_strike)

    def release_stall(self, name: str, stall: TaskStall) -> None:
        self.node(name).release(stall)

    # ------------------------------------------------------------------ link faults

    def partition(self, side_a: set[str] | frozenset[str], side_b: set[str] | frozenset[str]) -> LinkFault:
        return self.network.partition(side_a, side_b)

    def cut(self, source: str, destination: str) -> LinkFault:
        return self.network.cut(source, destination)

    def uncut(self, source: str, destination: str) -> None:
        """Heal one cut (or one partition's share) of the link from source to destination."""
        self.network.uncut(source, destination)

    def restore(self, fault: LinkFault) -> None:
        """Heal one partition or cut, leaving the other link faults in force."""
        self.network.restore(fault)

    def heal(self) -> None:
        """Heal every partition and cut."""
        self.network.heal()

    def zk_reachable(self, name: str, incarnation: int) -> bool:
        """Can this incarnation exchange messages with ZooKeeper right now?"""
        node = self.nodes.get(name)
        return (node is not None and node.can_act(incarnation)
                and self.network.link_up(name, ZK) and self.network.link_up(ZK, name))

    # ------------------------------------------------------------------ message faults

    def add_message_rule(self, rule: MessageRule) -> ActiveRule:
        """Put a message rule in force; the handle counts what it does and removes it."""
        return self.network.add_rule(rule)

    def remove_message_rule(self, rule: ActiveRule) -> bool:
        """Take one rule out of force (its held messages go out); False if it was not."""
        return self.network.remove_rule(rule)

    def remove_message_rules(self) -> list[ActiveRule]:
        """Take every rule out of force; returns them, with their counts."""
        rules = list(self.network.message_faults.rules)
        for rule in rules:
            self.network.remove_rule(rule)
        return rules

    # ------------------------------------------------------------------ clock faults

    def set_clock_offset(self, name: str, seconds: float) -> None:
        """From now on the node's wall clock reads real time plus ``seconds`` (a step)."""
        self.node(name).clock.set_offset(self.loop.time(), seconds)

    def set_clock_rate(self, name: str, rate: float) -> None:
        """From now on the node's wall clock runs at ``rate``, from the reading it has now."""
        self.node(name).clock.set_rate(self.loop.time(), rate)

    def reset_clock(self, name: str) -> None:
        """Real time again at real rate (libfaketime's ``+0 x1``)."""
        self.node(name).clock.reset(self.loop.time())

    def clock_skew(self, name: str) -> float:
        """How far the node's wall clock is ahead of real time now (negative: behind)."""
        return self.node(name).clock.skew(self.loop.time())

    # ------------------------------------------------------------------ ZooKeeper faults

    def expire_session(self, name: str) -> SessionExpiry:
        """Expire every ZooKeeper session the node holds, now, while its process runs: the
        server deletes their ephemerals, fires the watches that follow and closes the
        connection, so the client sees SUSPENDED then LOST (see ``sim.coordination``)."""
        self.node(name)
        ids: list[int] = []
        ephemerals: list[str] = []
        for session in self.zk.sessions_of(name):
            ids.append(session.session_id)
            ephemerals += self.zk.expire(session)
        return SessionExpiry(name, tuple(ids), tuple(ephemerals))

    # ------------------------------------------------------------------ observations

    def record_event(self, name: str, wall: float, body: KnownKind) -> None:
        self._events[name].append((wall, body))

    def events(self, name: str) -> list[NodeEvent]:
        return [NodeEvent(name, seq, wall, body) for seq, (wall, body) in enumerate(self._events[name])]

    def event_lines(self, name: str) -> bytes:
        """The node's events as its event file holds them."""
        return event_lines(name, self._events[name])

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
