"""Whether a queue or log op's completion agrees with its invocation, and its offsets are offsets.

A client op is recorded twice (Jepsen's history): its invocation says what was asked (a send
of this value to this partition, a poll from these positions, a read of this offset) and its
completion what came of it, echoing what was asked beside what it adds (the offset a send
got, the records a poll returned). An op whose completion names another partition, another
value or another position than its invocation contradicts itself: where the record went, or
where the poll read from, cannot be told, so neither reading may become a verdict. And an
offset is a place in a log, a whole number from 0: a negative one is no place at all.

The functions here say what is wrong, in words, or None; the history index lists such ops as
malformed (:mod:`floodmark.checkers.queue_index`), which makes the checkers' verdict unknown.
Only what a completion states is compared: one that echoes nothing (a foreign history's)
contradicts nothing.
"""

from __future__ import annotations

from typing import Any

Partition = tuple[str, int]

# A log's offsets are 64-bit signed integers (Kafka's int64): a greater one is no place in
# any log, and a history holding one is damaged (JSON itself puts no bound on an integer).
MAX_OFFSET = 2**63 - 1


def offset_problem(offset: Any, what: str) -> str | None:
    """Why ``offset`` (``what`` holds it) is no offset in a log, or None: an integer below 0
    or beyond :data:`MAX_OFFSET` (one of another type is the caller's to judge)."""
    if type(offset) is int and offset < 0:
        return f"{what} {offset}, below 0 (no log has such an offset)"
    if type(offset) is int and offset > MAX_OFFSET:
        return f"{what} {offset if offset < 10**30 else 'of ' + str(len(str(offset))) + ' digits'}, " \
               "beyond 2**63-1 (no log has such an offset: offsets are 64-bit)"
    return None


def unfit_high_watermark(high_watermark: Any) -> bool:
    """True if a batch's ``high_watermark`` is stated (not absent, not null) and is not a
    whole number from 0 (:func:`batch_problem` says what is wrong with it)."""
    return high_watermark is not None and (type(high_watermark) is not int
                                           or not 0 <= high_watermark <= MAX_OFFSET)


def acknowledgement_problem(invoked: dict[str, Any], acknowledged: dict[str, Any]) -> str | None:
    """What an ok send's (or append's) acknowledgement says against its invocation: another
    partition or another value than was sent; None when it agrees where it says anything."""
    topic, partition, value = invoked.get("topic"), invoked.get("partition"), invoked.get("value")
    acked_topic, acked_partition = acknowledged.get("topic", topic), acknowledged.get("partition", partition)
    if not (_same(acked_topic, topic) and _same(acked_partition, partition)):
        return (f"acknowledged send names partition {_shown_key((acked_topic, acked_partition))}, but the send "
                f"was to {_shown_key((topic, partition))}")
    acked_value = acknowledged.get("value", value)
    if not _same(acked_value, value):
        return f"acknowledged send names value {_shown(acked_value)}, but the send was of {_shown(value)}"
    return None


def acknowledged_elsewhere(invoked: dict[str, Any], acknowledged: Any) -> tuple[Partition, Any] | None:
    """The partition and value an acknowledgement names, when they are a partition and a
    value (a topic and a number; a string or an integer) other than the invoked ones: where
    the send may have written instead. None otherwise."""
    if not isinstance(acknowledged, dict):
        return None
    topic, partition, value = invoked.get("topic"), invoked.get("partition"), invoked.get("value")
    acked_topic, acked_partition = acknowledged.get("topic", topic), acknowledged.get("partition", partition)
    acked_value = acknowledged.get("value", value)
    if type(acked_topic) is not str or type(acked_partition) is not int or type(acked_value) not in (str, int):
        return None
    if _same(acked_topic, topic) and _same(acked_partition, partition) and _same(acked_value, value):
        return None
    return (acked_topic, acked_partition), acked_value


def batch_problem(f: str, requested: Any, batch: dict[str, Any]) -> str | None:
    """What a poll's (or drain's) batch says against the positions the op fetched from: a
    partition it did not fetch, or another offset to start from than it fetched at; a drain
    that did not read from offset 0 (the batch's start, or the position it fetched from); and a
    start below 0, or a high watermark that is no offset (stated, it is one, though no
    checker reads it: a batch that states an impossible one is not to be trusted for the
    rest). None when it agrees (or the invocation states no positions to compare)."""
    topic, partition, start = batch["topic"], batch["partition"], batch.get("offset")
    if type(start) is int and not 0 <= start <= MAX_OFFSET:
        return offset_problem(start, f"{f}'s batch of {_shown_key((topic, partition))} starts at offset")
    high_watermark = batch.get("high_watermark")
    if unfit_high_watermark(high_watermark):
        where = f"{f}'s batch of {_shown_key((topic, partition))} has high watermark"
        return offset_problem(high_watermark, where) or f"{where} {_shown(high_watermark)}, not an integer"
    if f == "drain" and type(start) is int and start != 0:
        return _drain_not_from_zero(topic, partition, start)
    if type(requested) is not list:
        return None
    for position in requested:  # (a poll fetches a few partitions: one, most often)
        if type(position) is not dict or "topic" not in position or "partition" not in position:
            return None  # positions not stated as maps (a foreign history's poll): nothing to compare
        if _same(position["topic"], topic) and _same(position["partition"], partition):
            offset = position.get("offset")
            if f == "drain" and start is None and type(offset) is int and offset != 0:
                return _drain_not_from_zero(topic, partition, offset)
            if start is None or offset is None or _same(start, offset):
                return None
            return (f"{f}'s batch of {_shown_key((topic, partition))} starts at offset {_shown(start)}, but the "
                    f"{f} fetched it from {_shown(offset)}")
    fetched = ", ".join(_shown_key((p["topic"], p["partition"])) for p in requested)
    return f"{f} returned a batch of {_shown_key((topic, partition))}, a partition it did not fetch ({fetched or 'none'})"


def _drain_not_from_zero(topic: Any, partition: Any, begun: int) -> str:
    # What lies below where it began, it did not read: judged as a drain, it would vouch
    # that the acknowledged records there were lost.
    return (f"drain's batch of {_shown_key((topic, partition))} starts at offset {_shown(begun)}, "
            "but a drain reads its partition from offset 0")


def read_problem(invoked: dict[str, Any], completed: dict[str, Any]) -> str | None:
    """What a log read's completion says against its invocation: another partition or another
    offset than was read, or an offset below 0. None when it agrees."""
    offset = invoked.get("offset")
    problem = offset_problem(offset, "read of offset")
    if problem is not None:
        return problem
    topic, partition = invoked.get("topic"), invoked.get("partition")
    read = (completed.get("topic", topic), completed.get("partition", partition))
    at = completed.get("offset", offset)
    if not (_same(read[0], topic) and _same(read[1], partition) and _same(at, offset)):
        return (f"read's completion names {_shown_key(read)} at offset {_shown(at)}, but the read was of "
                f"{_shown_key((topic, partition))} at offset {_shown(offset)}")
    return None


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same type (JSON's true is not 1, as Python's is)."""
    return a == b and type(a) is type(b)


def _shown_key(key: tuple[Any, Any]) -> str:
    topic, partition = key
    if type(topic) is str and type(partition) is int:
        text = f"{topic}/{partition}"
        return text if len(text) <= 60 else text[:57] + "..."
    return _shown(list(key))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
