"""Durability: an acknowledged record stays where it was acknowledged, forever.

Kafka's contract for ``acks=all``: once a send is acknowledged at offset *o*, every later
read of the partition finds the same value at *o*, and so does the final drain that reads
every partition from the beginning after all faults are healed. This checker reports

- ``lost-write``: an acknowledged value is missing from a drain begun after it was
  acknowledged (``how: missing``), or the drain has it at a different offset (``how:
  moved``); or a drain begun after a read ended lacks an offset that read returned (``how:
  read-then-missing``: consumers read only committed records, so this holds for sends that
  timed out too);
- ``inconsistent-offsets``: two different values observed at one offset, by reads or by a
  read and an acknowledgement.

Sends whose outcome is unknown (``info``) may be present or absent; sends that failed are the
queue checker's business (a read of one is Jepsen's G1a). Losses the configuration permits
(see :mod:`floodmark.checkers.permitted`) are still anomalies, marked ``permitted_by``; with
acks below all, a lost record that a consumer had read was committed and is a violation all
the same. A partition with acknowledged sends but no successful drain cannot be judged: the
verdict is then "unknown" unless something else is already wrong, and so is a send
acknowledged after every drain of its partition began (a drain running meanwhile may have
read past where the record went), and a history with no client op at all. Drains are taken
in the order of the history, not only the last: a record that one drain holds and a later
one lacks is lost.
"""

from __future__ import annotations

import bisect
import operator
from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.checkers.partition_index import PartitionIndex, Read
from floodmark.checkers.queue_index import index_for
from floodmark.contracts.results import Anomaly, CheckerResult, Validity

_NOTHING = object()  # no value at an offset (a sentinel: equal to no value a history holds)
_OFFSET = operator.itemgetter(0)
_BEGUN = operator.attrgetter("read.invoke")  # a drain, by when it began


class DurabilityChecker:
    name = "durability"

    def check(self, run: CheckInput) -> CheckerResult:
        index = index_for(run.history, run.config)
        anomalies: list[Anomaly] = []
        stats: dict[str, Any] = {"acknowledged": 0, "judged": 0, "unjudged": 0, "lost": 0, "moved": 0,
                 "inconsistent_offsets": 0, "indeterminate_present": 0, "indeterminate_absent": 0}
        for key in sorted(index.partitions):
            part = index.partitions[key]
            anomalies.extend(inconsistent_offsets(part, run))
            anomalies.extend(_lost_writes(part, key in index.drained, run, stats))
        stats["inconsistent_offsets"] = sum(a.type == "inconsistent-offsets" for a in anomalies)
        violations = [a for a in anomalies if "permitted_by" not in a.details]
        stats["violations"] = len(violations)
        stats["permitted"] = len(anomalies) - len(violations)
        valid: Validity = False if anomalies else ("unknown" if stats["unjudged"] or index.malformed else True)
        if stats["unjudged"]:
            stats["unjudged_because"] = ("acknowledged sends that no successful drain begun after their "
                                         "acknowledgement read")
        if index.malformed:  # ops the checker could not read: it cannot vouch for the history
            stats["malformed_ops"] = [{"op": i, "problem": p} for i, p in index.malformed[:20]]
        if valid is True and index.client_ops == 0:
            valid = "unknown"
            stats["unjudged_because"] = "the history has no client op: nothing was tested"
        return CheckerResult(valid, anomalies, stats)


def inconsistent_offsets(part: PartitionIndex, run: CheckInput) -> list[Anomaly]:
    """Every offset at which two different values were read or acknowledged. Two values a
    consumer read there were both committed: their conflict is never excused by acks."""
    topic, partition = part.partition
    conflicts = part.observations().conflicts
    if not conflicts:
        return []
    read_at = _read_values_at(part) if _acks_may_excuse(run) else {}
    return [
        Anomaly(
            "inconsistent-offsets",
            f"Offset {offset} of {topic}/{partition} was observed holding {len(values)} different "
            f"values ({', '.join(map(repr, sorted(values, key=repr)))}).",
            topic, partition, (offset,), tuple(sorted(set(values.values()))),
            details={"values": {repr(v): op for v, op in sorted(values.items(), key=repr)},
                     **run.loss_details(topic, partition,
                                        committed=len(read_at.get(offset, set()) & values.keys()) > 1)},
        )
        for offset, values in sorted(conflicts.items())
    ]


def _acks_may_excuse(run: CheckInput) -> bool:
    """Whether acks below all would excuse a loss that no consumer saw (then what consumers
    read must be worked out; otherwise it changes nothing)."""
    permissions = run.loss_permissions
    return permissions.everywhere is None and permissions.acknowledged_only is not None


def _read_values_at(part: PartitionIndex, consumers_only: bool = False) -> dict[int, set[Any]]:
    """offset -> every value a read (only a consumer's, a poll's or a drain's:
    ``consumers_only``) returned there."""
    found: dict[int, set[Any]] = {}
    for read in part.reads:
        if consumers_only and read.f != "poll" and read.f != "drain":
            continue
        for offset, value in read.records:
            found.setdefault(offset, set()).add(value)
    return found


class _Drain:
    """One successful drain of a partition: what it holds at each offset, and where each
    value is (worked out the first time a loss is looked into)."""

    __slots__ = ("read", "held", "_where")

    def __init__(self, read: Read) -> None:
        self.read = read
        self.held: dict[int, Any] = dict(read.records)
        self._where: dict[Any, int] | None = None

    def name(self, drains: list[_Drain]) -> str:
        """How a message names this drain among the partition's ``drains`` (in order begun)."""
        return "the final drain" if self is drains[-1] else f"the drain of op {self.read.op}"

    def offset_of(self, value: Any) -> int | None:
        if self._where is None:
            self._where = {}
            for offset, held in self.read.records:
                self._where.setdefault(held, offset)
        return self._where.get(value)


def _lost_writes(part: PartitionIndex, drained: bool, run: CheckInput, stats: dict[str, Any]) -> list[Anomaly]:
    """Acknowledged sends each drain begun after their acknowledgement lacks at their offset."""
    topic, partition = part.partition
    # (a drain's batch at odds with the drain, listed as malformed, is no drain of the partition)
    drains = sorted((_Drain(read) for read in part.reads if read.is_drain), key=_BEGUN)
    begun = [d.read.invoke for d in drains]
    count = len(drains)
    polled: dict[int, set[Any]] | None = None  # what consumers read where, if acks may excuse a loss
    anomalies = []
    for send in part.sends:
        if send.outcome == "info" and drained:
            present = drains[-1].offset_of(send.value) is not None
            stats["indeterminate_present" if present else "indeterminate_absent"] += 1
        if send.outcome != "ok" or send.offset is None:
            continue
        stats["acknowledged"] += 1
        acknowledged = send.completion if send.completion is not None else send.invoke
        # Only a drain that began after the acknowledgement must hold the record: one
        # running meanwhile may have read the partition before the record was there.
        first = bisect.bisect_right(begun, acknowledged)
        if first == count:
            stats["unjudged"] += 1
            if drained:
                stats["acknowledged_during_drains"] = stats.get("acknowledged_during_drains", 0) + 1
            continue
        stats["judged"] += 1
        lacking = None
        for i in range(first, count):
            if drains[i].held.get(send.offset, _NOTHING) != send.value:
                lacking = drains[i]
                break
        if lacking is None:
            continue
        witnesses = tuple(sorted({send.invoke, acknowledged, lacking.read.op}))
        moved_to = lacking.offset_of(send.value)
        drain = lacking.name(drains)
        if moved_to is not None:
            stats["moved"] += 1
            explanation = (f"Send of {send.value!r} was acknowledged at offset {send.offset} of {topic}/{partition}, "
                           f"but {drain} has it at offset {moved_to}.")
            extra = {"how": "moved", "value": send.value, "moved_to": moved_to}
        else:
            stats["lost"] += 1
            there = lacking.held.get(send.offset, _NOTHING)
            explanation = (f"Send of {send.value!r} was acknowledged at offset {send.offset} of {topic}/{partition}, "
                           f"but {drain} does not contain it"
                           + (f" (it has {there!r} there)." if there is not _NOTHING else "."))
            extra = {"how": "missing", "value": send.value}
        if polled is None:
            # (a drain is a consumer too: a record an earlier drain held was committed)
            polled = _read_values_at(part, consumers_only=True) if _acks_may_excuse(run) else {}
        committed = send.value in polled.get(send.offset, ())  # a consumer read it where it was acknowledged
        anomalies.append(Anomaly("lost-write", explanation, topic, partition, (send.offset,), witnesses,
                                 details={**extra, **run.loss_details(topic, partition, committed=committed)}))
    # (a loss the run permits at an offset hides no violation there: a record a consumer read at
    # that offset and a later drain lacks is still one)
    violated = {a.offsets[0] for a in anomalies if "permitted_by" not in a.details}
    anomalies.extend(_reads_lost(part, drains, violated, run, stats))
    return anomalies


def _reads_lost(part: PartitionIndex, drains: list[_Drain], reported: set[int], run: CheckInput,
                stats: dict[str, Any]) -> list[Anomaly]:
    """Records a read returned that a drain begun after that read ended lacks altogether. A
    consumer reads only below the HW, so whatever it read was committed, acknowledged or
    not (a send that timed out, say). A different value at that offset is an inconsistent
    offset, reported as such; ``reported`` holds offsets already reported lost."""
    topic, partition = part.partition
    reads = part.reads  # in the order of their completions
    ended = [read.op for read in reads]
    anomalies = []
    for drain in drains:
        before = reads[:bisect.bisect_left(ended, drain.read.invoke)]
        read_offsets: set[int] = set()
        for read in before:  # the common case in C: every offset read is in the drain
            read_offsets.update(map(_OFFSET, read.records))
        missing = read_offsets - drain.held.keys() - reported
        for read in before if missing else ():  # each missing offset named by the first read of it
            for offset, value in read.records:
                if offset not in missing:
                    continue
                missing.discard(offset)
                reported.add(offset)
                stats["read_then_missing"] = stats.get("read_then_missing", 0) + 1
                anomalies.append(Anomaly(
                    "lost-write",
                    f"Op {read.op} read {value!r} at offset {offset} of {topic}/{partition}, but "
                    f"{drain.name(drains)}, begun after that read, does not contain the offset.",
                    topic, partition, (offset,), (read.op, drain.read.op),
                    details={"how": "read-then-missing", "value": value,
                             **run.loss_details(topic, partition, committed=True)}))
    return anomalies
