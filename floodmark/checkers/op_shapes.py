"""What each op of the queue and log workloads holds, and words for one that does not.

The history index (:mod:`floodmark.checkers.queue_index`) lists an op it cannot read as
malformed, with why: the shape its kind has, what it held instead, and the foreign format
it most likely comes from (Jepsen's kafka micro-ops are the usual one: floodmark reads them
only from Jepsen's EDN, :mod:`floodmark.formats.jepsen_kafka`). Values sent and read
are strings or integers only: Python takes ``true`` for ``1`` and ``1.0`` for ``1``, so any
other value could not be compared value for value.
"""

from __future__ import annotations

from typing import Any

from floodmark.checkers.op_agreement import MAX_OFFSET, offset_problem

_READS = ("poll", "drain")


# What each op of the queue and log workloads holds, for the message about one that does not.
_SHAPES = {
    "send": "a send's value is a map of topic, partition and value, its acknowledgement's a map with the offset",
    "poll": "a poll's completion holds a list of batches, each a map of topic, partition and records",
    "read": "a read's value is a map of topic, partition and offset, its completion's a map with the value",
}
_SHAPES["append"] = _SHAPES["send"]
_SHAPES["drain"] = _SHAPES["poll"].replace("poll", "drain")
_MICRO_OPS = ("send", "poll")  # the micro-ops of Jepsen's kafka workload: [[:send k v] [:poll]]


def shape_problem(f: str, value: Any, completion: Any, error: Exception) -> str:
    """Why an op of kind ``f`` could not be read: the shape its kind has, what it held
    instead, and the foreign format it most likely comes from."""
    # A send or read is known by its value; a poll or drain by what it returned.
    held = completion if f in _READS and completion is not None and not _is_micro_ops(value) else value
    expected = _SHAPES.get(f, f"{f} is no op of a queue or log workload")
    if _is_micro_ops(held):
        return f"{f} op holds Jepsen kafka micro-ops ({shown_value(held)}), which the queue checkers read only from a Jepsen EDN history: {expected}"
    return f"{f} op has an unexpected shape ({type(error).__name__}: {error}): {expected}; it holds {shown_value(held)}"


def record_problem(records: Any) -> str | None:
    """What is wrong with a batch's records, or None: a list of ``[offset, value]`` pairs, each
    offset an integer and each value a string or an integer (see the module docstring)."""
    if type(records) is not list:
        return f"records are {shown_value(records)}, not a list"
    for record in records:
        if (type(record) is not list and type(record) is not tuple) or len(record) != 2:
            return f"record {shown_value(record)} is not an [offset, value] pair"
        offset, value = record
        if type(offset) is not int:
            return f"record {shown_value(record)} has offset {shown_value(offset)}, not an integer"
        if not 0 <= offset <= MAX_OFFSET:
            return offset_problem(offset, f"record {shown_value(record)} has offset")
        if type(value) is not str and type(value) is not int:
            return f"record {shown_value(record)}: {value_problem(value)}"
    return None


def failed_yet_done(f: str, outcome: str, completion: Any) -> str | None:
    """Why a failed op's completion contradicts its failure, or None: the harness records a
    failed send without an acknowledgement's offset and a failed poll or drain without
    records (a hand-edited type, ``ok`` made ``fail``). A checker that believed the failure
    would call the records read of it aborted writes, or a consumer's next read a skip."""
    if outcome != "fail":
        return None
    if f in ("send", "append") and isinstance(completion, dict) and "offset" in completion:
        held = f"an acknowledgement's offset ({shown_value(completion['offset'])})"
    elif f in _READS and isinstance(completion, list) and any(
            isinstance(batch, dict) and batch.get("records") for batch in completion):
        held = "records it read"
    else:
        return None
    return (f"{f} op failed, yet its completion holds {held}: the history says both that it did nothing "
            "and that it took effect, and not which is true")


def value_problem(value: Any) -> str:
    return (f"the value {shown_value(value)} is not a string or an integer (the checkers compare values exactly, "
            "and Python takes true for 1 and 1.0 for 1)")


def _is_micro_ops(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and all(isinstance(m, list) and m and m[0] in _MICRO_OPS for m in value[:8]))


def shown_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
