"""Durability: acknowledged records stay at their offsets through the final drain."""

from __future__ import annotations

from checkers_fixtures import History, elected, events, follows

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.contracts.run_config import TestConfig

ACKS_ALL = TestConfig(acks="all", min_insync_replicas=2, variant="default")


def check(h: History, config: TestConfig | None = None, node_events: dict | None = None):  # type: ignore[no-untyped-def]
    return DurabilityChecker().check(CheckInput(h.ops, node_events or {}, ACKS_ALL if config is None else config))


def base() -> History:
    h = History()
    h.send(0, 0, "a", 0)
    h.send(1, 0, "b", 1)
    return h


def test_everything_acknowledged_survives() -> None:
    h = base()
    h.send(2, 0, "maybe", None, outcome="info")  # indeterminate: may vanish
    h.send(3, 0, "no", None, outcome="fail")
    h.poll(4, 0, 0, [(0, "a")])
    h.poll(5, 0, 0, [(0, "a"), (1, "b")], f="drain")
    result = check(h)
    assert result.valid is True, result.anomalies
    assert result.stats["judged"] == 2
    assert result.stats["indeterminate_absent"] == 1


def test_missing_from_drain_is_a_lost_write() -> None:
    h = base()
    h.poll(5, 0, 0, [(0, "a")], f="drain")
    result = check(h)
    assert result.valid is False
    [lost] = result.anomalies
    assert (lost.type, lost.offsets, lost.details["how"]) == ("lost-write", (1,), "missing")
    assert "b" in lost.explanation and 2 in lost.ops and 3 in lost.ops
    assert "permitted_by" not in lost.details
    assert result.stats["violations"] == 1 and result.stats["permitted"] == 0


def test_moved_value_is_a_lost_write() -> None:
    h = base()
    h.poll(5, 0, 0, [(0, "a"), (1, "x"), (2, "b")], f="drain")
    result = check(h)
    kinds = {(a.type, a.details.get("how")) for a in result.anomalies}
    assert ("lost-write", "moved") in kinds
    assert ("inconsistent-offsets", None) in kinds  # the ack says b at 1, the drain says x


def test_read_contradicting_an_ack_is_inconsistent() -> None:
    h = base()
    h.poll(4, 0, 1, [(1, "zzz")])
    h.poll(5, 0, 0, [(0, "a"), (1, "b")], f="drain")
    result = check(h)
    [anomaly] = result.anomalies
    assert anomaly.type == "inconsistent-offsets" and anomaly.offsets == (1,)


def test_losses_permitted_by_configuration_are_marked_not_hidden() -> None:
    h = base()
    h.poll(5, 0, 0, [(0, "a")], f="drain")
    for config, reason in [(TestConfig(acks=1), "acks=1"), (TestConfig(acks="all", min_insync_replicas=1), "min_insync"),
                           (TestConfig(variant="unclean-election", unclean_leader_election=True), "unclean")]:
        result = check(h, config)
        assert result.valid is False
        assert reason in result.anomalies[0].details["permitted_by"]
        assert result.stats["permitted"] == 1 and result.stats["violations"] == 0

def test_a_recovery_after_every_replica_lost_power_permits_losses_in_its_partition_only() -> None:
    h = base()
    h.send(2, 1, "c", 0)
    h.power_loss()
    h.poll(5, 0, 0, [(0, "a")], f="drain")  # b lost in t0/0
    h.poll(6, 1, 0, [], f="drain")  # c lost in t0/1
    recovered = {"n1": events("n1", follows(0), elected(0, leader=1, epoch=2, unclean=True, recovery=True))}
    by_partition = {a.partition: a for a in check(h, ACKS_ALL, recovered).anomalies}
    assert "lost unsynced writes" in by_partition[0].details["permitted_by"]
    assert "permitted_by" not in by_partition[1].details  # no recovery there: a violation


def test_a_recovery_permits_nothing_where_no_power_loss_took_writes() -> None:
    recovered = {"n1": events("n1", follows(0), elected(0, leader=1, epoch=2, unclean=True, recovery=True))}

    def judged(*lost_bytes: int):  # type: ignore[no-untyped-def]
        h = base()
        for lost in lost_bytes:
            h.power_loss(lost_bytes=lost)
        h.poll(5, 0, 0, [(0, "a")], f="drain")
        return check(h, ACKS_ALL, recovered).anomalies[0].details
    assert "permitted_by" not in judged()  # SIGKILL loses nothing
    assert "permitted_by" not in judged(0)
    assert "permitted_by" in judged(0, 10)


def test_an_unclean_election_the_configuration_forbids_permits_nothing() -> None:
    h = base()
    h.power_loss()
    h.poll(5, 0, 0, [(0, "a")], f="drain")
    unclean = {"n1": events("n1", elected(0, leader=1, epoch=2, unclean=True, recovery=False))}
    assert "permitted_by" not in check(h, ACKS_ALL, unclean).anomalies[0].details


def test_acks_below_all_do_not_excuse_losing_what_a_consumer_read() -> None:
    h = base()
    h.poll(4, 0, 0, [(0, "a"), (1, "b")])  # a consumer read b: committed
    h.poll(5, 0, 0, [(0, "a")], f="drain")
    result = check(h, TestConfig(acks=1))
    assert result.valid is False and result.stats["violations"] == 1
    unread = base()
    unread.poll(5, 0, 0, [(0, "a")], f="drain")  # b was only acknowledged by its leader
    assert check(unread, TestConfig(acks=1)).stats["permitted"] == 1


def test_a_conflict_between_two_values_consumers_read_is_never_excused_by_acks() -> None:
    h = base()
    h.poll(4, 0, 1, [(1, "b")])
    h.poll(5, 0, 0, [(0, "a"), (1, "zzz")], f="drain")
    read_twice = [a for a in check(h, TestConfig(acks=1)).anomalies if a.type == "inconsistent-offsets"]
    assert read_twice and "permitted_by" not in read_twice[0].details
    acked_only = base()
    acked_only.poll(5, 0, 0, [(0, "a"), (1, "zzz")], f="drain")
    acked = [a for a in check(acked_only, TestConfig(acks=1)).anomalies if a.type == "inconsistent-offsets"]
    assert acked and acked[0].details["permitted_by"].startswith("acks=1")


def test_an_acknowledged_send_whose_offset_is_not_an_integer_makes_the_verdict_unknown() -> None:
    for offset in (None, True, "3"):
        h = base()
        h.send(2, 0, "c", offset)  # type: ignore[arg-type]
        h.poll(5, 0, 0, [(0, "a"), (1, "b")], f="drain")
        result = check(h)
        assert result.valid == "unknown" and result.stats["malformed_ops"], offset


def test_a_history_without_client_ops_tested_nothing() -> None:
    h = History()
    h.power_loss()
    result = check(h)
    assert result.valid == "unknown" and "no client op" in result.stats["unjudged_because"]


def test_without_a_drain_losses_cannot_be_judged() -> None:
    h = base()
    result = check(h)
    assert result.valid == "unknown"
    assert result.stats["unjudged"] == 2


def test_a_later_drain_lacking_what_an_earlier_one_held_is_a_loss() -> None:
    """Drains are taken in history order, not the first one only: the last read of the
    partition no longer holding an acknowledged record lost it."""
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", 1)
    h.poll(1, 0, 0, [(0, "a"), (1, "b")], f="drain")
    h.poll(2, 0, 0, [(0, "a")], high_watermark=1, f="drain")
    result = check(h)
    assert result.valid is False
    assert [(a.type, a.offsets, a.details["how"]) for a in result.anomalies] == [("lost-write", (1,), "missing")]
    assert "the final drain does not contain it" in result.anomalies[0].explanation


def test_a_record_a_consumer_read_then_missing_from_the_drain_is_lost_even_unacknowledged() -> None:
    """Consumers read only committed records: one a poll returned, whose send timed out,
    must still be in the drain begun after the poll, and acks below all do not excuse it."""
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", None, outcome="info")
    h.poll(1, 0, 0, [(0, "a"), (1, "b")])
    h.poll(2, 0, 0, [(0, "a")], high_watermark=1, f="drain")
    for config in (TestConfig(acks="all"), TestConfig(acks="1")):
        result = check(h, config)
        assert result.valid is False
        [lost] = result.anomalies
        assert (lost.type, lost.offsets, lost.details["how"], lost.details["value"]) == (
            "lost-write", (1,), "read-then-missing", "b")
        assert "permitted_by" not in lost.details
        assert lost.ops == (5, 7)
    assert check(h, TestConfig(min_insync_replicas=1)).anomalies[0].details["permitted_by"].startswith("min_insync")


def test_values_are_compared_exactly_or_not_at_all() -> None:
    """Python takes true for 1: a history with boolean, float or null values is not judged
    (unknown, naming the op), never found valid by a loose comparison."""
    for bad in (True, 1.0, None, [1]):
        h = History()
        h.send(0, 0, 1, 0)  # type: ignore[arg-type]
        h.poll(1, 0, 0, [(0, bad)], f="drain")  # type: ignore[list-item]
        result = check(h)
        assert result.valid == "unknown", bad
        assert "is not a string or an integer" in result.stats["malformed_ops"][0]["problem"]
    h = History()
    h.send(0, 0, 1, 0)  # type: ignore[arg-type]
    h.poll(1, 0, 0, [(0, 1)], f="drain")  # type: ignore[list-item]
    assert check(h).valid is True


# The fourth hunt (2026-11-28): batches at odds with their op, and losses the run permits.

def _batch(start: int, records: list[tuple[int, str]], partition: int = 0) -> dict[str, object]:
    return {"topic": "t0", "partition": partition, "offset": start, "records": [list(r) for r in records],
            "high_watermark": start + len(records)}


def test_a_drain_batch_at_odds_with_the_drain_is_no_drain() -> None:
    """A batch that starts elsewhere than its drain fetched, or of a partition it did not
    fetch, or a second batch of one partition, is malformed: the verdict is unknown, never
    a loss judged against a drain nobody can place (before: INVALID, lost-write)."""
    fetched = [{"topic": "t0", "partition": 0, "offset": 0}]
    for batches in ([_batch(1, [(1, "b")])],  # starts at 1, fetched from 0
                    [_batch(0, [(0, "a"), (1, "b")]), _batch(0, [(0, "c")], partition=1)],  # t0/1 not fetched
                    [_batch(0, [(0, "a")]), _batch(0, [(1, "b")])]):  # two batches of t0/0
        h = base()
        h.send(2, 1, "c", 0)
        h.call(3, "drain", fetched, batches)
        result = check(h)
        assert result.valid == "unknown", (batches, result.anomalies)
        assert not [a for a in result.anomalies if a.type == "lost-write"]
        assert result.stats["malformed_ops"]


def test_a_record_an_earlier_drain_held_was_committed_so_acks_do_not_excuse_its_loss() -> None:
    """A drain is a consumer: what it read was below the high watermark (before: the loss of
    a record only a drain had read was permitted by acks=1)."""
    h = base()
    h.poll(4, 0, 0, [(0, "a"), (1, "b")], f="drain")
    h.poll(5, 0, 0, [(0, "a")], f="drain")
    result = check(h, TestConfig(acks=1))
    assert result.valid is False and result.stats["violations"] == 1 and result.stats["permitted"] == 0
    assert "permitted_by" not in result.anomalies[0].details


def test_a_permitted_loss_at_an_offset_hides_no_violation_there() -> None:
    """b, acknowledged at 0 by its leader alone, may be lost under acks=1; c, which a
    consumer read at 0, may not (before: c's loss was left out as 'already reported')."""
    h = History()
    h.send(3, 0, "c", None, outcome="info")
    h.send(0, 0, "b", 0)
    h.poll(1, 0, 0, [(0, "c")])
    h.poll(2, 0, 0, [], f="drain")
    result = check(h, TestConfig(acks=1))
    read_then_missing = [a for a in result.anomalies if a.details.get("how") == "read-then-missing"]
    assert [(a.details["value"], "permitted_by" in a.details) for a in read_then_missing] == [("c", False)]
    assert result.valid is False and result.stats["violations"] == 1
