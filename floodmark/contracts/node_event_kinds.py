"""The kinds of node events: one frozen type per thing a broker or the controller says it did.

A node event (see :mod:`floodmark.contracts.node_events` for the envelope and the file) carries one of
these bodies. Each type is the schema of its kind: its ``kind`` is the name written to the
file, its fields are the fields written after the envelope, in this order, and its docstring
says what it means. Protocol code emits them (``runtime.emit(HwChanged(...))``), so a misspelt
kind or a missing field is a type error, not a silently different file; checkers, reports and
the pipeline match on the types and read attributes.

Conventions of the contract:

- Partitions are named by ``topic`` and ``partition``; brokers by integer id; leader epochs and
  controller epochs are integers. A leader epoch is never below :data:`NO_EPOCH` (-1, "none
  known", as the protocol writes it), nor -1 where a broker leads; offsets, high watermarks,
  log ends and partition numbers never below 0; and no integer is beyond its width in Kafka's
  protocol (offsets 64-bit, epochs, partitions and broker ids 32-bit): the reader refuses a
  line that says otherwise (:mod:`floodmark.contracts.node_event_ranges`). Kinds about one
  partition derive from :class:`PartitionEvent`; ``fenced`` and ``rejected`` name one only
  where it applies.
- A field typed ``... | None`` is optional: ``None`` is written as an absent field, and an
  absent field reads as ``None``. No field is ever written as JSON ``null``.
- Lists are tuples here (JSON arrays in the file), so events are immutable throughout.
- Writers may add fields, and newer writers may add kinds: readers keep both and never fail
  on them (:class:`UnknownKind`, ``NodeEvent.extra``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from floodmark.frozen_init import fast_frozen_init

PartitionKey = tuple[str, int]  # (topic, partition)
NO_EPOCH = -1  # a leader epoch not known (the protocol's sentinel): the lowest an event may name


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeEventBody:
    """What a node says it did; ``kind`` is the name the file gives it."""

    kind: ClassVar[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionEvent(NodeEventBody):
    """An event about one partition of this node (or, for the controller, one it decided on)."""

    topic: str
    partition: int


# --------------------------------------------------------------------------- replicas


@dataclass(frozen=True, slots=True, kw_only=True)
class BecameLeader(PartitionEvent):
    """``became_leader``: the broker leads the partition in ``leader_epoch`` with this ISR,
    starting from its log end and the HW it already knew."""

    kind: ClassVar[str] = "became_leader"
    leader_epoch: int
    isr: tuple[int, ...]
    log_end: int
    high_watermark: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BecameFollower(PartitionEvent):
    """``became_follower``: the broker follows ``leader`` in ``leader_epoch``; truncation, if
    any, comes later as ``truncated``."""

    kind: ClassVar[str] = "became_follower"
    leader_epoch: int
    leader: int
    log_end: int


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Appended(PartitionEvent):
    """``appended``: records reached the broker's log from ``offset`` on, one value id per
    record, as ``role`` ("leader" | "follower"). ``epoch`` is the leader epoch of the first
    record; a follower's batch may span epochs, listed in ``epochs``. Role "recovery": at
    start-up, the recovered log holds these records above its checkpointed HW (a broker
    stopped between writing a record and announcing it says so here)."""

    kind: ClassVar[str] = "appended"
    offset: int
    epoch: int
    values: tuple[str, ...]
    role: str
    epochs: tuple[int, ...] | None = None


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HwChanged(PartitionEvent):
    """``hw_changed``: the broker moved its high watermark from ``previous`` to
    ``high_watermark`` in ``leader_epoch``, as ``role`` ("leader" | "follower" | "none"),
    with this log end."""

    kind: ClassVar[str] = "hw_changed"
    leader_epoch: int
    role: str
    previous: int
    high_watermark: int
    log_end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Truncated(PartitionEvent):
    """``truncated``: the broker cut its log from ``from_offset`` back to ``to_offset``.
    ``reason``: "leader_epoch" | "high_watermark" | "diverging_epoch" (becoming a follower),
    or "recovery" (a crash took unflushed records; ``leader_epoch`` is then -1 and ``detail``
    says what recovery found)."""

    kind: ClassVar[str] = "truncated"
    leader_epoch: int
    from_offset: int
    to_offset: int
    reason: str
    detail: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrChanged(PartitionEvent):
    """``isr_changed``: the leader's ISR changed, at this version of the partition's state
    node: it wrote a new one (``change``: "shrink" | "expand"), or it lost that conditional
    write and adopted the one the controller had written meanwhile ("controller"). ``zxid``:
    the ZooKeeper transaction id of its own write (where it wrote one), which orders it
    against every other ZooKeeper write. An "expand" names the ``joined`` replica, the
    log end it had reached when it was admitted (``joined_log_end``), and the log end the
    leader knew it to have when the write landed (``joined_progress``: it may have fetched
    more while the write was in flight)."""

    kind: ClassVar[str] = "isr_changed"
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    change: str
    zxid: int | None = None
    joined: int | None = None
    joined_log_end: int | None = None
    joined_progress: int | None = None


ACKS_ALL = -1  # how a broker records the acks of an acks=all produce (Acked.acks)


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Acked(PartitionEvent):
    """``acked``: the leader acknowledged a produce of ``first_offset``..``offset`` with this
    ``acks`` (-1 is all) in ``leader_epoch``, when its HW was ``high_watermark``."""

    kind: ClassVar[str] = "acked"
    offset: int
    first_offset: int | None = None
    high_watermark: int
    acks: int
    leader_epoch: int | None = None


# --------------------------------------------------------------------------- refusals


@dataclass(frozen=True, slots=True, kw_only=True)
class Fenced(NodeEventBody):
    """``fenced``: the node stopped acting on a stale view (lost a conditional ZooKeeper write,
    heartbeat timeout, stale controller epoch); ``why`` says which. Names the partition and
    leader epoch where they apply."""

    kind: ClassVar[str] = "fenced"
    topic: str | None = None
    partition: int | None = None
    why: str
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected(NodeEventBody):
    """``rejected``: the node refused a ``request`` (stale leader epoch, stale controller
    epoch, stale broker incarnation, not leader); ``why`` says which. The other fields say,
    where they apply, which partition and which epochs: ``leader_epoch`` is the replica's own,
    except for a refused LeaderAndIsr, where it is the request's and ``current_leader_epoch``
    the replica's; a refused fetch names the fetching ``replica`` and its ``request_epoch``; a
    request from a stale controller or for an old incarnation names its ``controller_epoch``
    or ``incarnation``."""

    kind: ClassVar[str] = "rejected"
    request: str
    why: str
    topic: str | None = None
    partition: int | None = None
    leader_epoch: int | None = None
    replica: int | None = None
    request_epoch: int | None = None
    current_leader_epoch: int | None = None
    controller_epoch: int | None = None
    incarnation: int | None = None


# --------------------------------------------------------------------------- controller


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerElected(NodeEventBody):
    """``controller_elected``: ``broker`` became controller in ``controller_epoch``, by the
    ZooKeeper write of transaction id ``zxid`` (where known): any write made on behalf of an
    older controller epoch after that zxid was made by a deposed controller."""

    kind: ClassVar[str] = "controller_elected"
    controller_epoch: int
    broker: int
    zxid: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerResigned(NodeEventBody):
    """``controller_resigned``: this node stopped being controller of ``controller_epoch``."""

    kind: ClassVar[str] = "controller_resigned"
    controller_epoch: int
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElected(PartitionEvent):
    """``leader_elected``: the controller chose ``leader`` (-1: none) and this ISR for
    ``leader_epoch`` and wrote it to ZooKeeper at ``zk_version``; ``unclean`` if the leader
    was not in the ISR. ``zxid``: the ZooKeeper transaction id of that write, where known.
    ``recovery``: an unclean choice made because every in-sync replica had recovered from an
    unclean shutdown (KIP-966's balanced recovery, which unclean leader election being
    disabled does not forbid); None in files written before the field existed."""

    kind: ClassVar[str] = "leader_elected"
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    unclean: bool
    zxid: int | None = None
    recovery: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrWritten(PartitionEvent):
    """``isr_written``: the controller wrote this ISR into the partition's state (leader
    ``leader`` in ``leader_epoch``, at ``zk_version``, ZooKeeper transaction ``zxid``) on an
    ISR change request (KIP-343) of broker ``requester``, which proposed it as leader in
    ``requested_leader_epoch``, from its registration ``requester_incarnation``."""

    kind: ClassVar[str] = "isr_written"
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    requester: int
    requested_leader_epoch: int
    requester_incarnation: int
    zxid: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerState(NodeEventBody):
    """``broker_state``: a broker's state ("Inactive" | "Active" | "Stopping" | "Fenced" |
    "Offline") in incarnation ``incarnation``. Written by the controller about ``broker``
    ("Offline": its registration went, so the controller now handles its failure), and by a
    broker about itself (no ``broker``). On registration, ``unclean_shutdown`` says whether
    the broker's logs were recovered from an unclean shutdown, which takes it out of every
    ISR (KIP-966)."""

    kind: ClassVar[str] = "broker_state"
    broker: int | None = None
    state: str
    incarnation: int
    why: str | None = None
    unclean_shutdown: bool | None = None


# --------------------------------------------------------------------------- the process


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDirOffline(NodeEventBody):
    """``log_dir_offline``: the broker took log directory ``dir`` offline after ``error``, and
    with it these partitions' replicas (none when it was found offline at start-up)."""

    kind: ClassVar[str] = "log_dir_offline"
    dir: str
    error: str
    partitions: tuple[PartitionKey, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Started(NodeEventBody):
    """``started``: the process started (a restart starts its state afresh), as ``broker``:
    the id by which ISRs, leaders and controllers name this node. A checker that holds ISR
    members to what they hold must know which node file is which member; files written
    before the field existed lack it (None), and a node's id is then inferred, or unknown.
    ``run_id``: the run the harness started the process for (``test.yaml``'s ``run_id``),
    which the node's events up to its next ``started`` are of (see
    :mod:`floodmark.contracts.run_ids`); None in files written before run ids existed, or by
    a broker started by hand."""

    kind: ClassVar[str] = "started"
    broker: int | None = None
    run_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Stopped(NodeEventBody):
    """``stopped``: the process shut down cleanly."""

    kind: ClassVar[str] = "stopped"


KnownKind = (
    BecameLeader | BecameFollower | Appended | HwChanged | Truncated | IsrChanged | Acked | Fenced
    | Rejected | ControllerElected | ControllerResigned | LeaderElected | IsrWritten | BrokerState
    | LogDirOffline | Started | Stopped
)
"""Every kind this version writes and reads."""


@dataclass(frozen=True, slots=True)
class UnknownKind:
    """An event of a kind this reader does not know (a newer or a foreign writer), kept whole:
    its kind and its fields as read."""

    kind: str
    fields: dict[str, Any] = field(hash=False)


def partition_of(body: KnownKind | UnknownKind) -> PartitionKey | None:
    """The partition an event is about, if it names one."""
    if isinstance(body, PartitionEvent):
        return (body.topic, body.partition)
    if isinstance(body, Fenced | Rejected) and body.topic is not None and body.partition is not None:
        return (body.topic, body.partition)
    return None


def leader_epoch_of(body: KnownKind | UnknownKind) -> int | None:
    """The leader epoch an event names, if any (``appended`` names its records' epoch instead;
    a refusal's may be the refused request's, see :class:`Rejected`)."""
    if isinstance(body, BecameLeader | BecameFollower | HwChanged | Truncated | IsrChanged | Acked
                  | LeaderElected | IsrWritten | Fenced | Rejected):
        return body.leader_epoch
    return None
