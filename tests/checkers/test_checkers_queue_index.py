"""The queue history index: sends and reads per partition, paired in one pass."""

from __future__ import annotations

import pytest
from checkers_fixtures import History

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.checkers.queue import QueueChecker
from floodmark.checkers.queue_index import build_index, index_for
from floodmark.checkers.synthetic import inject, queue_run
from floodmark.contracts.run_config import TestConfig


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
    assert [(s.value, s.outcome) for s in index.partitions[("t0", 1)].sends] == [("b", "fail")]
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
    ({"topic": "t0", "partition": 0, "value": "a", "offset": -1},
     "acknowledged send has offset -1, below 0 (no log has such an offset)"),
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


CONFIG = TestConfig(nodes=1, replication_factor=1, min_insync_replicas=1)


def _judged(h: History) -> list[object]:
    return [checker.check(CheckInput(h.ops, config=CONFIG)) for checker in (QueueChecker(), DurabilityChecker())]


@pytest.mark.parametrize("f", ["send", "append"])
def test_an_acknowledgement_naming_another_partition_or_value_is_malformed_not_a_verdict(f: str) -> None:
    """The audit's finding 4: a send to t0/0 acknowledged as t0/1 was judged as acknowledged at
    t0/0, so reading its value at t0/1 was "unexpected" (INVALID), though where it went cannot
    be told. Now it is listed as malformed and kept, unknown, in both partitions."""
    h = History()
    h.call(0, f, {"topic": "t0", "partition": 0, "value": "a"}, {"topic": "t0", "partition": 1, "value": "a", "offset": 0})
    h.poll(1, 1, 0, [(0, "a")])
    h.call(2, f, {"topic": "t0", "partition": 0, "value": "b"}, {"topic": "t0", "partition": 0, "value": "c", "offset": 1})
    index = build_index(h.ops)
    assert index.malformed == [
        (1, "acknowledged send names partition t0/1, but the send was to t0/0"),
        (5, "acknowledged send names value 'c', but the send was of 'b'")]
    assert [(s.value, s.outcome, s.offset) for s in index.partitions[("t0", 0)].sends] == \
        [("a", "info", None), ("c", "info", None), ("b", "info", None)]  # (c: what the acknowledgement names)
    assert [(s.value, s.outcome) for s in index.partitions[("t0", 1)].sends] == [("a", "info")]
    for result in _judged(h):
        assert result.valid == "unknown" and result.anomalies == [], result
        assert result.stats["malformed_ops"][0]["problem"].startswith("acknowledged send names partition t0/1")


def test_a_poll_batch_from_elsewhere_than_the_poll_fetched_is_malformed_not_a_verdict() -> None:
    """A batch said to start at offset 2 of a poll that fetched from 0, after records 0 and 1
    were acknowledged: judged by the batch, nothing was skipped (VALID); by the invocation,
    two records were (INVALID). Neither can be told: the batch's records are kept as read,
    but in no consumer's order, and the op is malformed."""
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", 1)
    h.send(0, 0, "c", 2)
    fetch = [{"topic": "t0", "partition": 0, "offset": 0}]
    h.call(1, "poll", fetch, [{"topic": "t0", "partition": 0, "offset": 2, "records": [[2, "c"]], "high_watermark": 3}])
    h.call(2, "poll", fetch, [{"topic": "t0", "partition": 1, "offset": 0, "records": [], "high_watermark": 0}])
    h.call(3, "poll", [{"topic": "t0", "partition": 0, "offset": -2}],
           [{"topic": "t0", "partition": 0, "offset": -2, "records": [[0, "a"], [1, "b"], [2, "c"]]}])
    h.poll(4, 0, 0, [(0, "a"), (1, "b"), (2, "c")], f="drain")
    index = build_index(h.ops)
    assert index.malformed == [
        (7, "poll's batch of t0/0 starts at offset 2, but the poll fetched it from 0"),
        (9, "poll returned a batch of t0/1, a partition it did not fetch (t0/0)"),
        (11, "poll's batch of t0/0 starts at offset -2, below 0 (no log has such an offset)")]
    assert len(index.partitions[("t0", 0)].reads) == 3
    assert index.consumer_ops[1] == [("unplaced", 7)]  # in no order: where it stood is unknown
    for result in _judged(h):
        assert result.valid == "unknown" and result.anomalies == [], result


def test_a_batch_whose_high_watermark_is_no_offset_is_malformed_not_a_verdict() -> None:
    """A poll's or drain's batch stating a high watermark below 0 (or not an integer) was
    taken as it stood and judged VALID, though no log has such a high watermark: the op is
    now malformed and the verdict unknown, as for a record or a start below 0. One that
    states none (a foreign history's) is read as before."""
    h = History()
    h.send(0, 0, "a", 0)
    h.poll(1, 0, 0, [(0, "a")], high_watermark=-1)
    h.poll(1, 0, 1, [], high_watermark=True)
    h.call(1, "poll", [{"topic": "t0", "partition": 0, "offset": 0}],
           [{"topic": "t0", "partition": 0, "offset": 0, "records": [[0, "a"]], "high_watermark": None}])
    h.poll(2, 0, 0, [(0, "a")], high_watermark=-7, f="drain")
    index = build_index(h.ops)
    assert index.malformed == [
        (3, "poll's batch of t0/0 has high watermark -1, below 0 (no log has such an offset)"),
        (5, "poll's batch of t0/0 has high watermark True, not an integer"),
        (9, "drain's batch of t0/0 has high watermark -7, below 0 (no log has such an offset)")]
    assert index.consumer_ops[1][0] == ("unplaced", 3)
    assert [read.op for kind, read in index.consumer_ops[1] if kind == "read"] == [7]  # (the batch stating none)
    for result in _judged(h):
        assert result.valid == "unknown" and result.anomalies == [], result


def test_a_record_or_a_read_at_a_negative_offset_is_malformed() -> None:
    h = History()
    h.send(0, 0, "a", 0)
    h.poll(1, 0, 0, [(-1, "z"), (0, "a")])
    h.call(2, "read", {"topic": "t0", "partition": 0, "offset": -1}, {"topic": "t0", "partition": 0, "offset": -1,
                                                                      "value": None})
    h.call(2, "read", {"topic": "t0", "partition": 0, "offset": 0}, {"topic": "t0", "partition": 1, "offset": 0,
                                                                     "value": "a"})
    h.poll(4, 0, 0, [(0, "a")], f="drain")
    assert build_index(h.ops).malformed == [
        (3, "poll op's record [-1, 'z'] has offset -1, below 0 (no log has such an offset)"),
        (5, "read of offset -1, below 0 (no log has such an offset)"),
        (7, "read's completion names t0/1 at offset 0, but the read was of t0/0 at offset 0")]
    for result in _judged(h):
        assert result.valid == "unknown" and result.anomalies == [], result


def test_a_failed_op_whose_completion_says_it_took_effect_is_malformed_not_a_finding() -> None:
    """A hand edit of ``ok`` to ``fail`` left the acknowledgement's offset or the records read
    in the completion: the send read back was called G1a (read of a failed write), and the
    consumer's next poll a poll-skip, both INVALID. Failed and done at once is no history the
    harness writes: unknown, naming the op. A failed op shaped as the harness writes it stays
    failed (and its value read back is still G1a)."""
    config = TestConfig()
    sent = History()
    sent.call(0, "send", {"topic": "t0", "partition": 0, "value": "a"},
              {"topic": "t0", "partition": 0, "value": "a", "offset": 0}, "fail")
    sent.poll(1, 0, 0, [(0, "a")])
    read = History()
    read.send(0, 0, "a", 0)
    read.send(0, 0, "b", 1)
    read.call(1, "poll", [{"topic": "t0", "partition": 0, "offset": 0}],
              [{"topic": "t0", "partition": 0, "offset": 0, "records": [[0, "a"]], "high_watermark": 1}], "fail")
    read.poll(1, 0, 1, [(1, "b")])
    for h in (sent, read):
        for checker in (QueueChecker(), DurabilityChecker()):
            result = checker.check(CheckInput(h.ops, config=config))
            assert result.valid == "unknown", (checker.name, result)
            assert "failed, yet its completion holds" in str(result.stats), result.stats
    failed = History()
    failed.send(0, 0, "a", None, outcome="fail")
    failed.poll(1, 0, 0, [(0, "a")])
    g1a = QueueChecker().check(CheckInput(failed.ops, config=config))
    assert g1a.valid is False and [a.type for a in g1a.anomalies] == ["G1a"]
