"""Invariants that need events of several nodes in order: ordered by epochs and zxids, not clocks.

Node clocks are skewed under clock faults, so nothing here compares two nodes' wall times.
Two orders are trustworthy across nodes: ZooKeeper's transaction ids (every write ZooKeeper
applies gets the next zxid, one total order for the whole ensemble) and epochs (a leader epoch
begins after every earlier one was decided). Each invariant below is stated in one of them:

- ``stale-controller-write`` (the controller-epoch fencing of ZooKeeper writes, KAFKA-6082):
  a controller decides for its epoch only until a later controller is elected. A partition
  state the controller of epoch ``c`` wrote at zxid ``z`` while the election of a controller
  of a later epoch had already been written (at a zxid below ``z``) was written by a deposed
  controller: its decision overrides its successor's, which the brokers were told instead.
  Both zxids come from the writers' own events (``controller_elected``, ``leader_elected``);
  events without a zxid (older writers) are not judged.
- ``isr-admitted-lacking-committed`` (StrongIsr at the moment of admission): a leader that
  adds a follower to the ISR counts it toward every later commit, so the follower must hold
  what is already committed. What an earlier leader epoch committed is the greatest HW a
  leader of an earlier epoch exposed (leader epochs are decided one after another, so every
  such HW belongs to the partition's past). A follower admitted with its log ending below
  that, and below the start of the admitting leader's epoch (so below records the leader
  itself holds from those earlier epochs), lacks records committed before it joined
  (KAFKA-7128). The follower's log end at admission is what the leader says it was
  (``isr_changed``'s ``joined_log_end``); the epoch start is the log end the leader's own
  ``became_leader`` reported.
- ``isr-written-for-another-epoch`` (KIP-343: only a partition's leader, in its current epoch,
  changes its ISR): an ISR the controller wrote on a broker's request (``isr_written``) whose
  requester is not the state's leader, or proposed it in another leader epoch, is a deposed
  leader's proposal laid over its successor's state: the successor's ISR, which its commits
  count on, is replaced by replicas it never counted (a held-back request from before the
  election). Both epochs are in the one event, so no order between nodes is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from floodmark.contracts.node_events import (
    BecameLeader,
    ControllerElected,
    HwChanged,
    IsrChanged,
    IsrWritten,
    LeaderElected,
    NodeEvent,
    PartitionKey,
)
from floodmark.contracts.results import Anomaly

Events = Mapping[str, Sequence[NodeEvent]]


@dataclass
class EpochFacts:
    """The events of every node that these invariants read, gathered in one pass over them
    all (the few kinds they need, in each node's own order)."""

    elections: list[tuple[int, int, str, int]] = field(default_factory=list)  # (controller epoch, zxid, node, seq)
    writes: list[tuple[NodeEvent, LeaderElected]] = field(default_factory=list)  # with a zxid
    exposed: dict[PartitionKey, dict[int, int]] = field(default_factory=dict)  # greatest leader HW per epoch
    # per node, in its order: its leaderships and the ISR expansions it made
    leading: dict[str, list[tuple[NodeEvent, BecameLeader | IsrChanged]]] = field(default_factory=dict)
    isr_writes: list[tuple[str, NodeEvent, IsrWritten]] = field(default_factory=list)


def gather(events: Events) -> EpochFacts:
    facts = EpochFacts()
    exposed = facts.exposed
    for node in sorted(events):
        leading = facts.leading.setdefault(node, [])
        for event in events[node]:
            body = event.body
            if type(body) is HwChanged:  # the most frequent kind these read
                if body.role == "leader":
                    per_epoch = exposed.setdefault((body.topic, body.partition), {})
                    if body.high_watermark > per_epoch.get(body.leader_epoch, 0):
                        per_epoch[body.leader_epoch] = body.high_watermark
            elif type(body) is BecameLeader:
                leading.append((event, body))
            elif type(body) is IsrChanged:
                if body.change == "expand" and body.joined is not None and body.joined_log_end is not None:
                    leading.append((event, body))
            elif type(body) is ControllerElected:
                if body.zxid is not None:
                    facts.elections.append((body.controller_epoch, body.zxid, node, event.seq))
            elif type(body) is LeaderElected:
                if body.zxid is not None:
                    facts.writes.append((event, body))
            elif type(body) is IsrWritten:
                facts.isr_writes.append((node, event, body))
    return facts


def _facts(events: Events | EpochFacts) -> EpochFacts:
    return events if isinstance(events, EpochFacts) else gather(events)


def stale_controller_writes(events: Events | EpochFacts) -> list[Anomaly]:
    """Partition states written by a controller after a later controller's election (by zxid)."""
    facts = _facts(events)
    elections, writes = facts.elections, facts.writes
    if not elections or not writes:
        return []
    first: dict[int, tuple[int, str, int]] = {}  # controller epoch -> its earliest election (zxid, node, seq)
    for epoch, zxid, node, seq in sorted(elections):
        first.setdefault(epoch, (zxid, node, seq))
    anomalies = []
    for event, body in writes:
        later = min((found for epoch, found in first.items() if epoch > body.controller_epoch), default=None)
        if later is None or body.zxid is None or body.zxid < later[0]:
            continue
        anomalies.append(Anomaly(
            "stale-controller-write",
            f"{event.node}, controller in epoch {body.controller_epoch}, wrote the state of "
            f"{body.topic}/{body.partition} (leader {body.leader}, leader epoch {body.leader_epoch}, ISR "
            f"{list(body.isr)}) at zxid {body.zxid}, after a later controller's election at zxid {later[0]}.",
            body.topic, body.partition, events=((later[1], later[2]), (event.node, event.seq)),
            details={"controller_epoch": body.controller_epoch, "zxid": body.zxid,
                     "deposed_at_zxid": later[0], "leader_epoch": body.leader_epoch}))
    return anomalies


def admissions_lacking_committed(events: Events | EpochFacts) -> list[Anomaly]:
    """Followers admitted to an ISR below what an earlier leader epoch committed (StrongIsr)."""
    facts = _facts(events)
    exposed = facts.exposed  # partition -> leader epoch -> greatest HW a leader exposed in that epoch
    anomalies: list[Anomaly] = []
    for node, leading in sorted(facts.leading.items()):
        starts: dict[tuple[PartitionKey, int], int] = {}  # (partition, epoch) -> this leader's epoch start
        for event, body in leading:
            if type(body) is BecameLeader:
                starts[((body.topic, body.partition), body.leader_epoch)] = body.log_end
            elif type(body) is IsrChanged and body.joined is not None and body.joined_log_end is not None:  # an expansion (see gather)
                key = (body.topic, body.partition)
                start = starts.get((key, body.leader_epoch))
                committed = max((hw for epoch, hw in exposed.get(key, {}).items() if epoch < body.leader_epoch),
                                default=0)
                if start is None or body.joined_log_end >= min(start, committed):
                    continue
                lacking = min(start, committed)
                anomalies.append(Anomaly(
                    "isr-admitted-lacking-committed",
                    f"{node}, leader of {key[0]}/{key[1]} in epoch {body.leader_epoch} (which it began at offset "
                    f"{start}), admitted broker {body.joined} to the ISR with its log ending at "
                    f"{body.joined_log_end}, below offset {committed} that an earlier epoch had committed: it "
                    f"lacked offsets {body.joined_log_end}..{lacking - 1}.",
                    key[0], key[1], tuple(range(body.joined_log_end, min(lacking, body.joined_log_end + 100))),
                    events=((node, event.seq),),
                    details={"joined": body.joined, "joined_log_end": body.joined_log_end, "epoch_start": start,
                             "committed_before": committed, "leader_epoch": body.leader_epoch,
                             "isr": list(body.isr)}))
    return anomalies


def isr_writes_for_another_epoch(events: Events | EpochFacts) -> list[Anomaly]:
    """ISRs the controller wrote on the proposal of a broker that did not lead in that epoch."""
    anomalies: list[Anomaly] = []
    for node, event, body in _facts(events).isr_writes:
        if body.requester == body.leader and body.requested_leader_epoch == body.leader_epoch:
            continue
        anomalies.append(Anomaly(
            "isr-written-for-another-epoch",
            f"{node}, as controller, wrote ISR {list(body.isr)} into the state of {body.topic}/{body.partition} "
            f"(leader {body.leader} in epoch {body.leader_epoch}) at the request of broker {body.requester}, "
            f"which proposed it as leader in epoch {body.requested_leader_epoch}.",
            body.topic, body.partition, events=((node, event.seq),),
            details={"requester": body.requester, "requested_leader_epoch": body.requested_leader_epoch,
                     "leader": body.leader, "leader_epoch": body.leader_epoch, "isr": list(body.isr),
                     "zxid": body.zxid}))
    return anomalies
