"""Unit tests of the partition replica state machine (floodmark.reference.broker.partition).

The replica is driven directly, without a broker or a network. Its log is a small in-memory
list of records with the real leader epoch cache (on the simulated disk), so the epoch rules
(KIP-101/279) are the real ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import pytest

from floodmark.contracts.node_events import (
    Appended,
    BecameLeader,
    Fenced,
    HwChanged,
    IsrChanged,
    KnownKind,
    NodeEventBody,
    Truncated,
)
from floodmark.reference.broker.partition import Divergence, Partition
from floodmark.reference.log.epoch_cache import LeaderEpochCache
from floodmark.reference.protocol.messages import NO_EPOCH, Errors, PartitionState, Record
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.reference.sim.disk import SimDisk


class ListLog:
    """An in-memory log: enough of PartitionLog for the replica's rules."""

    def __init__(self, name: str = "p") -> None:
        self.records: list[Record] = []
        self.epoch_cache = LeaderEpochCache(SimDisk(), f"/data/{name}/leader-epoch-checkpoint")
        SimDisk.make_dirs(self.epoch_cache.storage, f"/data/{name}")  # type: ignore[arg-type]

    @property
    def log_start(self) -> int:
        return 0

    @property
    def log_end(self) -> int:
        return len(self.records)

    @property
    def last_epoch(self) -> int:
        return self.records[-1].leader_epoch if self.records else -1

    def append_as_leader(self, values: Sequence[str], leader_epoch: int) -> int:
        base = self.log_end
        if leader_epoch > self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(leader_epoch, base)
        self.records.extend(Record(base + i, leader_epoch, v) for i, v in enumerate(values))
        return base

    def append_as_follower(self, records: Sequence[Record]) -> None:
        for r in records:
            assert r.offset == self.log_end
            if r.leader_epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(r.leader_epoch, r.offset)
            self.records.append(r)

    def read(self, offset: int, max_records: int, max_offset: int | None = None) -> list[Record]:
        end = self.log_end if max_offset is None else min(max_offset, self.log_end)
        return self.records[offset:min(end, offset + max_records)]

    def truncate_to(self, offset: int) -> None:
        del self.records[offset:]
        self.epoch_cache.truncate_from_end(offset)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


E = TypeVar("E", bound=NodeEventBody)


class Events:
    """What the replica emitted, in order (the runtime's ``emit``)."""

    def __init__(self) -> None:
        self.items: list[KnownKind] = []

    def __call__(self, event: KnownKind) -> None:
        self.items.append(event)

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.items if isinstance(e, kind)]


def state(leader: int, epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2, 3),
          version: int = 0) -> PartitionState:
    return PartitionState("t", 0, leader, epoch, isr, version, replicas, controller_epoch=1)


def replica(broker_id: int = 1, variant: str = "default", hw: int = 0,
            log: ListLog | None = None) -> tuple[Partition, Events]:
    events = Events()
    p = Partition("t", 0, broker_id, log or ListLog(), high_watermark=hw,
                  variant=VARIANTS[variant], emit=events)
    return p, events


def test_new_leader_records_epoch_start_and_keeps_its_hw_until_followers_report() -> None:
    log = ListLog()
    log.append_as_leader(["a", "b", "c"], 0)
    p, events = replica(hw=1, log=log)
    assert p.make_leader(state(1, 1, (1, 2, 3)), now_wall=100.0)
    assert p.epoch_start_offset == 3
    assert log.epoch_cache.start_offset(1) == 3
    assert p.high_watermark == 1  # not advanced: followers have not reported yet
    assert events.of(BecameLeader)[0].leader_epoch == 1
    p.record_follower_fetch(2, 3, incarnation=5, now_wall=100.1)
    assert p.high_watermark == 1  # broker 3 is in the ISR and has not reported
    assert p.record_follower_fetch(3, 2, incarnation=7, now_wall=100.2)
    assert p.high_watermark == 2
    assert events.of(HwChanged)[-1] == HwChanged(
        topic="t", partition=0, leader_epoch=1, role="leader", previous=1, high_watermark=2, log_end=3)


def test_high_watermark_never_moves_backwards() -> None:
    p, _ = replica()
    p.make_leader(state(1, 1, (1, 2)), now_wall=0.0)
    p.append_as_leader(["a", "b", "c"])
    p.record_follower_fetch(2, 3, 1, 0.1)
    assert p.high_watermark == 3
    # A delayed fetch from an earlier position must not pull the HW back.
    assert not p.record_follower_fetch(2, 1, 1, 0.2)
    assert p.high_watermark == 3


def test_fetch_from_an_older_incarnation_is_ignored() -> None:
    p, _ = replica()
    p.make_leader(state(1, 1, (1, 2)), now_wall=0.0)
    p.append_as_leader(["a", "b"])
    p.record_follower_fetch(2, 0, incarnation=9, now_wall=0.1)
    assert not p.record_follower_fetch(2, 2, incarnation=8, now_wall=0.2)
    assert p.followers[2].log_end == 0 and p.high_watermark == 0


def test_stale_or_equal_leader_epoch_is_not_accepted_except_init_resend() -> None:
    p, _ = replica()
    p.make_leader(state(1, 5, (1, 2)), now_wall=0.0)
    assert not p.accepts(state(2, 4, (2,)), is_init=False)
    assert not p.accepts(state(2, 5, (2,)), is_init=False)
    assert p.accepts(state(1, 5, (1, 2), replicas=(1, 2, 4)), is_init=True)
    assert p.accepts(state(2, 6, (2,)), is_init=False)
    # The init re-send of the same epoch updates replicas without re-becoming leader.
    assert not p.make_leader(state(1, 5, (1, 2), replicas=(1, 2, 4)), now_wall=1.0)
    assert p.role == "leader" and 4 in p.followers


def test_an_init_resend_of_an_older_state_node_does_not_bring_back_the_isr_the_leader_shrank() -> None:
    # Explore seed 17211: a new controller read the state node (ISR [1, 2], version 0) and its
    # init LeaderAndIsr reached the leader only after the leader had shrunk the ISR to [1]
    # (version 1). Taking that ISR back let the HW advance with one in-sync replica, below
    # min.insync.replicas, and acknowledge with acks=all. A newer one is taken, and recorded:
    # explore seed 279 (truncate-on-fetch) took it silently, and the invariants checker saw
    # acks=all answered with the old ISR.
    p, events = replica()
    p.min_insync_replicas = 2
    p.make_leader(state(1, 5, (1, 2)), now_wall=0.0)
    p.append_as_leader(["a"])
    p.record_follower_fetch(2, 1, 1, 0.1)
    assert p.high_watermark == 1
    p.apply_isr((1,), zk_version=1, change="shrink")
    p.append_as_leader(["b"])
    assert p.accepts(state(1, 5, (1, 2), replicas=(1, 2, 4)), is_init=True)
    assert not p.make_leader(state(1, 5, (1, 2), replicas=(1, 2, 4)), now_wall=1.0)
    assert (p.isr, p.zk_version, p.replicas) == ((1,), 1, (1, 2, 4))  # only the replica list is new
    p.record_follower_fetch(2, 2, 1, 1.1)
    assert p.high_watermark == 1  # the ISR is below min.insync.replicas: the HW stands still
    # A same-epoch state node newer than the replica's own is taken whole, and on record.
    p.make_leader(state(1, 5, (1, 2), version=2), now_wall=2.0)
    assert (p.isr, p.zk_version) == ((1, 2), 2)
    assert events.of(IsrChanged)[-1] == IsrChanged(topic="t", partition=0, leader_epoch=5, isr=(1, 2), zk_version=2,
                                                       change="controller")
    p.make_leader(state(1, 5, (1, 2), version=3), now_wall=3.0)  # newer, the same ISR: nothing to record
    assert len(events.of(IsrChanged)) == 2 and p.zk_version == 3


def test_isr_shrinks_for_followers_lagging_by_time_using_the_wall_clock() -> None:
    p, _ = replica()
    p.make_leader(state(1, 1, (1, 2, 3)), now_wall=1000.0)
    p.append_as_leader(["a"])
    p.record_follower_fetch(2, 1, 1, 1005.0)  # caught up
    p.record_follower_fetch(3, 0, 1, 1005.0)  # behind
    assert p.followers_to_drop(1009.0, 10.0, 1000) == ()
    assert p.followers_to_drop(1011.0, 10.0, 1000) == (3,)
    # A forward jump of the leader's wall clock makes the healthy follower look late too.
    assert p.followers_to_drop(1016.0, 10.0, 1000) == (2, 3)


def test_isr_shrinks_for_followers_lagging_by_records() -> None:
    p, _ = replica()
    p.make_leader(state(1, 1, (1, 2)), now_wall=0.0)
    p.append_as_leader([str(i) for i in range(10)])
    p.record_follower_fetch(2, 2, 1, 0.1)
    assert p.followers_to_drop(0.2, 10.0, 8) == ()
    assert p.followers_to_drop(0.2, 10.0, 5) == (2,)


def test_follower_caught_up_at_previous_fetch_if_it_reached_the_then_log_end() -> None:
    p, _ = replica()
    p.make_leader(state(1, 1, (1, 2)), now_wall=0.0)
    p.append_as_leader(["a"])
    p.record_follower_fetch(2, 1, 1, 5.0)  # caught up at 5
    p.append_as_leader(["b"])
    p.record_follower_fetch(2, 1, 1, 9.0)  # behind now, but reached the log end of its last fetch
    assert p.followers[2].last_caught_up_wall == 5.0
    p.append_as_leader(["c"])
    p.record_follower_fetch(2, 2, 1, 14.0)  # reached the end it saw at 9: caught up then
    assert p.followers[2].last_caught_up_wall == 9.0


def become_leader_with_lagging_hw() -> tuple[Partition, Events]:
    """A new leader whose log ends at 4 (epoch start) but whose HW is only 2."""
    log = ListLog()
    log.append_as_leader(["a", "b", "c", "d"], 1)
    p, events = replica(variant="default", hw=2, log=log)
    p.make_leader(state(1, 2, (1,), replicas=(1, 2)), now_wall=0.0)
    return p, events


def test_isr_expansion_needs_the_hw_and_the_epoch_start() -> None:
    p, _ = become_leader_with_lagging_hw()
    assert p.high_watermark == 4  # ISR {1}: the leader alone covers its log
    log = ListLog()
    log.append_as_leader(["a", "b", "c", "d"], 1)
    p2, _ = replica(variant="default", hw=2, log=log)
    p2.make_leader(state(1, 2, (1, 3), replicas=(1, 2, 3)), now_wall=0.0)
    assert p2.high_watermark == 2  # 3 is in the ISR and has not reported
    p2.record_follower_fetch(2, 2, 1, 0.1)  # at the HW, below the epoch start (4)
    assert not p2.may_join_isr(2, 0.1, 10.0)
    p2.record_follower_fetch(2, 4, 1, 0.2)
    assert p2.may_join_isr(2, 0.2, 10.0)
    assert not p2.may_join_isr(3, 0.2, 10.0)  # already in the ISR
    # Caught up long ago but silent since: admitting it would only drop it again.
    assert not p2.may_join_isr(2, 30.0, 10.0)


def test_isr_admission_below_epoch_start_variant_admits_at_the_hw() -> None:
    log = ListLog()
    log.append_as_leader(["a", "b", "c", "d"], 1)
    p, _ = replica(variant="isr-admission-below-epoch", hw=2, log=log)
    p.make_leader(state(1, 2, (1, 3), replicas=(1, 2, 3)), now_wall=0.0)
    p.record_follower_fetch(2, 2, 1, 0.1)
    assert p.may_join_isr(2, 0.1, 10.0)


def test_a_pending_expansion_holds_the_hw_at_the_joiners_log_end_until_its_outcome_is_known() -> None:
    # KIP-497's maximal ISR: the write admitting broker 3 may land after 3 fell behind again
    # (a held-back request, a slow ZooKeeper reply); nothing it lacks may be committed meanwhile.
    p, _ = replica()
    p.make_leader(state(1, 1, (1, 2), replicas=(1, 2, 3)), now_wall=0.0)
    p.append_as_leader(["a", "b"])
    p.record_follower_fetch(2, 2, 1, 0.1)
    p.record_follower_fetch(3, 2, 1, 0.1)
    assert p.high_watermark == 2 and p.may_join_isr(3, 0.1, 10.0)
    assert p.begin_expansion(3) == (1, 2, 3)
    assert p.isr == (1, 2) and p.maximal_isr == (1, 2, 3)
    p.append_as_leader(["c", "d"])
    p.record_follower_fetch(2, 4, 1, 0.2)
    assert p.high_watermark == 2  # 3 has not got c and d
    p.end_isr_update(outcome_known=False)  # a lost connection: the write may have landed
    p.record_follower_fetch(2, 4, 1, 0.3)
    assert p.high_watermark == 2 and p.maximal_isr == (1, 2, 3)
    p.end_isr_update()  # refused: 3 is no member
    assert p.record_follower_fetch(2, 4, 1, 0.4) and p.high_watermark == 4
    p.begin_expansion(3)
    p.apply_isr((1, 2, 3), zk_version=5, change="expand")
    assert p.maximal_isr == (1, 2, 3) and p.joining == ()
    p.record_follower_fetch(3, 4, 1, 0.5)
    assert p.high_watermark == 4


def test_apply_isr_and_fence() -> None:
    p, events = replica()
    p.make_leader(state(1, 1, (1, 2, 3)), now_wall=0.0)
    p.append_as_leader(["a"])
    p.record_follower_fetch(2, 1, 1, 0.1)
    p.apply_isr((1, 2), zk_version=4, change="shrink")
    assert p.high_watermark == 1  # 3 left the ISR, so the HW can move
    assert events.of(IsrChanged)[0].zk_version == 4
    p.fence("lost conditional ISR write")
    assert not p.is_leader
    assert events.of(Fenced)[0].why == "lost conditional ISR write"
    assert p.followers_to_drop(100.0, 1.0, 1) == ()


def test_min_insync_replicas_check_and_its_variant() -> None:
    p, _ = replica()
    p.make_leader(state(1, 1, (1,)), now_wall=0.0)
    assert p.check_enough_replicas(2) == Errors.NOT_ENOUGH_REPLICAS
    assert p.check_enough_replicas(1) is None
    v, _ = replica(variant="acks-all-isr-of-one")
    v.make_leader(state(1, 1, (1,)), now_wall=0.0)
    assert v.check_enough_replicas(2) is None


def test_fetch_epoch_fencing_and_divergence() -> None:
    log = ListLog()
    log.append_as_leader(["a", "b"], 1)
    p, _ = replica(log=log)
    p.make_leader(state(1, 3, (1, 2)), now_wall=0.0)
    p.append_as_leader(["c"])
    assert p.check_follower_fetch(3, 2, 3).error == Errors.FENCED_LEADER_EPOCH
    assert p.check_follower_fetch(3, 4, 3).error == Errors.UNKNOWN_LEADER_EPOCH
    assert p.check_follower_fetch(3, 3, 3).error is None
    # A follower that fetched epoch-2 records the leader never had diverges at epoch 1's end.
    check = p.check_follower_fetch(3, 3, 2)
    assert check.divergence == Divergence(1, 2)
    # Before KIP-320 nothing is checked.
    u, _ = replica(variant="unfenced-fetch", log=log)
    u.make_leader(state(1, 4, (1, 2)), now_wall=0.0)
    assert u.check_follower_fetch(3, 2, 2).error is None
    assert u.check_follower_fetch(3, 2, 2).divergence is None


def test_epoch_lookup_kip279_against_kip101() -> None:
    # Leader log: epoch 1 at 0..1, epoch 3 from 2. A follower asks about epoch 2, which
    # this leader never had (the follower led epoch 2 briefly).
    for variant, expected in (("default", (1, 2)), ("no-kip-279", (2, 2))):
        log = ListLog()
        log.append_as_leader(["a0", "a1"], 1)
        p, _ = replica(variant=variant, log=log)
        p.make_leader(state(1, 3, (1, 2)), now_wall=0.0)
        p.append_as_leader(["x2"])
        assert p.epoch_end_offset(2) == expected, variant
        assert p.epoch_end_offset(3) == (3, 3)


def test_follower_hw_is_min_of_leader_hw_and_own_log_end() -> None:
    p, events = replica(broker_id=2)
    p.make_follower(state(1, 1, (1, 2)))
    p.append_as_follower([Record(0, 1, "a"), Record(1, 1, "b")], leader_high_watermark=5)
    assert p.high_watermark == 2
    assert events.of(Appended)[0].values == ("a", "b")
    assert events.of(Appended)[0].role == "follower"
    p.append_as_follower([], leader_high_watermark=1)
    assert p.high_watermark == 2


def test_truncation_emits_event_and_clamps_hw() -> None:
    p, events = replica(broker_id=2)
    p.make_follower(state(1, 1, (1, 2)))
    p.append_as_follower([Record(i, 1, str(i)) for i in range(4)], leader_high_watermark=3)
    p.truncate(3, reason="leader_epoch")
    assert p.log_end == 3 and p.high_watermark == 3
    p.truncate(1, reason="high_watermark")
    assert p.high_watermark == 1
    assert [e.to_offset for e in events.of(Truncated)] == [3, 1]
    p.truncate(5, reason="leader_epoch")  # beyond the end: nothing
    assert len(events.of(Truncated)) == 2


def test_consumer_reads_are_bounded_by_the_hw() -> None:
    p, _ = replica()
    p.make_leader(state(1, 1, (1, 2)), now_wall=0.0)
    p.append_as_leader(["a", "b", "c"])
    p.record_follower_fetch(2, 1, 1, 0.1)
    assert p.consumer_read_error(0) is None
    assert p.consumer_read_error(1) is None
    assert p.consumer_read_error(2) == Errors.OFFSET_NOT_AVAILABLE
    assert p.consumer_read_error(4) == Errors.OFFSET_OUT_OF_RANGE


def test_checkpointed_hw_beyond_a_crashed_log_is_clamped() -> None:
    log = ListLog()
    log.append_as_leader(["a"], 0)
    p, _ = replica(hw=10, log=log)
    assert p.high_watermark == 1


@pytest.mark.parametrize("epoch", [NO_EPOCH])
def test_clients_without_an_epoch_are_not_fenced(epoch: int) -> None:
    p, _ = replica()
    p.make_leader(state(1, 2, (1,)), now_wall=0.0)
    assert p.check_leader_epoch(epoch) is None


def test_reads_of_the_newest_records_match_the_log_across_truncation_and_leader_changes() -> None:
    log = ListLog()
    p, _ = replica(log=log)
    p.make_leader(state(1, 1, (1,)), now_wall=0.0)
    p.append_as_leader(["a", "b", "c"])
    assert p.read(1, 10) == log.read(1, 10) == [Record(1, 1, "b"), Record(2, 1, "c")]
    assert p.read(0, 2, max_offset=1) == [Record(0, 1, "a")]
    assert p.read(3, 10) == []
    p.make_follower(state(2, 2, (1, 2)))
    p.truncate(1, reason="leader_epoch")
    p.append_as_follower([Record(1, 2, "x")], leader_high_watermark=1)
    assert p.read(0, 10) == [Record(0, 1, "a"), Record(1, 2, "x")]
    p.make_leader(state(1, 3, (1,)), now_wall=0.0)
    p.append_as_leader(["y"])
    assert p.read(0, 10) == log.read(0, 10) and p.read(0, 10)[-1] == Record(2, 3, "y")


def test_acting_as_leader_follows_every_change_of_role_and_staleness() -> None:
    p, _ = replica()
    assert p.key == ("t", 0) and not p.is_leader
    p.make_leader(state(1, 1, (1, 2, 3)), now_wall=0.0)
    assert p.is_leader
    p.fence("lost conditional ISR write")
    assert not p.is_leader
    p.make_leader(state(1, 1, (1, 2, 3)), now_wall=0.0)  # the controller's word for its own epoch
    assert p.is_leader
    p.make_follower(state(2, 2, (1, 2, 3)))
    assert not p.is_leader
    p.make_leader(state(1, 3, (1, 2, 3)), now_wall=0.0)
    p.stop()
    assert not p.is_leader
