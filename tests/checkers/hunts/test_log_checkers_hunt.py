"""The queue and durability checkers against a ground truth, on histories no run wrote.

Each history here is made from a log that really happened (per partition, the values in
offset order): sends acknowledged at their true offsets, consumers polling from wherever
their positions stand (the middle of the log included), values sent twice, sends whose
outcome is unknown, and a drain at the end or none. Nothing in such a history is an anomaly,
so no checker may call it invalid; a record taken out of the drain is a loss, and must be.
"""

from __future__ import annotations

from typing import Any

from checkers_fixtures import History
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.checkers.queue import QueueChecker
from floodmark.contracts.results import CheckerResult
from floodmark.contracts.run_config import TestConfig

CONFIG = TestConfig(topics=1, partitions=2, acks="all")


def judge(h: History) -> tuple[CheckerResult, CheckerResult]:
    run = CheckInput(h.ops, {}, CONFIG)
    return QueueChecker().check(run), DurabilityChecker().check(run)


def test_a_poll_from_the_middle_of_the_log_is_no_lost_write() -> None:
    # "a" was acknowledged at 0; the only consumer fetched from offset 1. Nobody looked at
    # offset 0, and no drain did: the record may well be there (it is). Old: lost-write.
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", 1)
    h.poll(1, 0, 1, [(1, "b")])
    queue, _ = judge(h)
    assert queue.anomalies == [] and queue.valid == "unknown"
    assert queue.stats["unread_uncovered"] == 1 and "passed over" in queue.stats["unjudged_because"]
    drained = History()
    drained.ops = list(h.ops)
    drained.poll(2, 0, 0, [(0, "a"), (1, "b")], f="drain")
    assert judge(drained)[0].valid is True
    lost = History()  # the drain read the log to its end without "a": lost
    lost.ops = list(h.ops)
    lost.poll(2, 0, 0, [(1, "b")], f="drain")
    assert [a.type for a in judge(lost)[0].anomalies if a.offsets == (0,)] == ["lost-write"]


def test_a_skip_over_an_acknowledged_offset_is_still_a_lost_write() -> None:
    h = History()
    for offset, value in enumerate("abc"):
        h.send(0, 0, value, offset)
    h.poll(1, 0, 0, [(0, "a"), (2, "c")])  # one batch passed over offset 1
    assert {a.type for a in judge(h)[0].anomalies} == {"lost-write", "poll-skip"}
    between = History()
    for offset, value in enumerate("abc"):
        between.send(0, 0, value, offset)
    between.poll(1, 0, 0, [(0, "a")])
    between.poll(1, 0, 2, [(2, "c")])  # successive polls of one consumer, no assign between
    assert {a.type for a in judge(between)[0].anomalies} == {"lost-write", "poll-skip"}


def test_one_value_sent_twice_at_two_offsets_is_no_duplicate() -> None:
    # Two sends of "a", each acknowledged at its own offset: each wrote once. Old: duplicate.
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "a", 1)
    h.poll(1, 0, 0, [(0, "a"), (1, "a")], f="drain")
    assert judge(h)[0].valid is True
    thrice = History()  # at more offsets than it was sent: a duplicate
    thrice.ops = list(h.ops[:4])
    thrice.poll(1, 0, 0, [(0, "a"), (1, "a"), (2, "a")], f="drain")
    assert [a.type for a in judge(thrice)[0].anomalies] == ["duplicate"]
    failed = History()  # a send that failed wrote nothing: it does not count
    failed.send(0, 0, "a", 0)
    failed.send(0, 0, "a", None, outcome="fail")
    failed.poll(1, 0, 0, [(0, "a"), (1, "a")], f="drain")
    assert "duplicate" in {a.type for a in judge(failed)[0].anomalies}


# A small ground truth: each step sends a value to a partition (landing, or not, with an
# outcome that says so truthfully) or polls one partition from a position of the consumer.
_STEP = st.one_of(
    st.tuples(st.just("send"), st.integers(0, 1), st.integers(0, 5), st.sampled_from(["ok", "ok", "info", "lost", "fail"])),
    st.tuples(st.just("poll"), st.integers(0, 1), st.integers(0, 6), st.integers(0, 3)),
)


def truthful(steps: list[tuple[Any, ...]], drain: bool, drop: bool) -> tuple[History, bool]:
    """The history of ``steps`` run against a real log (values may repeat), with a final
    drain of each partition; ``drop``: the drain of partition 0 lacks its first acknowledged
    record (returns whether there was one to drop)."""
    h = History()
    logs: dict[int, list[str]] = {0: [], 1: []}
    consumer = 100
    acknowledged: list[int] = []
    for kind, partition, a, b in steps:
        log = logs[partition]
        if kind == "send":
            value = f"v{a}"
            if b in ("ok", "info"):
                log.append(value)
            if b == "ok":
                h.send(0, partition, value, len(log) - 1)
                acknowledged += [len(log) - 1] if partition == 0 else []
            else:  # unknown outcomes that did or did not land, and failures that did not
                h.send(0, partition, value, None, outcome="fail" if b == "fail" else "info")
        else:
            start = min(a, len(log))  # where this consumer's position stands: anywhere
            consumer += 1  # each poll a fresh consumer, its position set by its first fetch
            h.poll(consumer, partition, start, [(o, log[o]) for o in range(start, min(len(log), start + b))],
                   high_watermark=len(log))
    dropped = drop and bool(acknowledged)
    if drain:
        for partition, log in logs.items():
            records = [(o, v) for o, v in enumerate(log) if not (dropped and partition == 0 and o == acknowledged[0])]
            h.poll(consumer + 1 + partition, partition, 0, records, high_watermark=len(log), f="drain")
    return h, dropped


@settings(max_examples=300, deadline=None)
@given(st.lists(_STEP, max_size=14), st.booleans())
def test_no_checker_calls_a_truthful_history_invalid(steps: list[tuple[Any, ...]], drain: bool) -> None:
    h, _ = truthful(steps, drain, drop=False)
    for result in judge(h):
        assert result.valid is not False, [a.explanation for a in result.anomalies]
        assert result.valid is True or not drain or result.stats.get("unjudged", 0) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(_STEP, max_size=14))
def test_an_acknowledged_record_missing_from_the_drain_is_lost(steps: list[tuple[Any, ...]]) -> None:
    h, dropped = truthful(steps, drain=True, drop=True)
    durability = judge(h)[1]  # (the queue checker knows records by value: one sent twice may hide it)
    if dropped:
        assert durability.valid is False and "lost-write" in {a.type for a in durability.anomalies}
