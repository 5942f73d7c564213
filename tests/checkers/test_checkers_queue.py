"""Jepsen's Kafka anomalies over the client history."""

from __future__ import annotations

from checkers_fixtures import History

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.checkers.queue import QueueChecker, duplicates_permitted_by
from floodmark.contracts.run_config import TestConfig


def check(h: History, config: TestConfig | None = None):  # type: ignore[no-untyped-def]
    return QueueChecker().check(CheckInput(h.ops, {}, config or TestConfig(acks="all")))


def types(h: History, config: TestConfig | None = None) -> dict[str, int]:
    return check(h, config).stats["anomalies"]


def sent(n: int = 4) -> History:
    h = History()
    for i in range(n):
        h.send(0, 0, f"v{i}", i)
    return h


def test_clean_history_is_valid() -> None:
    h = sent()
    h.send(1, 0, "lost-maybe", None, outcome="info")
    h.poll(2, 0, 0, [(0, "v0"), (1, "v1")])
    h.poll(2, 0, 2, [(2, "v2")])
    h.call(2, "assign", [{"topic": "t0", "partition": 0, "offset": 0}])
    h.poll(2, 0, 0, [(0, "v0")])  # re-reading after an assign is not nonmonotonic
    h.poll(3, 0, 0, [(o, f"v{o}") for o in range(4)], f="drain")
    result = check(h)
    assert result.valid is True, result.anomalies
    assert result.stats["sends"] == {"ok": 4, "fail": 0, "info": 1}


def test_lost_write_below_highest_read() -> None:
    h = sent()
    h.poll(3, 0, 0, [(0, "v0"), (2, "v2"), (3, "v3")], f="drain")
    result = check(h)
    lost = [a for a in result.anomalies if a.type == "lost-write"]
    assert [a.offsets for a in lost] == [(1,)]
    assert "poll-skip" in result.stats["anomalies"]  # the drain also jumped over offset 1


def test_a_record_read_then_missing_from_a_later_drain_outside_its_span_is_lost() -> None:
    """A consumer read v0 at offset 0; the drain, begun after that read and reading from offset
    0, starts at offset 1. Jepsen's lost write is a value nobody read, and v0 was read, so
    Jepsen reports nothing; but a consumer reads only committed records and the log no
    longer holds it: a lost write (:mod:`floodmark.checkers.drain_edges`), never permitted by
    acks (it was committed), and named by the read of it and the drain."""
    h = sent(2)
    h.poll(2, 0, 0, [(0, "v0"), (1, "v1")])
    h.poll(3, 0, 0, [(1, "v1")], f="drain")
    for config in (TestConfig(acks="all"), TestConfig(acks=1)):
        result = check(h, config)
        (lost,) = result.anomalies
        assert (lost.type, lost.offsets, lost.ops, lost.details["how"]) == ("lost-write", (0,), (5, 7),
                                                                             "read-then-missing")
        assert "starts past it, at offset 1" in lost.explanation and "permitted_by" not in lost.details
    # a drain that ends before a record read earlier lost it too; one begun before the read ended may not
    tail = sent(2)
    tail.poll(2, 0, 0, [(0, "v0"), (1, "v1")])
    tail.poll(3, 0, 0, [(0, "v0")], f="drain")
    assert [(a.type, a.offsets, a.details.get("how")) for a in check(tail).anomalies] == [
        ("lost-write", (1,), "read-then-missing")]
    during = sent(2)
    during.invoke(3, "drain", [{"topic": "t0", "partition": 0, "offset": 0}])
    during.poll(2, 0, 0, [(0, "v0"), (1, "v1")])
    during.add("ok", 3, "drain", [{"topic": "t0", "partition": 0, "offset": 0, "records": [[1, "v1"]],
                                   "high_watermark": 2}])
    assert check(during).valid is True


def test_a_record_read_then_missing_inside_a_drain_s_span_is_its_poll_skip_only() -> None:
    h = sent(3)
    h.poll(2, 0, 0, [(0, "v0"), (1, "v1"), (2, "v2")])
    h.poll(3, 0, 0, [(0, "v0"), (2, "v2")], f="drain")
    assert types(h) == {"poll-skip": 1}


def test_unseen_above_highest_read() -> None:
    h = sent()
    h.poll(3, 0, 0, [(0, "v0"), (1, "v1"), (2, "v2")], f="drain")
    assert types(h) == {"unseen": 1}


def test_unseen_in_a_partition_no_drain_read_is_unknown_not_invalid() -> None:
    # The final drain could not read partition 0 (offline): the sends above the highest poll
    # may well be there. Nobody looked, so the verdict is unknown; a loss below the highest
    # read stays a lost write.
    h = sent()
    h.poll(3, 0, 0, [(0, "v0"), (1, "v1")])
    result = check(h)
    assert result.valid == "unknown" and result.anomalies == []
    assert result.stats["unseen_undrained"] == 2 and "drain" in result.stats["unjudged_because"]
    read_past = sent()
    read_past.poll(3, 0, 0, [(0, "v0"), (1, "v1")])
    read_past.poll(3, 0, 3, [(3, "v3")])
    assert types(read_past)["lost-write"] == 1


def test_duplicate_unless_configuration_allows_it() -> None:
    h = sent(2)
    h.poll(3, 0, 0, [(0, "v0"), (1, "v1"), (2, "v1")], f="drain")
    assert types(h) == {"duplicate": 1}
    allowed = TestConfig(acks="all", producer_retries_without_idempotence=True)
    assert duplicates_permitted_by(allowed) and duplicates_permitted_by(None) is None
    result = check(h, allowed)
    assert result.valid is True and result.stats["duplicates_allowed"] == 1


def test_inconsistent_offsets() -> None:
    h = sent(2)
    h.send(4, 0, "other", None, outcome="info")
    h.poll(2, 0, 0, [(0, "v0"), (1, "other")])
    h.poll(3, 0, 0, [(0, "v0"), (1, "v1")], f="drain")
    result = check(h)
    assert result.stats["anomalies"] == {"inconsistent-offsets": 1}
    assert result.anomalies[0].offsets == (1,)


def test_read_of_a_failed_send_is_g1a() -> None:
    h = sent(1)
    h.send(1, 0, "aborted", None, outcome="fail")
    h.poll(3, 0, 0, [(0, "v0"), (1, "aborted")], f="drain")
    result = check(h)
    assert result.stats["anomalies"] == {"G1a": 1}
    assert "definitely failed" in result.anomalies[0].explanation


def test_poll_skip_between_polls_of_one_process() -> None:
    h = sent()
    h.poll(2, 0, 0, [(0, "v0")])
    h.poll(2, 0, 2, [(2, "v2")])
    h.poll(3, 0, 0, [(o, f"v{o}") for o in range(4)], f="drain")
    result = check(h)
    assert result.stats["anomalies"] == {"poll-skip": 1}
    assert result.anomalies[0].details["skipped_offsets"] == [1]


def test_a_poll_the_checker_cannot_place_breaks_its_consumer_order_and_is_no_skip() -> None:
    # Process 2's middle poll returned what the index cannot read (a completion that is no
    # list of batches) or read where it cannot say (a batch from another position than its
    # fetch): what it read is not in the consumer's order, so its next poll's jump over
    # offset 1 is no skip: the verdict is unknown (malformed), never a poll-skip it made up.
    for completion in ("garbage", [{"topic": "t0", "partition": 0, "offset": 5, "records": [[1, "v1"]]}],
                       [{"topic": "t0", "partition": -1, "offset": 1, "records": [[1, "v1"]]}]):
        h = sent()
        h.poll(2, 0, 0, [(0, "v0")])
        h.call(2, "poll", [{"topic": "t0", "partition": 0, "offset": 1}], completion)
        h.poll(2, 0, 2, [(2, "v2")])
        h.poll(3, 0, 0, [(o, f"v{o}") for o in range(4)], f="drain")
        result = check(h)
        assert result.valid == "unknown" and not result.anomalies, (completion, result.anomalies)
        assert result.stats["malformed_ops"]


def test_a_poll_of_unknown_outcome_leaves_where_its_consumer_stood_unknown() -> None:
    # A poll that ended info (or never completed) may have read, and moved its consumer past
    # offset 1: the consumer's next poll from 2 skipped nothing that can be shown. (A run's
    # process issues nothing after an info; a history where one does was edited, or is foreign.)
    for outcome in ("info", None):
        h = sent()
        h.poll(2, 0, 0, [(0, "v0")])
        h.invoke(2, "poll", [{"topic": "t0", "partition": 0, "offset": 1}])
        if outcome is not None:
            h.info(2, "poll", [{"topic": "t0", "partition": 0, "offset": 1, "records": [[1, "v1"]]}])
        h.poll(2, 0, 2, [(2, "v2")])
        h.poll(3, 0, 0, [(o, f"v{o}") for o in range(4)], f="drain")
        result = check(h)
        assert "poll-skip" not in result.stats["anomalies"], (outcome, result.anomalies)


def test_nonmonotonic_poll() -> None:
    h = sent()
    h.poll(2, 0, 0, [(0, "v0"), (1, "v1")])
    h.poll(2, 0, 1, [(1, "v1"), (2, "v2")])
    h.poll(3, 0, 0, [(o, f"v{o}") for o in range(4)], f="drain")
    assert types(h) == {"nonmonotonic-poll": 1}


def test_gaps_no_one_observed_are_not_skips() -> None:
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "c", 5)  # offsets 1..4 were never observed by anyone
    h.poll(2, 0, 0, [(0, "a"), (5, "c")])
    h.poll(3, 0, 0, [(0, "a"), (5, "c")], f="drain")
    assert check(h).valid is True


def test_nonmonotonic_send() -> None:
    h = History()
    h.send(0, 0, "a", 3)
    h.send(0, 0, "b", 2)
    h.poll(3, 0, 0, [(2, "b"), (3, "a")], f="drain")
    assert types(h) == {"nonmonotonic-send": 1}


def test_loss_anomalies_carry_permission() -> None:
    h = sent()
    h.poll(3, 0, 0, [(0, "v0"), (1, "v1"), (2, "v2")], f="drain")
    result = check(h, TestConfig(acks=1))
    assert result.anomalies[0].details["permitted_by"].startswith("acks=1")
    assert result.stats["permitted"] == 1 and result.stats["violations"] == 0


def test_malformed_op_is_reported_not_crashed_on() -> None:
    h = History()
    h.call(0, "send", {"partition": 0, "value": "x"}, {"offset": 1})
    result = check(h)
    assert result.valid == "unknown" and not result.anomalies
    assert result.stats["malformed_ops"][0]["op"] == 0
    assert "unexpected shape" in result.stats["malformed_ops"][0]["problem"]


def test_a_value_only_a_malformed_send_acknowledged_is_no_unexpected_read() -> None:
    # The send's invocation is unreadable (no map, no value, a value no read can return), but
    # its acknowledgement says it wrote "x" at offset 4: reading "x" there is no record from
    # nowhere. The verdict is unknown (malformed), never an "unexpected" the damage made up.
    for invoked in ("garbage", {"topic": "t0", "partition": 0}, {"topic": "t0", "partition": 0, "value": 1.5},
                    {"topic": "t0", "partition": -1, "value": "x"}):
        h = sent()
        h.call(1, "send", invoked, {"topic": "t0", "partition": 0, "value": "x", "offset": 4})
        h.poll(3, 0, 0, [(o, f"v{o}") for o in range(4)] + [(4, "x")], f="drain")
        result = check(h)
        assert result.valid == "unknown" and not result.anomalies, (invoked, result.anomalies)
        assert result.stats["malformed_ops"]


def test_batches_of_every_length_are_checked_record_by_record() -> None:
    # One record (only its place after the last poll counts), two records (compared directly),
    # and three or more (compared as a run of offsets): each out of order in its own way.
    h = sent(6)
    h.poll(2, 0, 0, [(0, "v0")])
    h.poll(2, 0, 1, [(1, "v1"), (3, "v3")])  # skips 2 within the poll
    h.poll(4, 0, 0, [(0, "v0"), (1, "v1"), (2, "v2"), (2, "v2"), (3, "v3")])  # repeats 2
    h.poll(5, 0, 0, [(0, "v0"), (1, "v1"), (2, "v2"), (4, "v4"), (5, "v5")])  # skips 3
    h.poll(6, 0, 0, [(o, f"v{o}") for o in range(6)])  # in order: nothing to report
    h.poll(7, 0, 0, [(o, f"v{o}") for o in range(6)], f="drain")
    result = check(h)
    assert result.stats["anomalies"] == {"nonmonotonic-poll": 1, "poll-skip": 2}
    assert sorted((a.type, a.offsets) for a in result.anomalies) == [
        ("nonmonotonic-poll", (2, 2)), ("poll-skip", (1, 3)), ("poll-skip", (2, 4))]


def test_a_poll_that_starts_past_known_records_skipped_them() -> None:
    h = sent()
    h.poll(2, 0, 0, [(0, "v0")])
    h.call(2, "assign", [{"topic": "t0", "partition": 0, "offset": 1}])
    h.poll(2, 0, 1, [(2, "v2"), (3, "v3")])  # fetched from 1, v1 (acknowledged at 1) skipped
    h.poll(3, 0, 0, [(o, f"v{o}") for o in range(4)], f="drain")
    [skip] = check(h).anomalies
    assert skip.type == "poll-skip" and skip.details["skipped_offsets"] == [1]
    assert "fetched from offset 1" in skip.explanation
    first = sent()
    first.poll(2, 0, 0, [(2, "v2")])  # a consumer's first poll, from 0: v0 and v1 skipped
    first.poll(3, 0, 0, [(o, f"v{o}") for o in range(4)], f="drain")
    assert [a.details["skipped_offsets"] for a in check(first).anomalies] == [[0, 1]]


def test_a_poll_from_where_nothing_is_known_is_no_skip() -> None:
    h = History()
    h.send(0, 0, "v5", 5)
    h.poll(2, 0, 3, [(5, "v5")])  # nothing observed at 3 or 4
    h.poll(3, 0, 0, [(5, "v5")], f="drain")
    assert check(h).valid is True


def test_offsets_going_back_after_a_permitted_loss_are_permitted_too() -> None:
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", 1)
    h.send(0, 0, "c", 1)  # b was lost (acks=1 permits it) and c took its offset
    h.poll(3, 0, 0, [(0, "a"), (1, "c")], f="drain")
    result = check(h, TestConfig(acks=1))
    assert {a.type for a in result.anomalies} >= {"nonmonotonic-send"}
    assert result.stats["violations"] == 0
    assert check(h).stats["violations"] > 0


def test_an_op_no_queue_workload_has_is_not_skipped_silently() -> None:
    h = sent(2)
    h.call(0, "xsend", {"topic": "t0", "partition": 0, "value": "hidden"}, {"topic": "t0", "partition": 0,
                                                                              "value": "hidden", "offset": 2})
    h.poll(3, 0, 0, [(0, "v0"), (1, "v1")], f="drain")
    result = check(h)
    assert result.valid == "unknown" and "xsend" in result.stats["malformed_ops"][0]["problem"]


def test_a_history_without_client_ops_tested_nothing() -> None:
    h = History()
    h.power_loss()
    assert check(h).valid == "unknown"


def test_a_partition_that_is_not_a_topic_and_a_number_is_malformed_not_a_crash() -> None:
    h = sent(2)
    h.call(0, "send", {"topic": "t0", "partition": "0", "value": "s"}, {"topic": "t0", "partition": "0",
                                                                       "value": "s", "offset": 2})
    h.call(3, "poll", [{"topic": "t0", "partition": True, "offset": 0}],
           [{"topic": "t0", "partition": True, "offset": 0, "records": [], "high_watermark": 0}])
    h.poll(4, 0, 0, [(0, "v0"), (1, "v1")], f="drain")
    result = check(h)
    assert result.valid == "unknown" and len(result.stats["malformed_ops"]) == 2


def test_a_value_sent_again_after_a_permitted_loss_is_permitted_as_the_loss_is() -> None:
    h = History()
    h.send(0, 0, "a0", 0)
    h.send(0, 0, "a2", 2)  # acknowledged at 2 by a leader that lost it (acks=1 permits it) ...
    h.poll(9, 0, 0, [(0, "a0"), (1, "a2")], f="drain")  # ... and written again at 1
    [duplicate] = [a for a in check(h, TestConfig(acks=1)).anomalies if a.type == "duplicate"]
    assert duplicate.details["permitted_by"].startswith("acks=1")
    twice_read = History()
    twice_read.send(0, 0, "a0", 0)
    twice_read.poll(1, 0, 0, [(0, "a0"), (1, "a0")], f="drain")  # consumers saw it twice: committed twice
    [read] = [a for a in check(twice_read, TestConfig(acks=1)).anomalies if a.type == "duplicate"]
    assert "permitted_by" not in read.details


def test_a_value_no_send_wrote_is_unexpected() -> None:
    """Every send is in the history: a record from nowhere (or from another partition) is
    reported, named by the read that returned it."""
    h = sent(2)
    h.send(5, 1, "elsewhere", 0)
    h.poll(3, 0, 0, [(0, "v0"), (1, "v1"), (2, "zzz"), (3, "elsewhere")], f="drain")
    h.poll(3, 1, 0, [(0, "elsewhere")], f="drain")
    result = check(h)
    assert result.valid is False
    unexpected = [a for a in result.anomalies if a.type == "unexpected"]
    assert [(a.partition, a.offsets, a.details["value"]) for a in unexpected] == [(0, (2,), "zzz"), (0, (3,), "elsewhere")]
    assert "no send to t0/0 in the history tried to write" in unexpected[0].explanation


def test_a_value_sent_again_after_a_failed_send_is_no_aborted_read() -> None:
    """Histories may reuse a value: a read of it is G1a only if no other send of the
    partition may have written it."""
    h = History()
    h.send(0, 0, "a", None, outcome="fail")
    h.send(0, 0, "a", 0)
    h.poll(1, 0, 0, [(0, "a")], f="drain")
    assert check(h).valid is True
    h2 = History()
    h2.send(0, 0, "a", None, outcome="fail")
    h2.send(0, 0, "b", 0)
    h2.poll(1, 0, 0, [(0, "b"), (1, "a")], f="drain")
    assert check(h2).stats["anomalies"] == {"G1a": 1}


def test_a_poll_that_returns_records_below_where_it_fetched_went_backwards() -> None:
    h = sent(4)
    h.call(1, "assign", [{"topic": "t0", "partition": 0, "offset": 3}])
    h.poll(1, 0, 3, [(1, "v1"), (2, "v2")])
    h.poll(3, 0, 0, [(0, "v0"), (1, "v1"), (2, "v2"), (3, "v3")], f="drain")
    result = check(h)
    assert result.stats["anomalies"] == {"nonmonotonic-poll": 1}
    assert "fetched from offset 3 of t0/0 but got offset 1 first" in result.anomalies[0].explanation


def test_a_send_acknowledged_after_the_drain_began_is_not_unseen() -> None:
    """A drain that ran before the acknowledgement proves nothing about the record: the
    verdict is unknown, not a wrong unseen (nor a lost write in durability)."""
    h = History()
    h.invoke(0, "send", {"topic": "t0", "partition": 0, "value": "a"})
    h.poll(1, 0, 0, [], f="drain")
    h.add("ok", 0, "send", {"topic": "t0", "partition": 0, "value": "a", "offset": 0})
    result = check(h)
    assert result.valid == "unknown" and not result.anomalies
    durability = DurabilityChecker().check(CheckInput(h.ops))
    assert durability.valid == "unknown" and not durability.anomalies


def test_unexpected_values_of_two_types_at_one_offset_are_both_reported() -> None:
    h = sent(1)
    h.poll(1, 0, 0, [(0, "v0"), (1, "x")])
    h.poll(2, 0, 0, [(0, "v0"), (1, 7)], f="drain")  # type: ignore[list-item]
    result = check(h)
    assert sorted(str(a.details["value"]) for a in result.anomalies if a.type == "unexpected") == ["7", "x"]


def test_records_below_where_a_later_poll_fetched_went_backwards_too() -> None:
    # Not only a consumer's first poll: one following its own earlier poll, whose first record
    # follows that poll's last in the version order, still got records below its fetch position.
    h = sent(4)
    h.poll(1, 0, 0, [(0, "v0")])
    h.poll(1, 0, 3, [(1, "v1"), (2, "v2")])  # fetched from 3, got 1 first
    h.poll(3, 0, 0, [(0, "v0"), (1, "v1"), (2, "v2"), (3, "v3")], f="drain")
    result = check(h)
    assert result.stats["anomalies"] == {"nonmonotonic-poll": 1}
    assert "fetched from offset 3 of t0/0 but got offset 1 first" in result.anomalies[0].explanation


def test_a_poll_batch_at_odds_with_its_fetch_covers_only_its_own_records() -> None:
    """A poll fetched from 1 whose batch says it started at 0: where it started is not
    known, so offset 0, which no read passed over, is unjudged, not a lost write (the fourth
    hunt, 2026-11-28: INVALID before)."""
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", 1)
    h.call(1, "poll", [{"topic": "t0", "partition": 0, "offset": 1}],
           [{"topic": "t0", "partition": 0, "offset": 0, "records": [[1, "b"]], "high_watermark": 2}])
    result = check(h)
    assert result.valid == "unknown" and not [a for a in result.anomalies if a.type == "lost-write"]


def test_a_read_that_completed_before_its_value_was_sent_read_the_future() -> None:
    """History order is real-time order: a poll that completed before any send of the value
    it returned began read the future (Jepsen's cycle search calls it G1c-realtime), even when
    the send then lands at that very offset and everything else agrees."""
    h = sent(1)
    h.poll(1, 0, 0, [(0, "v0"), (1, "early")])
    h.send(0, 0, "early", 1)
    h.poll(2, 0, 0, [(0, "v0"), (1, "early")], f="drain")
    result = check(h)
    assert result.valid is False
    assert result.stats["anomalies"] == {"G1c-realtime": 1}
    [future] = result.anomalies
    assert (future.partition, future.offsets, future.details["value"]) == (0, (1,), "early")
    assert "completed before any send of 'early' there began" in future.explanation


def test_a_read_concurrent_with_the_send_it_read_is_no_future_read() -> None:
    """A send invoked before the poll completed may have been written while the poll ran."""
    h = sent(1)
    h.invoke(0, "send", {"topic": "t0", "partition": 0, "value": "late"})
    h.poll(1, 0, 0, [(0, "v0"), (1, "late")])
    h.add("ok", 0, "send", {"topic": "t0", "partition": 0, "value": "late", "offset": 1})
    h.poll(2, 0, 0, [(0, "v0"), (1, "late")], f="drain")
    assert check(h).valid is True


def test_a_drain_not_from_offset_0_vouches_for_nothing_below_where_it_began() -> None:
    # A drain that states it read t0/0 from offset 2 did not read offsets 0 and 1: taken as a
    # drain of the whole partition, both checkers called the sends acknowledged there lost
    # (invalid). A drain reads from offset 0; one that says otherwise contradicts what a drain
    # is, and is listed as malformed: unknown, with no loss made up below it.
    h = sent(3)
    h.poll(9, 0, 2, [(2, "v2")], f="drain")
    for result in (check(h), DurabilityChecker().check(CheckInput(h.ops, {}, TestConfig(acks="all")))):
        assert result.valid == "unknown" and result.anomalies == [], result.anomalies
        assert "from offset 0" in result.stats["malformed_ops"][0]["problem"]
    # (stated by the position it fetched from alone, the batch naming no start: the same)
    unstated = sent(3)
    unstated.call(9, "drain", [{"topic": "t0", "partition": 0, "offset": 2}],
                  [{"topic": "t0", "partition": 0, "records": [[2, "v2"]], "high_watermark": 3}])
    assert check(unstated).valid == "unknown" and check(unstated).anomalies == []
