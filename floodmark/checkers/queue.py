"""Queue anomalies: Jepsen's Kafka analysis over the client history.

Names and meanings follow ``jepsen.tests.kafka`` so results can be compared with Jepsen's:

- ``inconsistent-offsets``: two different values observed at one offset of a partition.
- ``duplicate``: one value at more offsets of a partition than sends of it there may have
  written (sends not known to have failed: a history may send one value twice), unless the
  producer's configuration allows duplicates (retries without idempotence).
- ``lost-write``: an acknowledged send at an offset no higher than the highest offset any
  consumer read from that partition, whose value no consumer ever read, where a read passed
  over that offset (a batch from where it fetched, or its first record, to its last; a
  consumer's successive polls of a partition) or a drain begun after the acknowledgement read
  the partition to its end. A poll from the middle of a log says nothing of the offsets below
  where it fetched: a send there that nobody read past, with no drain since, makes the verdict
  unknown, as an unseen one does. Also a record a read returned that a drain begun after
  that read lacks below the first offset the drain returned or above its last (``how:
  read-then-missing``, :mod:`.drain_edges`): Jepsen counts a value read once as never lost.
- ``unseen``: an acknowledged send never read by anyone by the end of the test, above the
  highest offset read (below it, it is a lost write instead), in a partition a drain begun
  after the acknowledgement read to its end. Where no drain did, nobody looked that far:
  such sends make the verdict unknown, not invalid.
- ``poll-skip``: a consumer's consecutive reads of a partition (within one poll, or across
  its successive polls without a reassignment) jumped over values known to lie between; or
  a poll's first record lies past values known to lie between it and the offset the poll
  fetched from (the first poll after an assignment, or a consumer's first poll: the history
  states where each poll fetched from, which Jepsen's histories do not).
- ``nonmonotonic-poll``: such consecutive reads went backwards or repeated, or a poll's first
  record lies below the offset it fetched from.
- ``nonmonotonic-send``: one process's successive acknowledged sends to a partition got
  decreasing offsets.
- ``G1a``: a read of a value whose send *to that partition* definitely failed (an aborted
  read), and that no other send of the partition may have written. Failed sends are kept
  per partition, as Jepsen's ``g1a-cases`` keeps failed writes per key.
- ``G1c-realtime``: a read of a value that completed before every send of that value to the
  partition began: it read the future. Jepsen's cycle search finds it over single ops too (a
  write-read edge one way, real time the other); it needs no transactions.
- ``unexpected``: a read of a value no send to that partition ever tried to write (Jepsen's
  queue checkers' name): a record from nowhere, or from another partition, whether the send
  there succeeded or failed. Every send the clients made is in the history, so no record can
  come from outside it.

Positions are compared in each partition's *version order*: the offsets at which any value
was observed, ranked; gaps in what was observed never count as skips. A consumer's
``assign`` resets its positions, as does a poll the index could not place in its order
(malformed: the verdict is unknown, and no skip is made up across it) or one whose outcome
is unknown (it may have moved the consumer; a run's process issues nothing after it); the
final drain (which re-reads from offset 0) is only checked within itself (what it lacks
outside the span it returned is a lost write, above).

Losses the configuration permits carry ``permitted_by`` (see :mod:`.permitted`), a producer's
offsets going backwards included: a log that lost acknowledged records, as the configuration
allows, hands out their offsets again. A history with no client op tested nothing: unknown.
"""

from __future__ import annotations

import bisect
import operator
from collections import Counter
from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.checkers.drain_edges import read_then_missing
from floodmark.checkers.durability import inconsistent_offsets
from floodmark.checkers.partition_index import PartitionIndex, Send
from floodmark.checkers.queue_index import QueueIndex, index_for
from floodmark.contracts.results import Anomaly, CheckerResult, Validity, anomaly_counts
from floodmark.contracts.run_config import TestConfig


def duplicates_permitted_by(config: TestConfig | None) -> str | None:
    """Why a value may be written twice, or None: only a producer that retries without
    idempotence may write one (a run that states no configuration does not say it does)."""
    if config is not None and config.producer_retries_without_idempotence:
        return "the producer retries without idempotence"
    return None


class QueueChecker:
    name = "queue"

    def check(self, run: CheckInput) -> CheckerResult:
        index = index_for(run.history, run.config)
        duplicate_reason = duplicates_permitted_by(run.config)
        anomalies: list[Anomaly] = []
        stats: dict[str, Any] = {"sends": {"ok": 0, "fail": 0, "info": 0}, "records_read": 0,
                                 "partitions": len(index.partitions), "duplicates_allowed": 0}
        ranks: dict[tuple[str, int], VersionOrder] = {}
        covered: dict[tuple[str, int], Spans] = {}  # worked out the first time a send needs it
        for key in sorted(index.partitions):
            part = index.partitions[key]
            for outcome, count in Counter(map(_OUTCOME, part.sends)).items():
                stats["sends"][outcome] = stats["sends"].get(outcome, 0) + count
            anomalies.extend(inconsistent_offsets(part, run))
            duplicates = _duplicates(part, run)
            if duplicate_reason:
                stats["duplicates_allowed"] += len(duplicates)
            else:
                anomalies.extend(duplicates)
            # What no consumer read was vouched for by its acknowledgement alone.
            details = run.loss_details(key[0], key[1], committed=False)
            anomalies.extend(_lost_and_unseen(part, index, covered, details, stats))
            anomalies.extend(read_then_missing(part, run))
            anomalies.extend(_aborted_reads(part, index.stray_values))
            anomalies.extend(_unexpected_reads(part, index.stray_values))
            anomalies.extend(_future_reads(part, index.stray_values))
            anomalies.extend(_nonmonotonic_sends(part, details))
            ranks[key] = _version_order(part)
        anomalies.extend(_poll_order(index, ranks))
        stats["anomalies"] = anomaly_counts(anomalies)
        stats["permitted"] = sum("permitted_by" in a.details for a in anomalies)
        stats["violations"] = len(anomalies) - stats["permitted"]
        if duplicate_reason:
            stats["duplicates_allowed_by"] = duplicate_reason
        valid: Validity = not anomalies
        if valid and stats.get("unseen_undrained"):
            valid = "unknown"
            stats["unjudged_because"] = ("acknowledged sends above every read, in partitions no "
                                         "successful drain read to the end")
        elif valid and stats.get("unread_uncovered"):
            valid = "unknown"
            stats["unjudged_because"] = ("acknowledged sends below what consumers read but at offsets no "
                                         "read passed over, in partitions no successful drain read since")
        if index.malformed:  # ops the checker could not read: it cannot vouch for the history
            stats["malformed_ops"] = [{"op": i, "problem": p} for i, p in index.malformed[:20]]
            valid = False if anomalies else "unknown"
        if valid is True and index.client_ops == 0:
            valid = "unknown"
            stats["unjudged_because"] = "the history has no client op: nothing was tested"
        return CheckerResult(valid, anomalies, stats)


_OUTCOME = operator.attrgetter("outcome")
_RECORDS = operator.attrgetter("records")

VersionOrder = tuple[dict[int, int], list[int]]  # (rank of each observed offset, offsets by rank)


def _version_order(part: PartitionIndex) -> VersionOrder:
    ordered = sorted(part.observations().value_at)
    return dict(zip(ordered, range(len(ordered)))), ordered


def _duplicates(part: PartitionIndex, run: CheckInput) -> list[Anomaly]:
    """Values at more offsets than sends of them may have written. One whose extra offsets
    only an acknowledgement vouched for (a consumer read it at one offset at most) is what a
    permitted loss leaves when its record is sent again: it carries the loss's permission, as
    a loss would."""
    observed = part.observations()
    topic, partition = part.partition
    found: list[tuple[Any, list[int], tuple[int, ...]]] = []  # (value, offsets, witnesses)
    for value, op in observed.duplicate_witness.items():
        found.append((value, sorted(observed.more_offsets[value]), (op,)))
    for value in observed.offset_of:  # acknowledged at several offsets, read at none (in observation order)
        offsets = observed.more_offsets.get(value)
        if offsets is not None and value not in observed.duplicate_witness:
            found.append((value, sorted(offsets), ()))
    if found:  # a value sent several times may stand at as many offsets
        tries = Counter(send.value for send in part.sends if send.outcome != "fail")
        found = [entry for entry in found if len(entry[1]) > tries[entry[0]]]
    if not found:
        return []
    read_at = _read_offsets(part, {value for value, _, _ in found})
    return [Anomaly(
        "duplicate", f"Value {value!r} appears at {len(offsets)} offsets of {topic}/{partition}: {offsets}.",
        topic, partition, tuple(offsets), witnesses,
        details={"value": value, "count": len(offsets),
                 **run.loss_details(topic, partition, committed=len(read_at.get(value, ())) > 1)})
        for value, offsets, witnesses in found]


def _read_offsets(part: PartitionIndex, values: set[Any]) -> dict[Any, set[int]]:
    """value -> the offsets reads returned it at, for ``values`` only."""
    read_at: dict[Any, set[int]] = {}
    for read in part.reads:
        for offset, value in read.records:
            if value in values:
                read_at.setdefault(value, set()).add(offset)
    return read_at


Spans = tuple[list[int], list[int]]  # merged [first, last] offset ranges reads passed over: firsts, lasts


def _covered(index: QueueIndex) -> dict[tuple[str, int], Spans]:
    """Per partition, the offsets some read passed over: each batch's, from where it fetched
    (or its first record, if it fetched above it or does not say) to its last record, and
    between a consumer's successive polls of a partition (its position moves only forward
    until an assign sets it). A record acknowledged there and not returned was skipped or
    lost; one elsewhere may be where nobody looked."""
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for key, part in index.partitions.items():
        found = spans[key] = []
        for read in part.reads:
            if read.records:
                first, last = read.records[0][0], read.records[-1][0]
                start = read.start if read.placed else None  # (a batch at odds with its op: from its records)
                found.append((start if type(start) is int and start < first else first, max(first, last)))
    for ops in index.consumer_ops.values():
        last_read: dict[tuple[str, int], int] = {}
        for kind, read in ops:
            if kind != "read":  # an assign, or a poll not placed: positions unknown
                last_read.clear()
                continue
            if read.f == "drain" or not read.records or read.partition not in spans:
                continue
            before = last_read.get(read.partition)
            first = read.records[0][0]
            if before is not None and before < first:
                spans[read.partition].append((before, first))
            last_read[read.partition] = read.records[-1][0]
    return {key: _merged(found) for key, found in spans.items()}


def _spans(index: QueueIndex, covered: dict[tuple[str, int], Spans], key: tuple[str, int]) -> Spans:
    """The spans of partition ``key``, working out every partition's into ``covered`` once."""
    if not covered:
        covered.update(_covered(index))
    return covered.get(key, ([], []))


def _merged(spans: list[tuple[int, int]]) -> Spans:
    firsts: list[int] = []
    lasts: list[int] = []
    for first, last in sorted(spans):
        if lasts and first <= lasts[-1] + 1:
            lasts[-1] = max(lasts[-1], last)
        else:
            firsts.append(first)
            lasts.append(last)
    return firsts, lasts


def _passed_over(spans: Spans, offset: int) -> bool:
    firsts, lasts = spans
    i = bisect.bisect_right(firsts, offset) - 1
    return i >= 0 and offset <= lasts[i]


def _lost_and_unseen(part: PartitionIndex, index: QueueIndex, covered: dict[tuple[str, int], Spans],
                     details: dict[str, Any], stats: dict[str, Any]) -> list[Anomaly]:
    """``covered``: :func:`_covered` of ``index``, filled the first time a send asks (rare:
    nearly every send was read)."""
    observed = part.observations()
    # A send is unseen only if a drain begun after its acknowledgement read to the end.
    last_drain = max((read.invoke for read in part.reads if read.is_drain), default=-1)
    read_values, highest_read = observed.read_values, observed.highest_read
    stats["records_read"] += sum(map(len, map(_RECORDS, part.reads)))
    topic, partition = part.partition
    anomalies = []
    for send in part.sends:
        if send.outcome != "ok" or send.offset is None or send.value in read_values:
            continue
        witnesses = (send.invoke,) + ((send.completion,) if send.completion is not None else ())
        drained_since = last_drain > (send.completion if send.completion is not None else send.invoke)
        if send.offset <= highest_read and not drained_since and not _passed_over(
                _spans(index, covered, part.partition), send.offset):
            # Reads went past this offset, but none from below it: nobody looked there.
            stats["unread_uncovered"] = stats.get("unread_uncovered", 0) + 1
        elif send.offset <= highest_read:
            anomalies.append(Anomaly(
                "lost-write",
                f"Send of {send.value!r} was acknowledged at offset {send.offset} of {topic}/{partition}; "
                f"consumers read up to offset {highest_read} but never saw it.",
                topic, partition, (send.offset,), witnesses, details={"value": send.value, **details}))
        elif not drained_since:
            # Nobody read this partition to its end since: the send may be there, past every read.
            stats["unseen_undrained"] = stats.get("unseen_undrained", 0) + 1
        else:
            anomalies.append(Anomaly(
                "unseen",
                f"Send of {send.value!r} was acknowledged at offset {send.offset} of {topic}/{partition} "
                f"but no consumer ever read it (highest offset read: {highest_read}).",
                topic, partition, (send.offset,), witnesses, details={"value": send.value, **details}))
    return anomalies


def _aborted_reads(part: PartitionIndex, stray: set[Any]) -> list[Anomaly]:
    """Values read whose send to this partition definitely failed, and that no other send may
    have written there (one not known to fail, or a ``stray`` one, which may be anywhere)."""
    failed: dict[Any, Send] = {}
    for send in part.sends:
        if send.outcome == "fail":
            failed.setdefault(send.value, send)
    if not failed:
        return []
    observed = part.observations()
    aborted = [v for v in failed if v in observed.read_values and v not in stray]
    if aborted:  # a value also sent without failing may be that send's (histories may reuse values)
        tried = {send.value for send in part.sends if send.outcome != "fail"}
        aborted = [v for v in aborted if v not in tried]
    if not aborted:
        return []
    topic, partition = part.partition
    anomalies = []
    for value in aborted:
        offset = min(observed.offsets(value))
        read_op = observed.witness_at.get(offset)
        send = failed[value]
        anomalies.append(Anomaly(
            "G1a",
            f"Op {read_op} read {value!r} at offset {offset} of {topic}/{partition}, "
            f"but its send (op {send.invoke}) definitely failed.",
            topic, partition, (offset,),
            tuple(sorted({send.invoke, send.completion or send.invoke, *((read_op,) if read_op is not None else ())})),
            details={"value": value}))
    return anomalies


def _unexpected_reads(part: PartitionIndex, stray: set[Any]) -> list[Anomaly]:
    """Values read that no send to this partition tried to write (a failed send to it is
    G1a's business; a send to another partition, failed or not, wrote nothing here; one of a
    send that names no partition the run has, ``stray``, may have been written anywhere: that
    send is malformed, and the verdict unknown for it)."""
    observed = part.observations()
    sent = {send.value for send in part.sends}
    first_at = sorted(((min(observed.offsets(v)), v) for v in observed.read_values
                       if v not in sent and v not in stray),
                      key=_OFFSET)  # by offset only: values of two types do not compare
    topic, partition = part.partition
    anomalies = []
    for offset, value in first_at:
        read_op = observed.witness_at.get(offset)
        anomalies.append(Anomaly(
            "unexpected",
            f"Op {read_op} read {value!r} at offset {offset} of {topic}/{partition}, a value no send to "
            f"{topic}/{partition} in the history tried to write.",
            topic, partition, (offset,), (read_op,) if read_op is not None else (),
            details={"value": value}))
    return anomalies


def _future_reads(part: PartitionIndex, stray: set[Any]) -> list[Anomaly]:
    """Records read by an op that completed before every send of their value to this
    partition was invoked (history order is real-time order). A ``stray`` value's send names
    no partition the run has and may be anywhere: it is left to the malformed-op verdict."""
    first_invoke: dict[Any, int] = {}  # value -> the earliest invocation of a send of it here
    for send in part.sends:
        if send.invoke < first_invoke.get(send.value, send.invoke + 1):
            first_invoke[send.value] = send.invoke
    if not first_invoke:
        return []
    latest = max(first_invoke.values())
    found: dict[Any, tuple[int, int]] = {}  # value -> (offset, the first read of it before its send)
    for read in part.reads:
        if read.op >= latest:
            continue  # every send here had begun before this read completed
        for offset, value in read.records:
            began = first_invoke.get(value)
            if began is not None and began > read.op and value not in found and value not in stray:
                found[value] = (offset, read.op)
    topic, partition = part.partition
    return [Anomaly(
        "G1c-realtime",
        f"Op {read_op} read {value!r} at offset {offset} of {topic}/{partition} and completed before "
        f"any send of {value!r} there began (op {first_invoke[value]}): it read a value from the future.",
        topic, partition, (offset,), (read_op, first_invoke[value]), details={"value": value})
        for value, (offset, read_op) in found.items()]


def _nonmonotonic_sends(part: PartitionIndex, details: dict[str, Any]) -> list[Anomaly]:
    last: dict[Any, tuple[int, int]] = {}  # process -> (offset, completion op)
    anomalies = []
    topic, partition = part.partition
    # sends are indexed in completion order, which is invocation order within one process
    for send in part.sends:
        if send.outcome != "ok" or send.offset is None:
            continue
        process = send.process
        before = last.get(process)
        if before is not None and send.offset is not None and send.offset <= before[0]:
            anomalies.append(Anomaly(
                "nonmonotonic-send",
                f"Process {process!r} sent to {topic}/{partition} at offset {before[0]}, then its next "
                f"acknowledged send got offset {send.offset}.",
                topic, partition, (before[0], send.offset), (before[1], send.completion or send.invoke),
                details=dict(details)))
        last[process] = (send.offset, send.completion or send.invoke)  # type: ignore[assignment]
    return anomalies


def _poll_order(index: QueueIndex, ranks: dict[tuple[str, int], VersionOrder]) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    for process, ops in index.consumer_ops.items():
        last: dict[tuple[str, int], tuple[int, int, int]] = {}  # partition -> (rank, offset, op)
        for kind, read in ops:
            if kind != "read":  # an assign, or a poll not placed: positions unknown
                last.clear()
                continue
            records = read.records
            key = read.partition
            drain = read.f == "drain"
            if drain:
                last.pop(key, None)
            if not records:
                continue
            rank_of, ordered = ranks[key]
            first_offset = records[0][0]
            previous = last.get(key)
            delta = 1  # (no read before: nothing to compare with)
            if previous is not None:
                delta = rank_of[first_offset] - previous[0]
                if delta != 1:
                    anomalies.append(_order_anomaly(process, read, previous, first_offset, delta, ordered))
            if delta == 1 and not drain and type(read.start) is int and first_offset < read.start:
                # Records below the position the poll fetched from: the log handed back what
                # the consumer had already passed (whether or not it read the partition before).
                anomalies.append(_order_anomaly(process, read, (bisect.bisect_left(ordered, read.start),
                                                                read.start, read.op),
                                                first_offset, 0, ordered, fetched_from=True))
            elif previous is None and not drain and type(read.start) is int and read.start < first_offset:
                # No read of this partition since the consumer's positions were set: its fetch
                # position is where it stood. Known records from there to the first returned
                # were skipped.
                skipped = rank_of[first_offset] - bisect.bisect_left(ordered, read.start)
                if skipped > 0:
                    anomalies.append(_order_anomaly(process, read, (rank_of[first_offset] - skipped - 1,
                                                                    read.start, read.op),
                                                    first_offset, skipped + 1, ordered, fetched_from=True))
            # Consecutive offsets are consecutive in the version order too (both were observed);
            # only a batch that is not consecutive needs its ranks compared one by one.
            if not _consecutive(records, first_offset):
                before = (rank_of[first_offset], first_offset, read.op)
                for offset, _ in records[1:]:
                    rank = rank_of[offset]
                    delta = rank - before[0]
                    if delta != 1:
                        anomalies.append(_order_anomaly(process, read, before, offset, delta, ordered))
                    before = (rank, offset, read.op)
            if not drain:
                last_offset = records[-1][0]
                last[key] = (rank_of[last_offset], last_offset, read.op)
    return anomalies


def _consecutive(records: list[Any], first: Any) -> bool:
    """Whether the batch's offsets go up one by one from ``first``, its first offset."""
    count = len(records)
    if count < 3:
        return count == 1 or records[1][0] == first + 1
    if type(first) is int:
        return list(map(_OFFSET, records)) == list(range(first, first + count))
    expected = first
    for offset, _ in records:
        if offset != expected:
            return False
        expected += 1
    return True


_OFFSET = operator.itemgetter(0)


def _order_anomaly(process: Any, read: Any, previous: tuple[int, int, int], offset: int, delta: int,
                   ordered: list[int], *, fetched_from: bool = False) -> Anomaly:
    """``previous`` is (rank, offset, op) of the read before; with ``fetched_from``, its rank is
    that of the last known offset below the position the poll fetched from (``previous[1]``)."""
    topic, partition = read.partition
    where = "within one poll" if previous[2] == read.op else "between successive polls"
    if delta > 1:
        skipped = ordered[previous[0] + 1 : previous[0] + delta]
        said = (f"fetched from offset {previous[1]} of {topic}/{partition} but got offset {offset} first"
                if fetched_from else
                f"read offset {previous[1]} then offset {offset} of {topic}/{partition} {where}")
        return Anomaly(
            "poll-skip",
            f"Process {process!r} {said}, skipping {len(skipped)} known record(s).",
            topic, partition, (previous[1], offset), tuple(sorted({previous[2], read.op})),
            details={"skipped_offsets": skipped[:100], "delta": delta})
    said = (f"fetched from offset {previous[1]} of {topic}/{partition} but got offset {offset} first"
            if fetched_from else f"read offset {previous[1]} then offset {offset} of {topic}/{partition} {where}")
    return Anomaly(
        "nonmonotonic-poll",
        f"Process {process!r} {said}: the position went backwards or repeated.",
        topic, partition, (previous[1], offset), tuple(sorted({previous[2], read.op})),
        details={"delta": delta})
