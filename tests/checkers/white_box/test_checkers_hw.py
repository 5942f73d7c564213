"""High watermarks: monotonic per broker and epoch, and committed offsets never un-committed."""

from __future__ import annotations

import dataclasses

from checkers_fixtures import History, events

from floodmark.checkers.api import CheckInput
from floodmark.checkers.white_box.hw import HighWatermarkChecker
from floodmark.contracts.node_events import (
    Appended,
    BecameFollower,
    BecameLeader,
    HwChanged,
    Started,
    Truncated,
)
from floodmark.contracts.run_config import TestConfig

CONFIG = TestConfig(acks="all", min_insync_replicas=2)


def check(node_events: dict, h: History | None = None, config: TestConfig | None = None):  # type: ignore[no-untyped-def]
    # A run of as many brokers as the test gives events of (see event_coverage).
    config = dataclasses.replace(config or CONFIG, nodes=max(1, len(node_events)))
    return HighWatermarkChecker().check(CheckInput((h or History()).ops, node_events, config))


def hw(previous: int, new: int, epoch: int = 1, log_end: int = 10, role: str = "leader") -> HwChanged:
    return HwChanged(topic="t0", partition=0, leader_epoch=epoch, role=role, previous=previous, high_watermark=new,
                     log_end=log_end)


def leader(epoch: int, isr: tuple[int, ...], log_end: int, high_watermark: int) -> BecameLeader:
    return BecameLeader(topic="t0", partition=0, leader_epoch=epoch, isr=isr, log_end=log_end,
                        high_watermark=high_watermark)


def appended(offset: int, values: tuple[str, ...]) -> Appended:
    return Appended(topic="t0", partition=0, offset=offset, epoch=1, values=values, role="follower")


def truncated(epoch: int, from_offset: int, to_offset: int, reason: str) -> Truncated:
    return Truncated(topic="t0", partition=0, leader_epoch=epoch, from_offset=from_offset, to_offset=to_offset,
                     reason=reason)


def test_monotonic_hw_is_valid_and_a_new_leader_may_start_lower() -> None:
    n1 = events("n1", leader(1, (1, 2), 0, 0), hw(0, 5), hw(5, 8))
    # n2 takes over in epoch 2 with a HW (3) below n1's (8): the design allows it
    n2 = events("n2", leader(2, (2,), 8, 3), hw(3, 8, epoch=2))
    h = History()
    h.send(0, 0, "x", 7)
    result = check({"n1": n1, "n2": n2}, h)
    assert result.valid is True, result.anomalies
    assert result.stats["committed_offsets"] == {"t0/0": 8}


def test_decrease_within_an_epoch() -> None:
    n1 = events("n1", hw(0, 5), hw(5, 4))
    [anomaly] = check({"n1": n1}).anomalies
    assert anomaly.type == "hw-decrease" and anomaly.offsets == (5, 4)
    assert anomaly.events == (("n1", 0), ("n1", 1))


def test_restart_starts_afresh() -> None:
    n1 = events("n1", hw(0, 5), Started(), hw(0, 3))
    assert check({"n1": n1}).valid is True


def test_hw_beyond_log_end() -> None:
    n1 = events("n1", hw(0, 11, log_end=10))
    assert check({"n1": n1}).anomalies[0].type == "hw-beyond-log-end"


def test_new_leader_lacking_committed_offsets() -> None:
    n1 = events("n1", leader(1, (1, 2), 0, 0), hw(0, 6))
    n2 = events("n2", leader(2, (2,), 4, 4))
    h = History()
    h.send(0, 0, "x", 5)  # exposes committed offset 6
    [anomaly] = check({"n1": n1, "n2": n2}, h).anomalies
    assert anomaly.type == "uncommitted-offset"
    assert anomaly.offsets == (4, 5)
    assert anomaly.details["committed_offset"] == 6
    # Under acks=1 what consumers read was still committed by the whole ISR: a violation...
    h1 = History()
    h1.poll(1, 0, 0, [(o, f"v{o}") for o in range(6)])
    read = check({"n1": n1, "n2": n2}, h1, TestConfig(acks=1)).anomalies
    assert read[0].type == "uncommitted-offset" and "permitted_by" not in read[0].details
    # ... while an ISR of the leader alone (min.insync.replicas=1) permits it, reported all the same.
    permitted = check({"n1": n1, "n2": n2}, h1, TestConfig(acks=1, min_insync_replicas=1)).anomalies
    assert permitted[0].details["permitted_by"].startswith("min_insync_replicas=1")


def test_offsets_not_exposed_to_clients_are_not_judged() -> None:
    n1 = events("n1", hw(0, 6))
    n2 = events("n2", leader(2, (2,), 4, 4))
    h = History()
    h.poll(1, 0, 0, [(0, "a"), (1, "b")], high_watermark=2)  # clients only ever saw HW 2
    assert check({"n1": n1, "n2": n2}, h).valid is True


def test_truncating_committed_records_but_not_divergent_ones() -> None:
    h = History()
    h.poll(1, 0, 0, [(0, "a"), (1, "b")])
    n1 = events("n1", leader(1, (1, 3), 0, 0), hw(0, 2, log_end=3))  # committed a and b in epoch 1
    divergent = events("n3", appended(0, ("a", "b", "zombie")), truncated(2, 3, 2, "diverging_epoch"))
    assert check({"n1": n1, "n3": divergent}, h).valid is True
    below = events("n3", appended(0, ("a", "b", "c")), truncated(2, 3, 1, "high_watermark"))
    [anomaly] = check({"n1": n1, "n3": below}, h).anomalies
    assert anomaly.type == "committed-truncated" and anomaly.offsets == (1,)
    assert anomaly.details["reason"] == "high_watermark"


def test_a_replica_losing_committed_records_in_crash_recovery_is_not_a_truncation_anomaly() -> None:
    # Durability comes from replication, not fsync: a broker that lost unflushed records in a
    # crash (even below its HW) re-fetches them. Only a leader lacking them (uncommitted-offset)
    # or a client-visible loss (the durability checker) is an anomaly.
    h = History()
    h.poll(1, 0, 0, [(0, "a"), (1, "b")])
    n1 = events("n1", leader(1, (1, 3), 0, 0), hw(0, 2, log_end=3))  # committed a and b in epoch 1
    recovered = events("n3", appended(0, ("a", "b", "c")), Started(), truncated(-1, 3, 1, "recovery"),
                       appended(1, ("b", "c")), truncated(2, 3, 2, "diverging_epoch"))
    assert check({"n1": n1, "n3": recovered}, h).valid is True


def test_a_record_truncated_while_uncommitted_then_committed_by_another_leader_is_not_lost() -> None:
    # n3 drops b (offset 1) on following epoch 2's leader, which lacks it: nothing had
    # committed it (epoch 1's HW stopped at 1). n2 kept its own copy and, leading epoch 3,
    # commits it; clients see b committed, and n3 fetches it back. Nothing committed was lost.
    h = History()
    h.poll(1, 0, 0, [(0, "a"), (1, "b")])
    n1 = events("n1", leader(1, (1, 2, 3), 0, 0), hw(0, 1, log_end=2))
    n3 = events("n3", appended(0, ("a", "b")), truncated(2, 2, 1, "diverging_epoch"))
    n2 = events("n2", leader(3, (2, 3), 2, 1), hw(1, 2, epoch=3, log_end=2))
    result = check({"n1": n1, "n2": n2, "n3": n3}, h)
    assert result.valid is True, result.anomalies
    # Had epoch 1 committed b before n3 truncated for epoch 2, the truncation lost it.
    committed = events("n1", leader(1, (1, 2, 3), 0, 0), hw(0, 2, log_end=2))
    [anomaly] = check({"n1": committed, "n2": n2, "n3": n3}, h).anomalies
    assert anomaly.type == "committed-truncated" and anomaly.offsets == (1,)
    assert anomaly.details["leader_epoch"] == 2


def test_a_broker_that_says_it_lowered_its_hw_below_records_it_held_is_caught() -> None:
    # A follower truncates below its HW (only a flawed variant does) and says so itself.
    said = events("n2", appended(0, ("a", "b", "c")), hw(0, 3, epoch=1, role="follower"),
                  truncated(2, 3, 2, "diverging_epoch"), hw(3, 2, epoch=2, log_end=2, role="follower"))
    [anomaly] = check({"n2": said}).anomalies
    assert anomaly.type == "hw-decrease" and anomaly.offsets == (3, 2) and anomaly.events == (("n2", 3),)
    # A HW checkpointed above what a power loss left of the log is not one: the records were
    # already gone when the truncation came.
    stale = events("n2", Started(), truncated(-1, 5, 3, "recovery"), appended(3, ("d",)),
                   truncated(2, 4, 2, "diverging_epoch"), hw(5, 2, epoch=2, log_end=2, role="follower"))
    assert check({"n2": stale}).valid is True


def test_a_follower_taking_its_new_leaders_lower_hw_after_cutting_only_above_its_own_is_valid() -> None:
    # n3 followed epoch 1 to HW 3 with an uncommitted record at 3; on following epoch 2 it cuts
    # that divergent record (4 -> 3, above its HW) and takes the new leader's lower HW 2, as a
    # Kafka follower does (min of its leader's HW and its log end): nothing committed went.
    cut_above = events("n3", appended(0, ("a", "b", "c", "x")), hw(0, 3, epoch=1, log_end=4, role="follower"),
                       truncated(2, 4, 3, "diverging_epoch"), hw(3, 2, epoch=2, log_end=3, role="follower"))
    assert check({"n3": cut_above}).valid is True
    # A cut long before (below a HW of 1 then, since fetched back past) says nothing of a later one.
    earlier = events("n3", appended(0, ("a", "b", "x")), hw(0, 1, epoch=1, log_end=3, role="follower"),
                     truncated(2, 3, 2, "diverging_epoch"), appended(2, ("c", "d")),
                     hw(1, 4, epoch=2, log_end=4, role="follower"), hw(4, 3, epoch=3, log_end=4, role="follower"))
    assert check({"n3": earlier}).valid is True
    # A restart whose recovery lost unflushed records below the checkpointed HW caps the HW at
    # what it kept: the new process starts lower (the replica's own loss, fetched back).
    recovered = events("n3", Started(), truncated(-1, 5, 2, "recovery"), hw(4, 2, epoch=2, log_end=2, role="follower"))
    assert check({"n3": recovered}).valid is True


def test_hw_and_leader_checks_are_unknown_without_every_brokers_events() -> None:
    from floodmark.checkers.white_box.leader import LeaderChecker

    n1 = events("n1", leader(1, (1, 2), 0, 0), hw(0, 2))
    three = TestConfig(acks="all", min_insync_replicas=2, nodes=3)
    for checker in (HighWatermarkChecker(), LeaderChecker()):
        result = checker.check(CheckInput([], {"n1": n1}, three))
        assert result.valid == "unknown" and "1 of the 3 brokers" in result.stats["unjudged_because"]
        assert checker.check(CheckInput([], {}, None)).valid == "unknown"  # no events, no configuration


def test_a_hw_clients_saw_that_no_event_records_is_unknown_not_valid() -> None:
    # Clients saw offsets 0..5 committed (HW 6), but the events record n1's HW only up to 2:
    # the HW changes in between (which might have gone back) are missing, so nothing proves
    # the HW never decreased. As when every hw_changed event of a run is left out.
    h = History()
    h.poll(1, 0, 0, [(o, f"v{o}") for o in range(6)], high_watermark=6)
    partial = check({"n1": events("n1", leader(1, (1,), 6, 0), hw(0, 2))}, h)
    assert partial.valid == "unknown" and partial.stats["unrecorded_hw"] == {"t0/0": [6, 2]}
    assert "committed up to HW 6, but the node events record its HW only up to 2" in partial.stats["unjudged_because"]
    assert check({"n1": events("n1", leader(1, (1,), 6, 0))}, h).valid == "unknown"
    # Every HW clients saw recorded (by a HW change, or a leadership starting from it): valid.
    assert check({"n1": events("n1", leader(1, (1,), 6, 0), hw(0, 2), hw(2, 6))}, h).valid is True
    assert check({"n1": events("n1", leader(1, (1,), 6, 6))}, h).valid is True
    # What the events do record still proves a violation.
    assert check({"n1": events("n1", leader(1, (1,), 6, 0), hw(0, 2), hw(2, 1))}, h).valid is False


def test_an_event_not_read_whole_leaves_the_verdict_unknown_never_valid() -> None:
    """An event of a kind this version does not know, or with a field its kind does not
    declare, is judged by no checker: a violation written so passed as VALID (the sixth
    hunt, 2026-11-28: a decreasing HW under kind hw_changed_v2, an ISR admission whose
    joined_log_end was renamed). The run is unknown; violations in what was read still count."""
    import dataclasses as dc

    from floodmark.checkers.white_box.invariants import InvariantsChecker
    from floodmark.checkers.white_box.leader import LeaderChecker
    from floodmark.contracts.node_events import NodeEvent, UnknownKind

    clean = events("n1", leader(1, (1,), 0, 0), hw(0, 5))
    unknown_kind = clean + [NodeEvent("n1", 2, 2.0, UnknownKind("hw_changed_v2", {"high_watermark": 4}))]
    renamed = clean[:1] + [dc.replace(clean[1], extra=(("admitted_log_end", 5),))]
    config = dc.replace(CONFIG, nodes=1)
    for node_events, said in ((unknown_kind, "n1 seq 2, of kind 'hw_changed_v2', which this version does not know"),
                              (renamed, "n1 seq 1, hw_changed with 'admitted_log_end', which its kind does not declare")):
        for checker in (HighWatermarkChecker(), LeaderChecker(), InvariantsChecker()):
            result = checker.check(CheckInput(History().ops, {"n1": node_events}, config))
            assert result.valid == "unknown", (type(checker).__name__, result.valid)
        assert said in str(check({"n1": node_events}).stats)
    assert check({"n1": clean}).valid is True
    # A violation in what was read still makes the run invalid.
    decreasing = events("n1", hw(0, 5), hw(5, 4))
    decreasing.append(NodeEvent("n1", 2, 2.0, UnknownKind("hw_changed_v2", {})))
    assert check({"n1": decreasing}).valid is False


def test_a_decrease_stated_in_another_epoch_is_judged_in_the_epoch_the_broker_is_in() -> None:
    # n1 leads epoch 1 and sets its HW to 8; its next hw_changed steps it down to 6 but names
    # epoch 99, which nobody was ever in. Judged per stated epoch, 99 started afresh: VALID.
    started = Started(broker=1)
    n1 = events("n1", started, leader(1, (1,), 10, 0), hw(0, 8), hw(8, 6, epoch=99))
    [anomaly] = check({"n1": n1}).anomalies
    assert anomaly.type == "hw-decrease" and anomaly.offsets == (8, 6)
    assert anomaly.events == (("n1", 2), ("n1", 3))
    # (a follower's too: the epoch its became_follower put it in)
    follower = BecameFollower(topic="t0", partition=0, leader_epoch=1, leader=2, log_end=10)
    n2 = events("n1", started, follower, hw(0, 8, role="follower"), hw(8, 6, epoch=0, role="follower"))
    assert [a.type for a in check({"n1": n2}).anomalies] == ["hw-decrease"]
