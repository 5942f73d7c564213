"""High watermarks: they only move forward, and what they commit stays committed.

A partition's high watermark (HW) is the offset below which every record is on every
in-sync replica: committed. Two rules follow from the V3 replication design, and this
checker verifies both.

Per broker, partition and leader epoch, from the broker's own ``hw_changed`` and
``became_leader`` events (in the broker's own order, never compared with other brokers'
clocks): the HW never decreases, and never exceeds the broker's log end offset
(``hw-decrease``, ``hw-beyond-log-end``). A restart starts afresh, since a broker recovers
its HW from a checkpoint that may lag: a ``started`` or ``stopped`` event says the process
changed, and a log recovered at start-up (``appended`` as "recovery", ``truncated`` for
"recovery") says it for its partition. A file with no ``started`` event at all (cut down by
hand, or written by a tool that leaves them out) cannot show every restart, so a decrease
there is proven only where the broker itself says its HW went down from the value last seen
(``hw_changed``'s ``previous``; a process started since would say its checkpoint instead);
any other is held unproven and makes the verdict unknown, not invalid. The epoch a HW is
judged in is the one the broker's own ``became_leader`` or ``became_follower`` put it in,
not the one its ``hw_changed`` states (they agree in every run): a HW lowered in an event
that names another epoch would otherwise start that epoch afresh and hide the decrease.

A broker also says when it lowers its HW itself (``hw_changed`` with a ``previous`` above
the new HW, after truncating below it): a decrease when the truncation since its last HW
cut below that HW, unless the HW stood above the log end already, as after a power loss
took records below a checkpointed HW (the replica's own loss, which it fetches back; a
restart's ``recovery`` truncation starts the partition afresh, as above). A new leader's
HW may start below its predecessor's; the design allows it (the new leader learns the HW
from its followers), and a follower's HW follows its leader's, so a follower that cut only
a divergent suffix above its HW and then takes a lower HW from its new leader lowered
nothing it had committed. Epochs are never compared with each other here.

The committed offset is the greatest HW ever exposed to a client: an ``acks=all``
acknowledgement at offset *o* exposes *o*+1, a poll exposes the HW it reports and every
offset it returns. It must never be un-committed:

- ``uncommitted-offset``: a broker became leader in epoch *E* with a log ending below an
  offset that was both exposed to a client and below some leader's HW in an epoch before
  *E* (so the offset was committed before this leader took over, and the leader lacks it);
- ``committed-truncated``: a replica truncated away a record it held whose offset and value
  clients saw as committed, and that a leader had committed (its HW past it) in the epoch
  the truncation was for or before. Replicas may truncate divergent, uncommitted suffixes;
  a record committed is never divergent. One still uncommitted when a replica dropped it
  may yet be committed later by another leader that kept it (its own copy: the replica
  fetches it back), which loses nothing. Records a crash took from a replica's disk
  (``reason: recovery``) are not counted: Kafka gets durability from replication, not fsync,
  so the replica fetches them again, and a leader elected without them is reported above.

``committed-truncated`` is one replica's loss, which no client may see: a follower that cut a
committed record and fetched it back from a leader that kept it left every read, the final
reads included, returning the acknowledged value at its offset. So a log-lin run can be
invalid here and linearizable: the linearizable checker judges what clients saw, and rightly
passes it; only the node events show that, for a while, fewer replicas held a committed
record than the ISR claimed (KIP-101's flaw). Once a replica without it is elected
(``uncommitted-offset``) and acknowledges another record at its offset, clients see the loss
and both checkers fail that partition (``tests/checkers/white_box/test_hw_beside_linearizability.py``).

Losses the configuration permits carry ``permitted_by`` (see :mod:`floodmark.checkers.permitted`).
If the node events do not cover every broker of the run, a run with nothing wrong in them is
unknown (see :mod:`.event_coverage`), and so is one where clients saw a partition's HW higher
than any broker's events record it: a leader says when it sets its HW, so the events that
would show it going back are not all there.
"""

from __future__ import annotations

import bisect
from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.checkers.event_coverage import exposed_beyond_recorded, verdict
from floodmark.checkers.permitted import LossPermissions, acks_all
from floodmark.checkers.queue_index import index_for
from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    HwChanged,
    NodeEvent,
    PartitionKey,
    Started,
    Stopped,
    Truncated,
)
from floodmark.contracts.results import Anomaly, CheckerResult, Validity, anomaly_counts


class HighWatermarkChecker:
    name = "hw"

    def check(self, run: CheckInput) -> CheckerResult:
        exposed, committed_values = client_exposure(run)
        permissions = run.loss_permissions
        scan = _Scan(committed_values, permissions)
        for node in sorted(run.events):
            scan.node(node, run.events[node])
        anomalies = scan.anomalies
        anomalies.extend(scan.committed_truncations())
        anomalies.extend(_leaders_lacking_committed(scan.leaderships, exposed, scan.leader_hw, permissions))
        stats: dict[str, Any] = {
            "nodes": len(run.events),
            "events": sum(len(e) for e in run.events.values()),
            "committed_offsets": {f"{t}/{p}": c for (t, p), c in sorted(exposed.items())},
        }
        stats["anomalies"] = anomaly_counts(anomalies)
        stats["permitted"] = sum("permitted_by" in a.details for a in anomalies)
        stats["violations"] = len(anomalies) - stats["permitted"]
        if scan.unproven:
            stats["unproven_decreases"] = dict(sorted(scan.unproven.items()))
        unrecorded = {key: (top, scan.recorded.get(key, 0)) for key, top in sorted(exposed.items())
                      if top > scan.recorded.get(key, 0)}
        return CheckerResult(_verdict(anomalies, run.coverage_problem, scan.unproven, unrecorded, stats),
                             anomalies, stats)


def _verdict(anomalies: list[Anomaly], missing: str | None, unproven: dict[str, int],
             unrecorded: dict[PartitionKey, tuple[int, int]], stats: dict[str, Any]) -> Validity:
    """As :func:`.event_coverage.verdict`, and unknown, never valid, where HW decreases were
    seen that the events cannot tell from a restart, or where clients saw a HW that no
    broker's events record (``unrecorded``: partition -> (exposed, greatest recorded)): every
    HW a client sees was first set by its leader, which says so, so the HW events it was
    judged by are not all there (a writer that leaves them out, a file cut by hand)."""
    reasons = []
    if unproven:
        counted = ", ".join(f"{count} by {node}" for node, count in sorted(unproven.items()))
        reasons.append(f"HW decreases ({counted}) are no proof: the event file states no process start, "
                       "so a restart (which recovers the HW from a checkpoint that may lag) may lie between")
    if unrecorded:
        (topic, number), (top, recorded) = next(iter(unrecorded.items()))
        stats["unrecorded_hw"] = {f"{t}/{p}": list(pair) for (t, p), pair in unrecorded.items()}
        reasons.append(exposed_beyond_recorded(f"{topic}/{number}", top, f"the node events record its HW only up to {recorded}",
                                               len(unrecorded), "the HW changes they were judged by"))
    if not reasons or anomalies:
        return verdict(anomalies, missing, stats)
    reason = "; ".join(reasons)
    stats["unjudged_because"] = reason if missing is None else f"{missing}; {reason}"
    return "unknown"


class _Scan:
    """One pass over each broker's events, in the broker's own order."""

    def __init__(self, committed: dict[PartitionKey, dict[int, Any]], permissions: LossPermissions) -> None:
        self.committed = committed
        self.permissions = permissions
        self.anomalies: list[Anomaly] = []
        self.leader_hw: dict[tuple[str, int, int], int] = {}  # (topic, partition, epoch) -> greatest leader HW
        self.leaderships: list[tuple[str, int, PartitionKey, int, int]] = []  # (node, seq, partition, epoch, log_end)
        # Truncations that dropped records clients saw committed: (node, seq, event, offsets),
        # judged once every broker's leader HWs are known.
        self.truncations: list[tuple[str, int, Truncated, list[int]]] = []
        # Per node: HW decreases seen in a file that cannot show every restart (no ``started``).
        self.unproven: dict[str, int] = {}
        self.recorded: dict[PartitionKey, int] = {}  # partition -> the greatest HW any broker says it set

    def node(self, node: str, events: list[NodeEvent]) -> None:
        # (topic, partition, leader epoch) -> (HW, seq of the event that set it)
        last_hw: dict[tuple[str, int, int], tuple[int, int]] = {}
        # partition -> the HW the node last set, in any epoch: what its next ``hw_changed``
        # must give as ``previous`` if no restart (or lost line) lies between
        chain: dict[PartitionKey, int] = {}
        # Whether the file shows its process starts: a file without any ``started`` may hide
        # a restart between two HWs of one epoch.
        tells_restarts = any(type(e.body) is Started for e in events)
        leading: dict[PartitionKey, int] = {}  # partition -> epoch this node leads in
        # partition -> the epoch its last became_leader or became_follower put this node in
        in_epoch: dict[PartitionKey, int] = {}
        # What this replica holds: per partition, segments (first offset, value ids) in offset
        # order. Only partitions this node ever truncates need tracking.
        truncated = {(e.body.topic, e.body.partition) for e in events if isinstance(e.body, Truncated)}
        held: dict[PartitionKey, list[tuple[int, tuple[str, ...]]]] = {}
        # partition -> (from, to) of the last truncation since the node last stated its HW: a HW
        # it lowers next is lowered by that cut only if the cut went below it
        cut: dict[PartitionKey, tuple[int, int]] = {}
        leader_hw = self.leader_hw
        recorded = self.recorded
        for event in events:
            body = event.body
            # The most frequent kinds first; the two that set a HW share the checks below.
            if isinstance(body, HwChanged):
                hw, log_end = body.high_watermark, body.log_end
                epoch = in_epoch.get((body.topic, body.partition), body.leader_epoch)
                as_leader = body.role == "leader"
                stated = body.previous
                by = cut.pop((body.topic, body.partition), None) if cut else None
                # A HW lowered where no cut went below it is a new epoch's lower start (a
                # follower's HW follows its new leader's), judged per epoch below.
                if by is not None and hw < body.previous and by[1] < body.previous <= by[0]:
                    self._stated_decrease(node, event.seq, body)
            elif isinstance(body, BecameLeader):
                hw, epoch, log_end = body.high_watermark, body.leader_epoch, body.log_end
                as_leader = True
                stated = None
                cut.pop((body.topic, body.partition), None)
                leading[(body.topic, body.partition)] = in_epoch[(body.topic, body.partition)] = epoch
                self.leaderships.append((node, event.seq, (body.topic, body.partition), epoch, log_end))
            elif isinstance(body, Appended):
                if body.role == "recovery":  # a log recovered at start-up: the process is new
                    _restarted(last_hw, (body.topic, body.partition), leading, in_epoch)
                if truncated and (key := (body.topic, body.partition)) in truncated and body.values:
                    segments = held.setdefault(key, [])
                    if segments and segments[-1][0] + len(segments[-1][1]) > body.offset:
                        _drop_from(segments, body.offset, {})
                    segments.append((body.offset, body.values))
                continue
            elif isinstance(body, Acked):
                key = (body.topic, body.partition)
                acked_epoch = body.leader_epoch if body.leader_epoch is not None else leading.get(key)
                if acked_epoch is not None:
                    slot = (body.topic, body.partition, acked_epoch)
                    if body.high_watermark > leader_hw.get(slot, -1):
                        leader_hw[slot] = body.high_watermark
                continue
            elif isinstance(body, BecameFollower):
                leading.pop((body.topic, body.partition), None)
                in_epoch[(body.topic, body.partition)] = body.leader_epoch
                continue
            elif isinstance(body, Truncated):
                key = (body.topic, body.partition)
                if body.reason == "recovery":  # at start-up: the process is new, and may start lower
                    _restarted(last_hw, key, leading, in_epoch)
                    cut.pop(key, None)
                else:
                    cut[key] = (body.from_offset, body.to_offset)
                if key in held:
                    lost = _drop_from(held[key], body.to_offset, self.committed.get(key, {}))
                    # Crash recovery losing unflushed records is this replica's loss only:
                    # it re-fetches them, and a leader lacking them is uncommitted-offset.
                    if lost and body.reason != "recovery":
                        self.truncations.append((node, event.seq, body, lost))
                continue
            elif isinstance(body, Started | Stopped):
                last_hw.clear()  # a restarted broker recovers its HW from a checkpoint that may lag
                leading.clear()
                in_epoch.clear()
                cut.clear()
                continue
            else:
                continue
            slot = (body.topic, body.partition, epoch)
            previous = last_hw.get(slot)
            if not tells_restarts:
                key = (body.topic, body.partition)
                if previous is not None and hw < previous[0] and stated != chain.get(key):
                    # Not the broker's own step down from the HW last seen: a restart may lie between.
                    self.unproven[node] = self.unproven.get(node, 0) + 1
                    previous = None
                chain[key] = hw
            if (previous is not None and hw < previous[0]) or hw > log_end:
                self._monotonic(node, event.seq, slot, hw, previous, log_end)
            last_hw[slot] = (hw, event.seq)
            if as_leader and hw > leader_hw.get(slot, -1):
                leader_hw[slot] = hw
            if hw > recorded.get((body.topic, body.partition), 0):
                recorded[(body.topic, body.partition)] = hw

    def _monotonic(self, node: str, seq: int, slot: tuple[str, int, int], hw: int,
                   previous: tuple[int, int] | None, log_end: int) -> None:
        topic, number, epoch = slot
        if hw > log_end:
            self.anomalies.append(Anomaly(
                "hw-beyond-log-end",
                f"Broker {node} set the HW of {topic}/{number} to {hw} in epoch {epoch}, beyond its log end {log_end}.",
                topic, number, (hw, log_end), events=((node, seq),),
                details={"node": node, "leader_epoch": epoch}))
        if previous is not None and hw < previous[0]:
            self.anomalies.append(Anomaly(
                "hw-decrease",
                f"Broker {node} lowered the HW of {topic}/{number} from {previous[0]} to {hw} within leader epoch {epoch}.",
                topic, number, (previous[0], hw), events=((node, previous[1]), (node, seq)),
                details={"node": node, "leader_epoch": epoch}))

    def _stated_decrease(self, node: str, seq: int, body: HwChanged) -> None:
        """The broker truncated records below its HW and lowered the HW with them."""
        self.anomalies.append(Anomaly(
            "hw-decrease",
            f"Broker {node} lowered the HW of {body.topic}/{body.partition} from {body.previous} to "
            f"{body.high_watermark} in leader epoch {body.leader_epoch}, truncating records below it.",
            body.topic, body.partition, (body.previous, body.high_watermark), events=((node, seq),),
            details={"node": node, "leader_epoch": body.leader_epoch,
                     **self.permissions.details(body.topic, body.partition, committed=True)}))

    def committed_truncations(self) -> list[Anomaly]:
        """The truncations that dropped records a leader had committed by the truncation's
        epoch (its HW past them in that epoch or an earlier one)."""
        by_partition: dict[PartitionKey, list[tuple[int, int]]] = {}
        for (topic, number, epoch), hw in self.leader_hw.items():
            by_partition.setdefault((topic, number), []).append((epoch, hw))
        anomalies = []
        for node, seq, body, lost in self.truncations:
            epochs = by_partition.get((body.topic, body.partition), [])
            committed = max((hw for epoch, hw in epochs if epoch <= body.leader_epoch), default=-1)
            dropped = [offset for offset in lost if offset < committed]
            if dropped:
                anomalies.append(self._committed_truncated(node, seq, body, dropped))
        return anomalies

    def _committed_truncated(self, node: str, seq: int, body: Truncated, lost: list[int]) -> Anomaly:
        lost.sort()
        return Anomaly(
            "committed-truncated",
            f"Broker {node} truncated {body.topic}/{body.partition} to offset {body.to_offset} ({body.reason}), "
            f"removing {len(lost)} record(s) clients saw committed (first at offset {lost[0]}).",
            body.topic, body.partition, tuple(lost[:100]), events=((node, seq),),
            details={"node": node, "reason": body.reason, "leader_epoch": body.leader_epoch,
                     **self.permissions.details(body.topic, body.partition, committed=True)})


def _restarted(last_hw: dict[tuple[str, int, int], tuple[int, int]], key: PartitionKey,
               *epochs: dict[PartitionKey, int]) -> None:
    """Forget what the node's previous process did with partition ``key`` (``epochs``: what it
    said of the epochs it was in)."""
    for slot in [slot for slot in last_hw if slot[0] == key[0] and slot[1] == key[1]]:
        del last_hw[slot]
    for said in epochs:
        said.pop(key, None)


def _drop_from(segments: list[tuple[int, tuple[str, ...]]], to_offset: int, seen: dict[int, Any]) -> list[int]:
    """Drop what the replica holds from ``to_offset`` on; returns the offsets of dropped records
    that clients saw committed (``seen``: offset -> value)."""
    lost: list[int] = []
    while segments and segments[-1][0] + len(segments[-1][1]) > to_offset:
        first, values = segments.pop()
        keep = max(0, to_offset - first)
        lost.extend(first + i for i in range(keep, len(values)) if seen.get(first + i, _NOTHING) == values[i])
        if keep:
            segments.append((first, values[:keep]))
            break
    return lost


_NOTHING = object()


def client_exposure(run: CheckInput) -> tuple[dict[PartitionKey, int], dict[PartitionKey, dict[int, Any]]]:
    """Per partition: the greatest HW exposed to a client, and the (offset, value)s clients saw committed."""
    index = index_for(run.history, run.config)
    use_acks = acks_all(run.config)
    exposed: dict[PartitionKey, int] = {}
    values: dict[PartitionKey, dict[int, Any]] = {}
    for key, part in index.partitions.items():
        top = -1
        if use_acks:  # an acks=all acknowledgement at o exposes o+1; reads expose what they return
            value_at = part.first_values()
            values[key] = value_at
            if value_at:
                top = max(value_at) + 1
        else:
            committed = values.setdefault(key, {})
            for read in part.reads:
                for offset, value in read.records:
                    committed.setdefault(offset, value)
            if committed:
                top = max(committed) + 1
        for read in part.reads:
            if isinstance(read.high_watermark, int) and read.high_watermark > top:
                top = read.high_watermark
        if top >= 0:
            exposed[key] = top
    return exposed, values


def _leaders_lacking_committed(leaderships: list[tuple[str, int, PartitionKey, int, int]],
                               exposed: dict[PartitionKey, int], leader_hw: dict[tuple[str, int, int], int],
                               permissions: LossPermissions) -> list[Anomaly]:
    per_partition: dict[PartitionKey, dict[int, int]] = {}
    for (topic, number, epoch), hw in leader_hw.items():
        per_partition.setdefault((topic, number), {})[epoch] = hw
    # committed_before[p]: epochs ascending with the running max of leader HWs up to each
    committed_before: dict[PartitionKey, tuple[list[int], list[int]]] = {}
    for key, by_epoch in per_partition.items():
        epochs = sorted(by_epoch)
        running, highs = -1, []
        for epoch in epochs:
            running = max(running, by_epoch[epoch])
            highs.append(running)
        committed_before[key] = (epochs, highs)
    anomalies = []
    for node, seq, key, epoch, log_end in leaderships:
        if key not in exposed or key not in committed_before:
            continue
        epochs, highs = committed_before[key]
        position = bisect.bisect_left(epochs, epoch) - 1  # last epoch strictly before this one
        if position < 0:
            continue
        committed = min(exposed[key], highs[position])
        if log_end < committed:
            topic, number = key
            anomalies.append(Anomaly(
                "uncommitted-offset",
                f"Broker {node} became leader of {topic}/{number} in epoch {epoch} with log end {log_end}, "
                f"but offsets up to {committed - 1} were committed before that epoch and exposed to clients.",
                topic, number, tuple(range(log_end, min(committed, log_end + 100))), events=((node, seq),),
                details={"node": node, "leader_epoch": epoch, "committed_offset": committed,
                         **permissions.details(topic, number, committed=True)}))
    return anomalies
