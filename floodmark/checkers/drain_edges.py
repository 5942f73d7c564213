"""Records a drain lacks outside the span it returned, though a read had returned them.

A drain reads its partition from offset 0 to the end (floodmark's final drain, and the
final round of a Jepsen kafka history, which assigns every key with ``:seek-to-beginning?
true``). The queue checker's other rules see most of what a drain lacks: a known record
between two records it returned is a ``poll-skip`` (its order rules, as Jepsen names it),
and an acknowledged value no read ever returned is a ``lost-write`` or ``unseen``. Neither
sees a record a consumer *read* that a drain begun after that read ended lacks below the
first offset the drain returned, or above its last: the drain sought to the beginning, so
there is no position it could have jumped from, and the value was read once, so Jepsen's
lost write (a value below the highest read that *nobody* read) never counts it. It was
committed (a consumer reads only committed records) and the log no longer holds it: a
``lost-write`` (``how: read-then-missing``, as :mod:`.durability` names it too).

Jepsen's analysis reports nothing for such a history: a process's first read of a key is
compared with no earlier one, and the history does not say where a poll began. Nor may the
log's start legitimately move past the record during a test: Jepsen creates its topics with
the broker's defaults (retention measured in days) and a history states no retention, as a
floodmark run states none; Jepsen's own lost-write rule assumes as much.
"""

from __future__ import annotations

import bisect
import operator

from floodmark.checkers.api import CheckInput
from floodmark.checkers.partition_index import PartitionIndex
from floodmark.contracts.results import Anomaly

_BEGUN = operator.attrgetter("invoke")  # a drain's batch, by when the drain began
_OFFSET = operator.itemgetter(0)


def read_then_missing(part: PartitionIndex, run: CheckInput) -> list[Anomaly]:
    """Each offset a read returned that a drain begun after that read ended lacks below its
    first offset or above its last (all of them, if it returned none), named by the first
    read of it; each offset once."""
    drains = sorted((read for read in part.reads if read.is_drain), key=_BEGUN)
    if not drains:
        return []
    topic, partition = part.partition
    reads = part.reads  # in the order of their completions
    ended = [read.op for read in reads]
    reported: set[int] = set()
    anomalies: list[Anomaly] = []
    for drain in drains:
        offsets = list(map(_OFFSET, drain.records))
        low, high = (min(offsets), max(offsets)) if offsets else (None, None)
        for read in reads[:bisect.bisect_left(ended, drain.invoke)]:
            for offset, value in read.records:
                if offset in reported or (low is not None and high is not None and low <= offset <= high):
                    continue  # (inside what the drain returned: the order rules' business)
                reported.add(offset)
                where = ("returned nothing" if low is None else
                         f"starts past it, at offset {low}" if offset < low else f"ends before it, at offset {high}")
                anomalies.append(Anomaly(
                    "lost-write",
                    f"Op {read.op} read {value!r} at offset {offset} of {topic}/{partition}, but the drain of op "
                    f"{drain.op}, begun after that read, {where}.",
                    topic, partition, (offset,), (read.op, drain.op),
                    details={"how": "read-then-missing", "value": value,
                             **run.loss_details(topic, partition, committed=True)}))
    return anomalies
