"""Any value in any field of a queue history: the checkers read it or name the op they could
not read, and never fail inside (a checker that raised would be reported unknown with its
traceback, which says nothing about the history)."""

from __future__ import annotations

from typing import Any

from checkers_fixtures import History
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.checkers.op_agreement import MAX_OFFSET
from floodmark.checkers.registry import judge_history
from floodmark.contracts.history import Op
from floodmark.contracts.run_config import TestConfig

ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**65), st.floats(allow_nan=True),
                st.text(max_size=3), st.lists(st.integers(0, 3), max_size=2),
                st.dictionaries(st.text(max_size=2), st.integers(0, 3), max_size=2))


def _history() -> History:
    h = History()
    for i in range(4):
        h.send(0, i % 2, f"v{i}", i // 2)
    h.call(1, "assign", [{"topic": "t0", "partition": 0, "offset": 0}])
    h.poll(1, 0, 0, [(0, "v0"), (1, "v2")])
    h.poll(2, 0, 0, [(0, "v0"), (1, "v2")], f="drain")
    h.poll(2, 1, 0, [(0, "v1"), (1, "v3")], f="drain")
    return h


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += _paths(inner, (*path, i))
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_no_checker_fails_on_an_odd_value_anywhere(data: st.DataObject) -> None:
    ops = _history().ops
    at = data.draw(st.integers(0, len(ops) - 1))
    op = ops[at]
    paths = _paths(op.value)
    value: Any = data.draw(ODD)
    if paths:
        path = data.draw(st.sampled_from(paths))
        holder = op.value
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value
    else:
        ops[at] = Op(op.index, op.time, op.type, op.process, op.f, value)
    for config in (None, TestConfig(), TestConfig(acks=1)):
        results = judge_history(ops, {}, config, checkers=["durability", "queue", "hw", "stats"])
        errors = {name: r.stats["error"] for name, r in results.items() if "error" in (r.stats or {})}
        assert errors == {}, (op.f, op.type, paths, value)
        if paths and path[-1] == "high_watermark":
            _judged_by_its_high_watermark(results, at, value)


def _judged_by_its_high_watermark(results: dict[str, Any], at: int, high_watermark: Any) -> None:
    """A batch stating a high watermark that is no offset (not null, not a whole number from
    0 to 2**63-1) is a malformed op, named, and the verdict on the sends and reads is unknown; any other
    leaves the (correct) history valid, since no checker reads it."""
    fit = high_watermark is None or (type(high_watermark) is int and 0 <= high_watermark <= MAX_OFFSET)
    for name in ("durability", "queue"):
        named = [m["op"] for m in results[name].stats.get("malformed_ops", [])]
        assert (results[name].valid, named) == ((True, []) if fit else ("unknown", [at])), (name, high_watermark)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([i for i, op in enumerate(_history().ops) if op.type == "ok" and op.f in ("poll", "drain")]),
       ODD | st.integers(-2**63, 2**63))
def test_a_batch_is_read_exactly_when_its_high_watermark_is_an_offset_or_unstated(at: int,
                                                                                   high_watermark: Any) -> None:
    ops = _history().ops
    ops[at].value[0]["high_watermark"] = high_watermark
    for config in (None, TestConfig()):
        _judged_by_its_high_watermark(judge_history(ops, {}, config, checkers=["durability", "queue"]), at,
                                      high_watermark)


@settings(max_examples=50, deadline=None)
@given(st.integers(-2**63, -1), st.sampled_from(["send", "poll", "both"]))
def test_a_partition_below_0_is_no_partition_and_never_judged(partition: int, where: str) -> None:
    """A send to, or a batch of, a partition below 0 is malformed and named: no log has such a
    partition, so a history that sends to one and reads it back is not judged valid (it was,
    taking -1 as one more partition, where the node events refuse it)."""
    h = History()
    h.send(0, partition if where != "poll" else 0, "v0", 0)
    h.poll(1, partition if where != "send" else 0, 0, [(0, "v0")], f="drain")
    results = judge_history(h.ops, {}, TestConfig(), checkers=["durability", "queue"])
    for name in ("durability", "queue"):
        malformed = results[name].stats.get("malformed_ops", [])
        # Never valid, nor invalid: a send naming no partition may have written its value
        # wherever it is read (as one naming partition "x"), so that read is no anomaly.
        assert results[name].valid == "unknown", (name, results[name])
        assert [m["op"] for m in malformed] == {"send": [0], "poll": [2], "both": [0, 2]}[where], malformed
        assert all(f"partition ['t0', {partition}], not a topic and a partition number from 0" in m["problem"]
                   for m in malformed), malformed
