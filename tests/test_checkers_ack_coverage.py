"""Acknowledgement coverage: an acks=all ack from a leader whose ISR is below min.insync is caught."""

from __future__ import annotations

from checkers_fixtures import History, events

from floodmark.checkers.ack_coverage import acks_below_min_insync
from floodmark.checkers.api import CheckInput
from floodmark.checkers.hw import HighWatermarkChecker
from floodmark.node_events import Acked, BecameFollower, BecameLeader, IsrChanged, Started
from floodmark.run_config import TestConfig

CONFIG = TestConfig(acks="all", min_insync_replicas=2)


def leader(epoch: int, isr: tuple[int, ...]) -> BecameLeader:
    return BecameLeader(topic="t0", partition=0, leader_epoch=epoch, isr=isr, log_end=0, high_watermark=0)


def isr(epoch: int, members: tuple[int, ...]) -> IsrChanged:
    return IsrChanged(topic="t0", partition=0, leader_epoch=epoch, isr=members, zk_version=1, change="shrink")


def acked(offset: int, acks: int = -1) -> Acked:
    return Acked(topic="t0", partition=0, offset=offset, first_offset=offset, high_watermark=offset + 1,
                 acks=acks, leader_epoch=1)


def test_acks_with_an_isr_at_min_insync_are_covered() -> None:
    n1 = events("n1", leader(1, (1, 2)), acked(0), isr(1, (1, 2, 3)), acked(1))
    assert acks_below_min_insync({"n1": n1}, CONFIG) == []


def test_an_ack_after_the_isr_shrank_to_the_leader_is_caught_with_its_events() -> None:
    n1 = events("n1", leader(1, (1, 2)), acked(0), isr(1, (1,)), acked(1), acked(2, acks=1))
    [anomaly] = acks_below_min_insync({"n1": n1}, CONFIG)
    assert anomaly.type == "ack-below-min-insync" and anomaly.offsets == (1,)
    assert anomaly.events == (("n1", 2), ("n1", 3))  # the ISR change, then the ack it did not cover
    assert anomaly.details["isr"] == [1]


def test_a_new_leadership_or_a_restart_replaces_what_was_known() -> None:
    n1 = events("n1", leader(1, (1,)), Started(), acked(0),
                BecameFollower(topic="t0", partition=0, leader_epoch=2, leader=2, log_end=1), acked(1))
    assert acks_below_min_insync({"n1": n1}, CONFIG) == []
    n2 = events("n2", leader(1, (2,)), leader(2, (2, 1)), acked(0))
    assert acks_below_min_insync({"n2": n2}, CONFIG) == []


def test_runs_that_promise_less_are_not_judged() -> None:
    n1 = events("n1", leader(1, (1,)), acked(0))
    assert acks_below_min_insync({"n1": n1}, None) == []
    assert acks_below_min_insync({"n1": n1}, TestConfig(acks=1, min_insync_replicas=2)) == []
    assert acks_below_min_insync({"n1": n1}, TestConfig(acks="all", min_insync_replicas=1)) == []


def test_the_hw_checker_reports_it() -> None:
    n1 = events("n1", leader(1, (1,)), acked(0))
    result = HighWatermarkChecker().check(CheckInput(History().ops, {"n1": n1}, CONFIG))
    assert result.valid is False
    assert [a.type for a in result.anomalies] == ["ack-below-min-insync"]
