"""Invariants ordered by epochs and ZooKeeper zxids: StrongIsr at admission, controller fencing.

Each invariant is shown failing on a crafted event sequence and passing on the correct one;
the controller-fencing one also on the events of the simulated KAFKA-6082 sequence.
"""

from __future__ import annotations

from checkers_fixtures import events

from floodmark.checkers.api import CheckInput
from floodmark.checkers.white_box.epoch_invariants import (
    admissions_lacking_committed,
    isr_writes_for_another_epoch,
    stale_controller_writes,
)
from floodmark.checkers.white_box.invariants import InvariantsChecker
from floodmark.contracts import node_events as kinds
from floodmark.contracts.node_events import NodeEvent
from floodmark.contracts.run_config import TestConfig


def leads(epoch: int, log_end: int, *isr: int) -> kinds.BecameLeader:
    return kinds.BecameLeader(topic="t0", partition=0, leader_epoch=epoch, isr=isr, log_end=log_end,
                              high_watermark=0)


def hw(epoch: int, previous: int, to: int) -> kinds.HwChanged:
    return kinds.HwChanged(topic="t0", partition=0, leader_epoch=epoch, role="leader", previous=previous,
                           high_watermark=to, log_end=to)


def admits(epoch: int, joined: int, log_end: int, *isr: int) -> kinds.IsrChanged:
    return kinds.IsrChanged(topic="t0", partition=0, leader_epoch=epoch, isr=isr, zk_version=4, change="expand",
                            zxid=40, joined=joined, joined_log_end=log_end)


def kafka_7128(joined_log_end: int) -> dict[str, list[NodeEvent]]:
    """n2 led epoch 0 and committed offset 0 (HW 1); n3 leads epoch 1 from its log end 1 and
    admits n4, whose log ends at ``joined_log_end``."""
    return {"n2": events("n2", leads(0, 0, 2, 3, 5), hw(0, 0, 1)),
            "n3": events("n3", leads(1, 1, 3, 5), admits(1, 4, joined_log_end, 3, 4, 5))}


def test_a_follower_admitted_below_what_an_earlier_epoch_committed_is_caught() -> None:
    found = admissions_lacking_committed(kafka_7128(0))
    assert [a.type for a in found] == ["isr-admitted-lacking-committed"]
    assert found[0].offsets == (0,) and found[0].events == (("n3", 1),)
    assert found[0].details["joined"] == 4 and found[0].details["committed_before"] == 1


def test_a_follower_admitted_at_the_epoch_start_is_valid() -> None:
    assert admissions_lacking_committed(kafka_7128(1)) == []


def test_an_epoch_start_below_the_earlier_commit_bounds_what_is_required() -> None:
    # The new leader began below the earlier HW (every replica lost its tail, which the
    # contract permits): a follower at the leader's own epoch start lacks nothing it has.
    run = {"n2": events("n2", leads(0, 0, 2, 3), hw(0, 0, 5)),
           "n3": events("n3", leads(1, 2, 3), admits(1, 4, 2, 3, 4))}
    assert admissions_lacking_committed(run) == []


def test_only_earlier_epochs_count_as_committed_before() -> None:
    # The admitting leader's own later HW is not an earlier epoch's commit.
    run = {"n3": events("n3", leads(1, 3, 3), admits(1, 4, 1, 3, 4), hw(1, 0, 3))}
    assert admissions_lacking_committed(run) == []


def elected(controller_epoch: int, zxid: int | None, leader_epoch: int = 1) -> kinds.LeaderElected:
    return kinds.LeaderElected(topic="t0", partition=0, leader=2, leader_epoch=leader_epoch, isr=(2,),
                               controller_epoch=controller_epoch, zk_version=leader_epoch, unclean=False, zxid=zxid)


def test_a_write_by_a_deposed_controller_is_caught() -> None:
    run = {"n1": events("n1", kinds.ControllerElected(controller_epoch=1, broker=1, zxid=10), elected(1, 20),
                        elected(1, 60, leader_epoch=3)),
           "n2": events("n2", kinds.ControllerElected(controller_epoch=2, broker=2, zxid=50),
                        elected(2, 55, leader_epoch=2))}
    found = stale_controller_writes(run)
    assert [a.type for a in found] == ["stale-controller-write"]
    assert found[0].events == (("n2", 0), ("n1", 2)) and found[0].details["deposed_at_zxid"] == 50


def test_writes_before_the_successor_was_elected_are_valid() -> None:
    run = {"n1": events("n1", kinds.ControllerElected(controller_epoch=1, broker=1, zxid=10), elected(1, 20),
                        elected(1, None, leader_epoch=3)),  # no zxid: not judged
           "n2": events("n2", kinds.ControllerElected(controller_epoch=2, broker=2, zxid=50), elected(2, 55))}
    assert stale_controller_writes(run) == []


def test_the_invariants_checker_reports_both() -> None:
    run = kafka_7128(0)
    run["n1"] = events("n1", kinds.ControllerElected(controller_epoch=1, broker=1, zxid=10),
                       kinds.ControllerElected(controller_epoch=2, broker=1, zxid=30), elected(1, 31))
    result = InvariantsChecker().check(CheckInput([], run, TestConfig(acks="all", min_insync_replicas=2)))
    assert result.valid is False
    assert sorted(a.type for a in result.anomalies) == ["isr-admitted-lacking-committed", "stale-controller-write"]


def isr_written(requester: int, requested_epoch: int, leader: int = 3, epoch: int = 1) -> kinds.IsrWritten:
    return kinds.IsrWritten(topic="t0", partition=0, leader=leader, leader_epoch=epoch, isr=(requester,),
                            zk_version=5, requester=requester, requested_leader_epoch=requested_epoch,
                            requester_incarnation=9, zxid=41)


def test_an_isr_written_on_a_deposed_leaders_proposal_is_caught() -> None:
    # n2 led epoch 0 and proposed ISR {2}; the controller (n1) wrote it over n3's epoch 1.
    found = isr_writes_for_another_epoch({"n1": events("n1", isr_written(2, 0))})
    assert [a.type for a in found] == ["isr-written-for-another-epoch"]
    assert found[0].events == (("n1", 0),) and found[0].details["requester"] == 2
    # The same leader proposing in an older epoch of its own is as stale.
    assert len(isr_writes_for_another_epoch({"n1": events("n1", isr_written(3, 0))})) == 1


def test_an_isr_written_on_the_current_leaders_proposal_is_valid() -> None:
    assert isr_writes_for_another_epoch({"n1": events("n1", isr_written(3, 1))}) == []
