"""Fault plans: what a nemesis decided, handed to a backend that knows how to do it.

A nemesis *plans* (a pure function of the seed, the fault's shape and a snapshot of the
cluster: :class:`ClusterView`); a backend *applies* (iptables, signals, libfaketime and chmod
on real nodes; state changes in the simulated world) and reports evidence that the fault took
effect. The plan is the contract between the two, so it names nodes, never how to reach them:

- :class:`NetworkCut`: for each node, the nodes whose packets it drops (a *grudge*);
- :class:`ProcessCrash`: a broker killed (SIGKILL), stopped cleanly (SIGTERM: controlled
  shutdown) or powered off (every write it had not synced is lost); restarted on heal;
- :class:`ProcessPause`: a broker frozen (SIGSTOP) for ``seconds``, resumed then or on heal;
- :class:`ClockSkew`: brokers' wall clocks stepped by an offset and run at a rate, from now;
- :class:`ClockStrobe`: brokers' wall clocks flipping between true time and an offset;
- :class:`DiskFault`: a log directory made unusable (``chmod 000`` or replaced by a file);
- :class:`SessionExpiry`: a broker's ZooKeeper session expired while the process lives on;
- :class:`ThreadStall`: one thread of a broker stuck (the controller's event thread) while the
  rest of the process runs on, optionally with the broker's session expired meanwhile;
- :class:`MessageFault`: messages of one type dropped, delayed, duplicated or reordered;
- :class:`DoubleRoll`: an upgrade of the inter-broker protocol, every broker restarted cleanly
  twice, one at a time (see ``floodmark.nemesis.upgrade``); healing undoes nothing;
- admin operations, Jepsen's "membership" faults, which the harness performs through the
  admin client the way an operator would, on every backend: :class:`Reassignment` (replicas
  moved, and with KIP-236 possibly cancelled mid-way), :class:`PreferredElection` and
  :class:`PartitionsAdded`.

Every plan describes itself as plain data (:meth:`FaultPlan.describe`) for the history and
``schedule.json``. A backend says up front which plans it cannot apply
(:meth:`FaultApplier.refuses`), so a run never starts with a fault it would skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Protocol

Evidence = dict[str, Any]


@dataclass(frozen=True)
class BrokerSlot:
    """One broker as a planner sees it: node name, broker id, log directories."""

    name: str
    broker_id: int
    log_dirs: tuple[str, ...]


@dataclass(frozen=True)
class ClusterView:
    """A snapshot of the cluster taken when a fault starts: its layout and who holds which role.

    ``controller`` and ``leaders`` are broker ids read from ZooKeeper at that moment (None or
    absent mid-election); planners aim at roles through them and record what they saw.
    """

    zookeeper: str
    brokers: tuple[BrokerSlot, ...]
    partitions: tuple[tuple[str, int], ...] = ()
    session_timeout: float = 6.0
    controller: int | None = None
    leaders: Mapping[tuple[str, int], int] = field(default_factory=dict)
    # Each partition's assigned replicas (preferred leader first), as ZooKeeper has them now:
    # admin faults plan from it. It may list partitions an admin fault added.
    replicas: Mapping[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)
    # The inter-broker protocol version each broker (by node name) starts at when it starts
    # next: the run's, or what an upgrade moved it to. The upgrade nemesis plans from it.
    protocols: Mapping[str, str] = field(default_factory=dict)

    @property
    def broker_names(self) -> list[str]:
        return [b.name for b in self.brokers]

    @property
    def node_names(self) -> list[str]:
        return [self.zookeeper, *self.broker_names]

    def broker(self, broker_id: int | None) -> BrokerSlot | None:
        return next((b for b in self.brokers if b.broker_id == broker_id), None)

    def slot(self, name: str) -> BrokerSlot:
        for b in self.brokers:
            if b.name == name:
                return b
        raise KeyError(f"no broker named {name!r}")


class FaultPlan:
    """A planned fault: its kind, and a description as plain data."""

    kind: ClassVar[str]
    # Healing waits for something that takes long (the rest of an upgrade's roll): the fault
    # driver heals it in the background, so the schedule's other faults start on time.
    heals_in_background: ClassVar[bool] = False

    def describe(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload, no-any-return]

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes this fault acts on (for refusal messages and coverage)."""
        return ()


@dataclass(frozen=True)
class NodeFault(FaultPlan):
    """A fault on one node: its process, its disk or its ZooKeeper session."""

    node: str

    @property
    def nodes(self) -> tuple[str, ...]:
        return (self.node,)


@dataclass(frozen=True)
class NetworkCut(FaultPlan):
    kind: ClassVar[str] = "partition"
    # (node, the nodes whose packets it drops), sorted by node.
    drops: tuple[tuple[str, tuple[str, ...]], ...]

    def describe(self) -> dict[str, Any]:
        return {"drops": {node: list(sources) for node, sources in self.drops}}

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(node for node, _ in self.drops)

    def links(self) -> list[tuple[str, str]]:
        """Directed (source, destination) pairs that stop carrying messages."""
        return [(source, node) for node, sources in self.drops for source in sources]


CrashMode = Literal["kill", "terminate", "power-loss"]


@dataclass(frozen=True)
class ProcessCrash(NodeFault):
    kind: ClassVar[str] = "kill"
    mode: CrashMode  # kill: SIGKILL; terminate: SIGTERM (controlled shutdown); power-loss


@dataclass(frozen=True)
class ProcessPause(NodeFault):
    kind: ClassVar[str] = "pause"
    seconds: float  # resumed after this long, or at heal, whichever comes first
    session_timeout: float  # what the pause is measured against (short or long)


@dataclass(frozen=True)
class ClockSkew(FaultPlan):
    kind: ClassVar[str] = "clock"
    # (node, offset seconds, rate): from the moment it is applied, the node's wall clock reads
    # true time + offset and then advances ``rate`` seconds per second.
    clocks: tuple[tuple[str, float, float], ...]

    def describe(self) -> dict[str, Any]:
        return {"clocks": {node: {"offset": offset, "rate": rate} for node, offset, rate in self.clocks}}

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(node for node, _, _ in self.clocks)


@dataclass(frozen=True)
class ClockStrobe(FaultPlan):
    kind: ClassVar[str] = "clock"
    targets: tuple[str, ...]
    delta: float  # seconds the clocks jump to and back from
    period: float  # seconds between flips

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.targets


DiskMode = Literal["chmod", "replace-with-file"]


@dataclass(frozen=True)
class DiskFault(NodeFault):
    kind: ClassVar[str] = "disk"
    directory: str
    mode: DiskMode


@dataclass(frozen=True)
class SessionExpiry(NodeFault):
    kind: ClassVar[str] = "session"


StalledThread = Literal["controller"]


@dataclass(frozen=True)
class ThreadStall(NodeFault):
    kind: ClassVar[str] = "stall"
    thread: StalledThread  # "controller": the event thread of the broker's controller
    # Expire the broker's ZooKeeper session once the thread is stuck: it comes back to a
    # session, and maybe an office, that changed under it (KAFKA-6082).
    expire_session: bool = False


MessageAction = Literal["drop", "delay", "duplicate", "reorder"]


@dataclass(frozen=True)
class MessageFault(FaultPlan):
    kind: ClassVar[str] = "message"
    message: str  # a message type name ("ReplicaFetchResponse", "LeaderAndIsrRequest", "zookeeper-reply")
    action: MessageAction
    delay: float = 0.0  # seconds, for "delay"
    probability: float = 1.0  # each matching message is hit with this probability
    source: str | None = None  # only messages from this node (None: any)
    destination: str | None = None  # only messages to this node (None: any)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for n in (self.source, self.destination) if n is not None)


# The kinds of plan a failover fault's steps are (``floodmark.nemesis.failover``: message
# faults, cuts, session expiries, stalls, crashes): healing every failover fault heals these.
FAILOVER_PLAN_KINDS = ("message", "partition", "session", "stall", "kill")


# The inter-broker protocol version an upgrade moves brokers to (``reference.protocol.
# inter_broker_protocol.KIP_343``, named here too: planners do not reach into the reference).
UPGRADE_TARGET = "kip-343"


@dataclass(frozen=True)
class DoubleRoll(FaultPlan):
    kind: ClassVar[str] = "upgrade"
    heals_in_background: ClassVar[bool] = True
    # (roll, node, broker id, version) in the order they happen: roll 1 restarts each broker
    # at the version it runs ("new software, old protocol"), roll 2 at the new version.
    steps: tuple[tuple[int, str, int, str], ...]

    def describe(self) -> dict[str, Any]:
        return {"steps": [{"roll": roll, "node": node, "version": version}
                          for roll, node, _, version in self.steps]}

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(node for _, node, _, _ in self.steps))


@dataclass(frozen=True)
class Reassignment(FaultPlan):
    kind: ClassVar[str] = "admin"
    # (topic, partition, its new replicas by broker id, preferred leader first).
    moves: tuple[tuple[str, int, tuple[int, ...]], ...]
    cancel_on_heal: bool  # KIP-236: healing cancels what has not completed by then

    def describe(self) -> dict[str, Any]:
        return {"moves": {f"{topic}/{partition}": list(replicas) for topic, partition, replicas in self.moves},
                "cancel_on_heal": self.cancel_on_heal}


@dataclass(frozen=True)
class PreferredElection(FaultPlan):
    kind: ClassVar[str] = "admin"
    partitions: tuple[tuple[str, int], ...]  # each led by its first replica again, if it can

    def describe(self) -> dict[str, Any]:
        return {"partitions": [f"{topic}/{partition}" for topic, partition in self.partitions]}


@dataclass(frozen=True)
class PartitionsAdded(FaultPlan):
    kind: ClassVar[str] = "admin"
    topic: str
    count: int  # the topic's number of partitions afterwards


class FaultApplier(Protocol):
    """A backend's hands: applies plans to its nodes and heals them, with evidence."""

    def refuses(self, kind: str, shape: str) -> str | None:
        """Why this backend cannot apply faults of this kind and shape (None: it can)."""
        ...

    async def apply(self, plan: FaultPlan) -> Evidence:
        """Put the fault in place; returns what was done and the evidence that it took."""
        ...

    async def heal(self, plan: FaultPlan) -> Evidence:
        """End exactly this fault."""
        ...

    async def heal_all(self, kinds: tuple[str, ...]) -> dict[str, Evidence]:
        """End every fault of these kinds on every node, remembered or not; per kind what was
        done, or ``{"error": ...}`` for a kind that could not be healed (the others still are).
        Crashes are healed last, so restarted brokers find the network and disks whole."""
        ...
