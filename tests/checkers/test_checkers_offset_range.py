"""Offsets are 64-bit: an offset beyond 2**63-1 in a history is damage, a malformed op named,
never a lost write or a poll skip (JSON puts no bound on an integer; a log does)."""

from __future__ import annotations

from checkers_fixtures import History
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.checkers.op_agreement import MAX_OFFSET
from floodmark.checkers.registry import judge_history
from floodmark.contracts.run_config import TestConfig


def _judged(h: History) -> dict[str, object]:
    results = judge_history(h.ops, {}, TestConfig(acks="all", topics=1, partitions=1),
                            checkers=["durability", "queue"])
    return {name: (r.valid, [m["op"] for m in r.stats.get("malformed_ops", [])]) for name, r in results.items()}


@settings(max_examples=40, deadline=None)
@given(st.integers(MAX_OFFSET + 1, 2**200), st.sampled_from(["ack", "record", "start", "high_watermark"]))
def test_an_offset_beyond_64_bits_is_a_malformed_op(huge: int, where: str) -> None:
    # Before: INVALID (a lost write at the huge offset, a duplicate, a nonmonotonic send or poll).
    h = History()
    h.send(0, 0, "v0", huge if where == "ack" else 0)
    records = [(0, "v0"), (huge, "v1")] if where == "record" else [(0, "v0")]
    h.poll(1, 0, huge if where == "start" else 0, records,
           high_watermark=huge if where == "high_watermark" else None)
    h.poll(2, 0, 0, [(0, "v0")], f="drain")
    witness = 1 if where == "ack" else 3
    assert _judged(h) == {"durability": ("unknown", [witness]), "queue": ("unknown", [witness])}


def test_the_greatest_offsets_are_offsets() -> None:
    last = MAX_OFFSET - 1  # (the batch's high watermark, one past it, is the greatest)
    h = History()
    h.send(0, 0, "v0", last)
    h.poll(1, 0, last, [(last, "v0")])
    h.poll(2, 0, 0, [(last, "v0")], f="drain")  # (a drain reads from offset 0)
    assert _judged(h) == {"durability": (True, []), "queue": (True, [])}


def test_a_renamed_send_is_malformed_and_its_value_read_is_no_record_from_nowhere() -> None:
    # Before: queue INVALID (1 unexpected), as if no op had written v0.
    h = History()
    invoked = {"topic": "t0", "partition": 0, "value": "v0"}
    h.call(0, "sned", invoked, {**invoked, "offset": 0})
    h.poll(2, 0, 0, [(0, "v0")], f="drain")
    assert _judged(h) == {"durability": ("unknown", [0]), "queue": ("unknown", [0])}
