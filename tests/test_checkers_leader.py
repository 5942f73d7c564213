"""One leader per partition epoch, epochs never backwards, one controller per controller epoch."""

from __future__ import annotations

from checkers_fixtures import events, tp

from floodmark.checkers.api import CheckInput
from floodmark.checkers.leader import LeaderChecker


def check(node_events: dict):  # type: ignore[no-untyped-def]
    return LeaderChecker().check(CheckInput([], node_events))


def leader(epoch: int, partition: int = 0) -> tuple[str, dict]:
    return ("became_leader", tp(partition, leader_epoch=epoch, isr=[1], log_end=0, high_watermark=0))


def follower(epoch: int, partition: int = 0) -> tuple[str, dict]:
    return ("became_follower", tp(partition, leader_epoch=epoch, leader="n2", log_end=0))


def test_successive_leaders_are_valid() -> None:
    n1 = events("n1", ("controller_elected", {"controller_epoch": 1, "broker": "n1"}), leader(1),
                ("appended", tp(0, offset=0, epoch=1, values=["a"], role="leader")),
                ("acked", tp(0, offset=0, high_watermark=1, acks="all")),
                ("leader_elected", tp(0, leader="n2", leader_epoch=2, zk_version=2, controller_epoch=1)),
                follower(2))
    n2 = events("n2", follower(1), leader(2), ("controller_elected", {"controller_epoch": 2, "broker": "n2"}),
                ("isr_changed", tp(0, leader_epoch=2, isr=[2], zk_version=3, change="shrink")))
    result = check({"n1": n1, "n2": n2})
    assert result.valid is True, result.anomalies
    assert result.stats["leader_epochs"] == 2


def test_two_brokers_leading_one_epoch() -> None:
    n1 = events("n1", leader(3))
    n2 = events("n2", follower(2), ("appended", tp(0, offset=5, epoch=3, values=["x"], role="leader")))
    [anomaly] = check({"n1": n1, "n2": n2}).anomalies
    assert anomaly.type == "multiple-leaders" and anomaly.details["leaders"] == ["n1", "n2"]
    assert anomaly.events == (("n1", 0), ("n2", 1))


def test_acked_counts_as_leading_in_the_brokers_current_epoch() -> None:
    n1 = events("n1", leader(4))
    n2 = events("n2", leader(4), ("acked", tp(0, offset=1, high_watermark=2, acks="all")))
    assert check({"n1": n1, "n2": n2}).anomalies[0].type == "multiple-leaders"


def test_controllers_electing_different_leaders_for_one_epoch() -> None:
    c1 = events("n1", ("leader_elected", tp(0, leader="n1", leader_epoch=5, zk_version=7)))
    c2 = events("n2", ("leader_elected", tp(0, leader="n2", leader_epoch=5, zk_version=8)))
    [anomaly] = check({"n1": c1, "n2": c2}).anomalies
    assert anomaly.type == "multiple-leaders" and anomaly.details["source"] == "leader_elected"


def test_broker_epoch_going_backwards() -> None:
    n1 = events("n1", leader(3), follower(2))
    [anomaly] = check({"n1": n1}).anomalies
    assert anomaly.type == "epoch-regression" and anomaly.details["to_epoch"] == 2


def test_zookeeper_state_going_back_to_an_older_epoch() -> None:
    # a stale leader's unconditional ISR write lands after the controller's newer election
    c = events("n1", ("leader_elected", tp(0, leader="n2", leader_epoch=6, zk_version=10)))
    stale = events("n3", ("isr_changed", tp(0, leader_epoch=5, isr=[3], zk_version=11, change="shrink")))
    [anomaly] = check({"n1": c, "n3": stale}).anomalies
    assert anomaly.type == "epoch-regression" and anomaly.details["source"] == "zookeeper"


def test_two_controllers_in_one_controller_epoch_and_regression() -> None:
    n1 = events("n1", ("controller_elected", {"controller_epoch": 4, "broker": "n1"}))
    n2 = events("n2", ("controller_elected", {"controller_epoch": 4, "broker": "n2"}),
                ("controller_elected", {"controller_epoch": 3, "broker": "n2"}))
    kinds = sorted(a.type for a in check({"n1": n1, "n2": n2}).anomalies)
    assert kinds == ["controller-epoch-regression", "multiple-controllers"]


def test_different_partitions_are_independent() -> None:
    n1 = events("n1", leader(1, partition=0))
    n2 = events("n2", leader(1, partition=1))
    assert check({"n1": n1, "n2": n2}).valid is True
