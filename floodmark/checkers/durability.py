"""Durability: an acknowledged record stays where it was acknowledged, forever.

Kafka's contract for ``acks=all``: once a send is acknowledged at offset *o*, every later
read of the partition finds the same value at *o*, and so does the final drain that reads
every partition from the beginning after all faults are healed. This checker reports

- ``lost-write``: an acknowledged value is missing from the final drain (``how: missing``),
  or the drain has it at a different offset (``how: moved``);
- ``inconsistent-offsets``: two different values observed at one offset, by reads or by a
  read and an acknowledgement.

Sends whose outcome is unknown (``info``) may be present or absent; sends that failed are the
queue checker's business (a read of one is Jepsen's G1a). Losses the configuration permits
(see :mod:`floodmark.checkers.permitted`) are still anomalies, marked ``permitted_by``; with
acks below all, a lost record that a consumer had read was committed and is a violation all
the same. A partition with acknowledged sends but no successful drain cannot be judged: the
verdict is then "unknown" unless something else is already wrong, and so is a history with
no client op at all.
"""

from __future__ import annotations

from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.checkers.queue_index import PartitionIndex, index_for
from floodmark.results import Anomaly, CheckerResult, Validity


class DurabilityChecker:
    name = "durability"

    def check(self, run: CheckInput) -> CheckerResult:
        index = index_for(run.history)
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
            stats["unjudged_because"] = "acknowledged sends in partitions no successful drain read"
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


def _read_values_at(part: PartitionIndex, polls_only: bool = False) -> dict[int, set[Any]]:
    """offset -> every value a read (only polls: ``polls_only``) returned there."""
    found: dict[int, set[Any]] = {}
    for read in part.reads:
        if polls_only and read.f != "poll":
            continue
        for offset, value in read.records:
            found.setdefault(offset, set()).add(value)
    return found


def _lost_writes(part: PartitionIndex, drained: bool, run: CheckInput, stats: dict[str, Any]) -> list[Anomaly]:
    topic, partition = part.partition
    final: dict[int, Any] = {}
    offset_of: dict[Any, int] = {}
    drain_ops: list[int] = []
    for read in part.reads:
        if read.f == "drain":
            drain_ops.append(read.op)
            for offset, value in read.records:
                final.setdefault(offset, value)
                offset_of.setdefault(value, offset)
    polled: dict[int, set[Any]] | None = None  # what polls read where, if acks may excuse a loss
    anomalies = []
    for send in part.sends:
        if send.outcome == "info" and drained:
            key = "indeterminate_present" if send.value in offset_of else "indeterminate_absent"
            stats[key] += 1
        if send.outcome != "ok" or send.offset is None:
            continue
        stats["acknowledged"] += 1
        if not drained:
            stats["unjudged"] += 1
            continue
        stats["judged"] += 1
        if final.get(send.offset) == send.value:
            continue
        witnesses = tuple(sorted({send.invoke, *((send.completion,) if send.completion is not None else ()), *drain_ops[-1:]}))
        moved_to = offset_of.get(send.value)
        if moved_to is not None:
            stats["moved"] += 1
            explanation = (f"Send of {send.value!r} was acknowledged at offset {send.offset} of {topic}/{partition}, "
                           f"but the final drain has it at offset {moved_to}.")
            extra = {"how": "moved", "value": send.value, "moved_to": moved_to}
        else:
            stats["lost"] += 1
            explanation = (f"Send of {send.value!r} was acknowledged at offset {send.offset} of {topic}/{partition}, "
                           f"but the final drain does not contain it"
                           + (f" (it has {final[send.offset]!r} there)." if send.offset in final else "."))
            extra = {"how": "missing", "value": send.value}
        if polled is None:
            polled = _read_values_at(part, polls_only=True) if _acks_may_excuse(run) else {}
        committed = send.value in polled.get(send.offset, ())  # a consumer read it where it was acknowledged
        anomalies.append(Anomaly("lost-write", explanation, topic, partition, (send.offset,), witnesses,
                                 details={**extra, **run.loss_details(topic, partition, committed=committed)}))
    return anomalies
