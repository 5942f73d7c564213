"""The queue history index: sends and reads per partition, paired in one pass."""

from __future__ import annotations

import pytest
from checkers_fixtures import History

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.checkers.queue import QueueChecker
from floodmark.checkers.queue_index import build_index, index_for
from floodmark.checkers.synthetic import inject, queue_run
from floodmark.run_config import TestConfig


def test_sends_reads_and_consumers_are_indexed() -> None:
    h = History()
    h.send(0, 0, "a", 0)
    h.send(1, 1, "b", None, outcome="fail")
    h.invoke(2, "send", {"topic": "t0", "partition": 0, "value": "c"})  # never completes
    h.poll(3, 0, 0, [(0, "a")])
    h.call(3, "assign", [{"topic": "t0", "partition": 1, "offset": 0}])
    h.poll(4, 1, 0, [], f="drain")
    index = build_index(h.ops)
    part0 = index.partitions[("t0", 0)]
    assert index.partitions[("t0", 1)].sends[0].outcome == "fail"
    assert [(s.value, s.outcome, s.offset) for s in part0.sends] == [("a", "ok", 0), ("c", "info", None)]
    assert [s.value for s in index.failed_sends.values()] == ["b"]
    assert part0.reads[0].records == [[0, "a"]] and part0.reads[0].high_watermark == 1
    assert [kind for kind, _ in index.consumer_ops[3]] == ["read", "assign"]
    assert index.drained == {("t0", 1)}
    assert index_for(h.ops) is index_for(h.ops)


def test_observations_gather_conflicts_duplicates_and_reach() -> None:
    h = History()
    h.send(0, 0, "a", 0)
    h.poll(1, 0, 0, [(0, "a"), (1, "b"), (2, "a")])
    h.poll(2, 0, 1, [(1, "x")])
    seen = build_index(h.ops).partitions[("t0", 0)].observations()
    assert seen.value_at == {0: "a", 1: "b", 2: "a"}
    assert seen.conflicts == {1: {"b": 3, "x": 5}}
    assert seen.offsets("a") == {0, 2} and seen.offsets("b") == {1} and "a" in seen.duplicate_witness
    assert seen.highest_read == 2 and seen.read_values == {"a", "b", "x"}


def test_log_lin_reads_are_one_record_reads() -> None:
    h = History()
    h.call(0, "append", {"topic": "t0", "partition": 0, "value": "a"},
           {"topic": "t0", "partition": 0, "value": "a", "offset": 0})
    h.call(1, "read", {"topic": "t0", "partition": 0, "offset": 0}, {"topic": "t0", "partition": 0, "offset": 0, "value": "a"})
    h.call(1, "read", {"topic": "t0", "partition": 0, "offset": 1}, {"topic": "t0", "partition": 0, "offset": 1, "value": None})
    part = build_index(h.ops).partitions[("t0", 0)]
    assert part.sends[0].offset == 0
    assert [r.records for r in part.reads] == [[(0, "a")], []]


def test_records_read_again_teach_nothing_new_but_other_values_do() -> None:
    h = History()
    h.send(0, 0, "a", 0)
    h.poll(1, 0, 0, [(0, "a"), (1, "b")])
    h.poll(2, 0, 0, [(0, "".join(["a"])), (1, "x"), (1, "x"), (2, "b")])  # equal, not identical; then news
    h.poll(3, 0, 0, [(1, "x"), (2, "b")])
    seen = build_index(h.ops).partitions[("t0", 0)].observations()
    assert seen.witness_at == {0: 1, 1: 3, 2: 5}
    assert seen.conflicts == {1: {"b": 3, "x": 5}}
    assert seen.offsets("a") == {0} and seen.offsets("b") == {1, 2} and seen.offsets("never") == set()
    assert seen.duplicate_witness == {"b": 5}
    assert seen.highest_read == 2


def test_first_values_equal_the_observations_value_at() -> None:
    # The hw checker's shortcut must see exactly what the full observations see, on correct
    # runs and on runs with conflicting values, lost and duplicated records.
    for seed, anomaly in enumerate((None, "inconsistent-offsets", "lost-write", "duplicate", "poll-skip")):
        run = queue_run(seed, ops=600, leader_change_rate=0.05)
        if anomaly is not None:
            run = inject(run, anomaly, seed)
        for part in build_index(run.history).partitions.values():
            shortcut = part.first_values()
            assert part._observed is None  # computed without the full observations
            assert shortcut == part.observations().value_at
            assert part.first_values() is part.observations().value_at  # cached ones reused


@pytest.mark.parametrize(("acknowledged", "problem"), [
    (None, "acknowledged send's completion holds None, not a map with the offset"),
    ({"topic": "t0", "partition": 0, "value": "a", "offset": "0"}, "acknowledged send has offset '0', not an integer"),
    ({"topic": "t0", "partition": 0, "value": "a"}, "acknowledged send has offset None, not an integer"),
])
def test_an_unreadable_acknowledgement_is_malformed_and_its_send_may_have_happened(acknowledged: object,
                                                                                   problem: str) -> None:
    # The audit's F06: the send was dropped, so a poll reading its value found an "unexpected"
    # record and the run was judged invalid about data the checker could not read.
    h = History()
    h.invoke(0, "send", {"topic": "t0", "partition": 0, "value": "a"})
    h.ok(0, "send", acknowledged)
    h.poll(1, 0, 0, [(0, "a")])
    h.invoke(2, "append", {"topic": "t0", "partition": 0, "value": "b"})  # log-lin's send: the other path
    h.ok(2, "append", acknowledged)
    index = build_index(h.ops)
    assert index.malformed == [(1, problem), (5, problem)]
    assert [(s.value, s.outcome, s.offset) for s in index.partitions[("t0", 0)].sends] == \
        [("a", "info", None), ("b", "info", None)]
    config = TestConfig(nodes=1, replication_factor=1, min_insync_replicas=1)
    for checker in (QueueChecker(), DurabilityChecker()):
        result = checker.check(CheckInput(h.ops, config=config))
        assert result.valid == "unknown" and result.anomalies == [], (checker, result)
