"""One leader per partition epoch, epochs never backwards, one controller per controller epoch."""

from __future__ import annotations

import dataclasses

from checkers_fixtures import elected, events

from floodmark.checkers.api import CheckInput
from floodmark.checkers.white_box.leader import LeaderChecker
from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    ControllerElected,
    IsrChanged,
    Started,
)


def check(node_events: dict):  # type: ignore[no-untyped-def]
    return LeaderChecker().check(CheckInput([], node_events))


def leader(epoch: int, partition: int = 0) -> BecameLeader:
    return BecameLeader(topic="t0", partition=partition, leader_epoch=epoch, isr=(1,), log_end=0, high_watermark=0)


def follower(epoch: int, partition: int = 0) -> BecameFollower:
    return BecameFollower(topic="t0", partition=partition, leader_epoch=epoch, leader=2, log_end=0)


def appended_as_leader(offset: int, epoch: int, value: str) -> Appended:
    return Appended(topic="t0", partition=0, offset=offset, epoch=epoch, values=(value,), role="leader")


def acked(offset: int) -> Acked:  # as older writers recorded it: no leader epoch
    return Acked(topic="t0", partition=0, offset=offset, high_watermark=offset + 1, acks=-1)


def test_successive_leaders_are_valid() -> None:
    n1 = events("n1", ControllerElected(controller_epoch=1, broker=1), leader(1), appended_as_leader(0, 1, "a"),
                acked(0), elected(0, leader=2, epoch=2, zk_version=2), follower(2))
    n2 = events("n2", follower(1), leader(2), ControllerElected(controller_epoch=2, broker=2),
                IsrChanged(topic="t0", partition=0, leader_epoch=2, isr=(2,), zk_version=3, change="shrink"))
    result = check({"n1": n1, "n2": n2})
    assert result.valid is True, result.anomalies
    assert result.stats["leader_epochs"] == 2


def test_two_brokers_leading_one_epoch() -> None:
    n1 = events("n1", leader(3))
    n2 = events("n2", follower(2), appended_as_leader(5, 3, "x"))
    anomaly, promoted = check({"n1": n1, "n2": n2}).anomalies
    assert promoted.type == "self-promoted-leader" and promoted.events == (("n2", 1),)  # never became leader of 3
    assert anomaly.type == "multiple-leaders" and anomaly.details["leaders"] == ["n1", "n2"]
    assert anomaly.events == (("n1", 0), ("n2", 1))


def test_acked_counts_as_leading_in_the_brokers_current_epoch() -> None:
    n1 = events("n1", leader(4))
    n2 = events("n2", leader(4), acked(1))
    assert check({"n1": n1, "n2": n2}).anomalies[0].type == "multiple-leaders"


def test_acked_in_its_own_leader_epoch() -> None:
    n1 = events("n1", leader(4))
    n2 = events("n2", leader(3), Acked(topic="t0", partition=0, offset=1, high_watermark=2, acks=-1, leader_epoch=4))
    anomaly, promoted = check({"n1": n1, "n2": n2}).anomalies
    assert promoted.type == "self-promoted-leader" and promoted.details["leader_epoch"] == 4
    assert anomaly.type == "multiple-leaders" and anomaly.details["leader_epoch"] == 4


def test_controllers_electing_different_leaders_for_one_epoch() -> None:
    c1 = events("n1", elected(0, leader=1, epoch=5, zk_version=7))
    c2 = events("n2", elected(0, leader=2, epoch=5, zk_version=8))
    [anomaly] = check({"n1": c1, "n2": c2}).anomalies
    assert anomaly.type == "multiple-leaders" and anomaly.details["source"] == "leader_elected"
    assert anomaly.details["leaders"] == [1, 2]


def test_a_broker_acting_as_leader_in_an_epoch_the_controller_gave_another() -> None:
    """The one elected never acted (down, or never told), so no two brokers acted in the
    epoch: only the controller's election shows the second leader."""
    controller = events("n1", Started(broker=1), elected(0, leader=3, epoch=5, zk_version=7))
    acting = events("n2", Started(broker=2), leader(5), appended_as_leader(0, 5, "x"))
    [anomaly] = check({"n1": controller, "n2": acting}).anomalies
    assert anomaly.type == "multiple-leaders" and anomaly.details["source"] == "not_elected"
    assert anomaly.details["leaders"] == [2, 3] and anomaly.events == (("n1", 1), ("n2", 1))
    assert "for which controller n1 elected broker 3" in anomaly.explanation
    offline = events("n1", Started(broker=1), elected(0, leader=-1, epoch=5, zk_version=7))
    [anomaly] = check({"n1": offline, "n2": acting}).anomalies
    assert "elected no leader" in anomaly.explanation
    # The broker elected, acting: valid; a file that states no id is not judged by elections.
    assert check({"n1": controller, "n2": events("n2", Started(broker=3), leader(5))}).valid is True
    assert check({"n1": controller, "n2": events("n2", leader(5))}).anomalies == []


def test_broker_epoch_going_backwards() -> None:
    n1 = events("n1", leader(3), follower(2))
    [anomaly] = check({"n1": n1}).anomalies
    assert anomaly.type == "epoch-regression" and anomaly.details["to_epoch"] == 2


def test_zookeeper_state_going_back_to_an_older_epoch() -> None:
    # a stale leader's unconditional ISR write lands after the controller's newer election
    c = events("n1", elected(0, leader=2, epoch=6, zk_version=10))
    stale = events("n3", leader(5), IsrChanged(topic="t0", partition=0, leader_epoch=5, isr=(3,), zk_version=11,
                                                change="shrink"))
    [anomaly] = check({"n1": c, "n3": stale}).anomalies
    assert anomaly.type == "epoch-regression" and anomaly.details["source"] == "zookeeper"


def test_two_controllers_in_one_controller_epoch_and_regression() -> None:
    n1 = events("n1", ControllerElected(controller_epoch=4, broker=1))
    n2 = events("n2", ControllerElected(controller_epoch=4, broker=2), ControllerElected(controller_epoch=3, broker=2))
    kinds = sorted(a.type for a in check({"n1": n1, "n2": n2}).anomalies)
    assert kinds == ["controller-epoch-regression", "multiple-controllers"]


def test_different_partitions_are_independent() -> None:
    n1 = events("n1", leader(1, partition=0))
    n2 = events("n2", leader(1, partition=1))
    assert check({"n1": n1, "n2": n2}).valid is True


def test_an_unclean_election_the_configuration_forbids_is_caught_unless_it_was_a_recovery() -> None:
    from floodmark.contracts.run_config import TestConfig

    def judge(recovery: bool | None, unclean_enabled: bool = False):  # type: ignore[no-untyped-def]
        n1 = events("n1", elected(0, leader=2, epoch=3, unclean=True, recovery=recovery))
        config = TestConfig(unclean_leader_election=unclean_enabled, nodes=1)
        return LeaderChecker().check(CheckInput([], {"n1": n1}, config))
    [anomaly] = judge(recovery=False).anomalies
    assert anomaly.type == "unclean-election" and anomaly.events == (("n1", 0),)
    assert judge(recovery=True).valid is True  # KIP-966's balanced recovery
    assert judge(recovery=False, unclean_enabled=True).valid is True  # the configuration allows it
    # An election that does not say it was a recovery (an older file, another writer) is not one.
    unsaid = events("n1", dataclasses.replace(elected(0, leader=2, epoch=3, unclean=True), recovery=None))
    result = LeaderChecker().check(CheckInput([], {"n1": unsaid}, TestConfig(unclean_leader_election=False, nodes=1)))
    assert [a.type for a in result.anomalies] == ["unclean-election"]


def test_states_at_one_zookeeper_version_are_ordered_by_their_transaction_ids() -> None:
    # Only one write makes a version: the later transaction wrote an older epoch.
    n1 = events("n1", dataclasses.replace(elected(0, leader=1, epoch=2, zk_version=5), zxid=60))
    n2 = events("n2", leader(1), IsrChanged(topic="t0", partition=0, leader_epoch=1, isr=(2,), zk_version=5,
                                            change="shrink", zxid=61))
    assert [a.type for a in check({"n1": n1, "n2": n2}).anomalies] == ["epoch-regression"]


def test_changing_the_isr_is_acting_as_leader() -> None:
    n1 = events("n1", leader(1))
    n2 = events("n2", IsrChanged(topic="t0", partition=0, leader_epoch=1, isr=(2,), zk_version=3, change="shrink"))
    assert [a.type for a in check({"n1": n1, "n2": n2}).anomalies] == ["multiple-leaders", "self-promoted-leader"]
