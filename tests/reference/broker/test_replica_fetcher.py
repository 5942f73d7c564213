"""The replica fetcher (floodmark.reference.broker.replica_fetcher): truncation and the fetch loop.

A follower broker's replica manager and fetchers run on one simulated node; the "leader"
is a scripted node in the same SimWorld that answers OffsetForLeaderEpoch and Fetch from a
fixed log, so each test controls exactly what the follower is told and checks what the
follower asked and what its log became.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from floodmark.contracts.node_events import Truncated
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.broker.metadata_cache import MetadataCache
from floodmark.reference.broker.partition import Partition
from floodmark.reference.broker.replica_manager import ReplicaManager
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.log.log_dirs import LogDirs
from floodmark.reference.protocol import inter_broker_protocol as ibp
from floodmark.reference.protocol.messages import (
    NO_EPOCH,
    BrokerInfo,
    EpochEnd,
    Errors,
    FetchPartition,
    FetchResponse,
    LeaderAndIsrRequest,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    PartitionFetchResult,
    PartitionState,
    Record,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
)
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.reference.sim.world import SimWorld

BROKERS = (BrokerInfo(1, "l"), BrokerInfo(3, "nowhere"))


class ScriptedLeader:
    """Answers like a leader whose log is ``records`` (epochs from the records)."""

    def __init__(self, records: list[Record], epoch: int, high_watermark: int) -> None:
        self.records = records
        self.epoch = epoch
        self.high_watermark = high_watermark
        self.requests: list[Any] = []
        self.fetches: list[FetchPartition] = []

    def end_for(self, epoch: int) -> tuple[int, int]:
        starts: dict[int, int] = {}
        for r in self.records:
            starts.setdefault(r.leader_epoch, r.offset)
        starts.setdefault(self.epoch, len(self.records))
        epochs = sorted(starts)
        older = [e for e in epochs if e <= epoch]
        if not older:
            return NO_EPOCH, -1
        later = [starts[e] for e in epochs if e > older[-1]]
        return older[-1], later[0] if later else len(self.records)

    async def handle(self, sender: str, message: Any) -> Any:
        self.requests.append(message)
        if isinstance(message, OffsetForLeaderEpochRequest):
            return OffsetForLeaderEpochResponse(None, tuple(
                EpochEnd(q.topic, q.partition, None, *self.end_for(q.leader_epoch)) for q in message.partitions))
        if isinstance(message, ReplicaFetchRequest):
            assert message.replica_id == 2
            return ReplicaFetchResponse(None, tuple(
                PartitionFetchResult(w.topic, w.partition, self.fetch(w)) for w in message.partitions))
        raise AssertionError(f"unexpected {message}")

    def fetch(self, wanted: FetchPartition) -> FetchResponse:
        self.fetches.append(wanted)
        if wanted.current_leader_epoch != self.epoch:
            return FetchResponse(Errors.FENCED_LEADER_EPOCH)
        if wanted.last_fetched_epoch != NO_EPOCH and wanted.offset > 0:
            epoch, end = self.end_for(wanted.last_fetched_epoch)
            if epoch != wanted.last_fetched_epoch or end < wanted.offset:
                return FetchResponse(None, (), self.high_watermark, len(self.records),
                                     diverging_epoch=epoch, diverging_end_offset=end)
        if wanted.offset > len(self.records):
            return FetchResponse(Errors.OFFSET_OUT_OF_RANGE, log_end=len(self.records))
        return FetchResponse(None, tuple(self.records[wanted.offset:]), self.high_watermark,
                             len(self.records), 0, self.epoch)


class Setup:
    def __init__(self, variant: str = "default", protocol: str = ibp.DEFAULT) -> None:
        self.world = SimWorld(seed=3)
        self.runtime = self.world.add_node("f")
        self.leader_runtime = self.world.add_node("l")
        config = BrokerConfig(broker_id=2, log_dirs=("/d",), variant=VARIANTS[variant],
                              inter_broker_protocol=protocol)
        self.replicas = ReplicaManager(self.runtime, config, LogDirs(self.runtime.storage, ["/d"]),
                                       MetadataCache(), BrokerSession())
        self.fetchers = self.replicas.fetchers

    def follower(self, records: list[Record], high_watermark: int, leader_epoch: int) -> Partition:
        # Build the follower's history as it would have been replicated, then follow.
        p = self.follow_without_fetching(leader=3, epoch=0)
        p.log.append_as_follower(records)
        p.high_watermark = high_watermark
        self.follow_without_fetching(leader=1, epoch=leader_epoch)
        return p

    def state(self, leader: int, epoch: int) -> None:
        """The controller's LeaderAndIsr: the replica manager starts the fetcher."""
        self.world.run(self.replicas.handle_leader_and_isr(LeaderAndIsrRequest(
            0, 1, 0, (self.partition_state(leader, epoch),), BROKERS)))

    def follow_without_fetching(self, leader: int, epoch: int) -> Partition:
        """The replica made follower as by LeaderAndIsr, but with no fetcher: the test starts it."""
        self.replicas.metadata.remember_brokers(BROKERS)
        self.replicas.start_replica("t", 0)
        p = self.replicas.get("t", 0)
        assert p is not None
        p.make_follower(self.partition_state(leader, epoch))
        return p

    @staticmethod
    def partition_state(leader: int, epoch: int) -> PartitionState:
        return PartitionState("t", 0, leader, epoch, (1, 2), 0, (1, 2), 1)

    def serve(self, leader: ScriptedLeader) -> None:
        self.world.run(self.leader_runtime.network.serve(leader.handle))

    def values(self) -> list[str]:
        p = self.replicas.get("t", 0)
        assert p is not None
        return [r.value for r in p.read(0, 100)]


def epochs_asked(leader: ScriptedLeader) -> list[int]:
    """The epochs the follower asked ``leader`` the end of, in order (OffsetForLeaderEpoch)."""
    return [q.leader_epoch for m in leader.requests if isinstance(m, OffsetForLeaderEpochRequest)
            for q in m.partitions]


def recs(*items: tuple[int, str]) -> list[Record]:
    return [Record(i, epoch, value) for i, (epoch, value) in enumerate(items)]


@pytest.fixture
def setup() -> Iterator[Setup]:
    s = Setup()
    yield s
    s.world.close()


def test_follower_truncates_by_epoch_then_fetches(setup: Setup) -> None:
    # Follower: a0 a1 (epoch 0) b2 (epoch 1, never replicated). Leader: a0 a1 c2 c3 (epoch 2).
    p = setup.follower(recs((0, "a0"), (0, "a1"), (1, "b2")), high_watermark=2, leader_epoch=2)
    leader = ScriptedLeader(recs((0, "a0"), (0, "a1"), (2, "c2"), (2, "c3")), epoch=2, high_watermark=4)
    setup.serve(leader)
    setup.fetchers.add(p)
    assert setup.world.run_until(lambda: setup.values() == ["a0", "a1", "c2", "c3"], 5.0)
    asked = [q for m in leader.requests if isinstance(m, OffsetForLeaderEpochRequest) for q in m.partitions]
    assert asked[0].leader_epoch == 1 and asked[0].current_leader_epoch == 2
    fetches = leader.fetches
    assert fetches[0].offset == 2 and fetches[0].last_fetched_epoch == 0
    assert fetches[0].current_leader_epoch == 2
    assert p.high_watermark == 4
    truncated = [e.body for e in setup.world.events("f") if isinstance(e.body, Truncated)]
    assert truncated[0].to_offset == 2 and truncated[0].reason == "leader_epoch"


@pytest.mark.parametrize("protocol", [ibp.LEGACY, ibp.HEARTBEATS, ibp.KIP_343])
def test_follower_asks_again_when_it_lacks_the_leaders_epoch(protocol: str) -> None:
    # Follower epochs 0 (a0) and 3 (d1, d2); leader has epochs 0 (a0, a1) and 2 (c2).
    # Asked about 3, the leader says "epoch 2 ends at 3"; the follower has no epoch 2, so it
    # drops its epoch 3 (from offset 1) and asks about epoch 0: "ends at 2"; it keeps a0.
    # Every protocol before truncate-on-fetch asks before its first fetch.
    s = Setup(protocol=protocol)
    try:
        p = s.follower(recs((0, "a0"), (3, "d1"), (3, "d2")), high_watermark=1, leader_epoch=4)
        leader = ScriptedLeader(recs((0, "a0"), (0, "a1"), (2, "c2")), epoch=4, high_watermark=3)
        s.serve(leader)
        s.fetchers.add(p)
        assert s.world.run_until(lambda: s.values() == ["a0", "a1", "c2"], 5.0)
        assert epochs_asked(leader) == [3, 0]
        assert leader.fetches[0].offset == 1  # its first fetch comes after the truncation
    finally:
        s.world.close()


def test_an_epoch_the_follower_led_without_appending_does_not_keep_it_asking(setup: Setup) -> None:
    # Explore seed 9757: the follower led epoch 2 from offset 2 and appended nothing (its
    # cache ends "epoch 2 from 2" over a log of a0 a1); the leader never had epoch 2 and
    # answers "epoch 1 ends at 3"; the follower lacks epoch 1 and truncates to where its
    # epoch 0 ends, 2: no record goes, but epoch 2 must, or it asks about epoch 2 again for
    # ever (37,379 times in 100 s there) and never fetches b2, so the ISR never fills again.
    p = setup.follower(recs((0, "a0"), (0, "a1")), high_watermark=2, leader_epoch=3)
    p.log.epoch_cache.assign(2, 2)
    leader = ScriptedLeader(recs((0, "a0"), (0, "a1"), (1, "b2")), epoch=3, high_watermark=3)
    setup.serve(leader)
    setup.fetchers.add(p)
    assert setup.world.run_until(lambda: setup.values() == ["a0", "a1", "b2"], 5.0)
    assert epochs_asked(leader) == [2, 0]
    assert not [e for e in setup.world.events("f") if isinstance(e.body, Truncated)]  # no record went


def test_fetch_divergence_makes_the_follower_truncate() -> None:
    # Under truncate-to-hw the epoch lookup is skipped; the leader's divergence answer
    # on the fetch still brings the follower back in line.
    s = Setup("truncate-to-hw")
    try:
        p = s.follower(recs((0, "a0"), (1, "b1"), (1, "b2")), high_watermark=2, leader_epoch=2)
        leader = ScriptedLeader(recs((0, "a0"), (2, "c1")), epoch=2, high_watermark=2)
        s.serve(leader)
        s.fetchers.add(p)
        assert s.world.run_until(lambda: s.values() == ["a0", "c1"], 5.0)
        reasons = [e.body.reason for e in s.world.events("f") if isinstance(e.body, Truncated)]
        assert reasons == ["high_watermark", "diverging_epoch"]
        assert not any(isinstance(m, OffsetForLeaderEpochRequest) for m in leader.requests)
    finally:
        s.world.close()


def test_follower_ahead_of_the_leaders_log_end_truncates_to_it() -> None:
    s = Setup("truncate-to-hw")
    try:
        p = s.follower(recs((0, "a0"), (0, "a1"), (0, "a2")), high_watermark=3, leader_epoch=1)
        leader = ScriptedLeader(recs((0, "a0")), epoch=1, high_watermark=1)
        s.serve(leader)
        s.fetchers.add(p)
        assert s.world.run_until(lambda: s.values() == ["a0"], 5.0)
    finally:
        s.world.close()


def test_fenced_fetches_are_retried_and_a_new_epoch_stops_the_old_fetcher(setup: Setup) -> None:
    p = setup.follower(recs((0, "a0")), high_watermark=1, leader_epoch=1)
    leader = ScriptedLeader(recs((0, "a0"), (5, "z")), epoch=5, high_watermark=2)
    setup.serve(leader)
    setup.fetchers.add(p)
    setup.world.run_for(1.0)
    assert setup.values() == ["a0"]  # every fetch of epoch 1 is fenced by the epoch-5 leader
    fenced = leader.fetches
    assert len(fenced) >= 3 and all(m.current_leader_epoch == 1 for m in fenced)
    setup.state(leader=1, epoch=5)  # the controller's word arrives
    assert setup.world.run_until(lambda: setup.values() == ["a0", "z"], 5.0)


def test_partitions_followed_from_one_leader_share_one_fetch(setup: Setup) -> None:
    states = tuple(PartitionState("t", n, 1, 1, (1, 2), 0, (1, 2), 1) for n in (0, 1, 2))
    setup.world.run(setup.replicas.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, 0, states, (BrokerInfo(1, "l"),))))
    leader = ScriptedLeader(recs((1, "a0"), (1, "a1")), epoch=1, high_watermark=2)
    setup.serve(leader)
    assert setup.world.run_until(lambda: all(
        [r.value for r in setup.replicas.get("t", n).read(0, 10)] == ["a0", "a1"]  # type: ignore[union-attr]
        for n in (0, 1, 2)), 5.0)
    fetches = [m for m in leader.requests if isinstance(m, ReplicaFetchRequest)]
    assert fetches and max(len(m.partitions) for m in fetches) == 3
    setup.world.run_for(2.0)  # idle: about one request per long poll, not one per partition
    idle = [m for m in leader.requests if isinstance(m, ReplicaFetchRequest)]
    assert all(len(m.partitions) == 3 for m in idle[-3:])
    # Each partition's entry is reused between rounds, but never once its log moved on.
    assert [(w.offset, w.last_fetched_epoch) for w in fetches[0].partitions] == [(0, NO_EPOCH)] * 3
    assert [(w.offset, w.last_fetched_epoch) for w in idle[-1].partitions] == [(2, 1)] * 3


def follower_with_history(setup: Setup, partition: int) -> Partition:
    """A follower of broker 3 in epoch 0 holding a0 (replicated) and b1 (never replicated)."""
    setup.replicas.metadata.remember_brokers(BROKERS)
    setup.replicas.start_replica("t", partition)
    p = setup.replicas.get("t", partition)
    assert p is not None
    p.make_follower(PartitionState("t", partition, 3, 0, (1, 2), 0, (1, 2), 1))
    p.log.append_as_follower(recs((0, "a0"), (0, "b1")))
    p.high_watermark = 1
    return p


def fail_over_three_partitions(setup: Setup, leader: ScriptedLeader) -> None:
    """Partitions 0-2, each holding a0 b1 from epoch 0, follow ``leader`` (a0 c1, epoch 2)
    from one LeaderAndIsr, as after a failover; waits until each has truncated and caught up."""
    partitions = [follower_with_history(setup, n) for n in (0, 1, 2)]
    setup.serve(leader)
    states = tuple(PartitionState("t", n, 1, 2, (1, 2), 0, (1, 2), 1) for n in (0, 1, 2))
    setup.world.run(setup.replicas.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, 0, states, BROKERS)))
    assert setup.world.run_until(lambda: all(
        [r.value for r in p.read(0, 10)] == ["a0", "c1"] for p in partitions), 5.0)


def test_partitions_truncating_at_once_ask_their_leader_in_one_request(setup: Setup) -> None:
    # After a failover a broker follows many partitions of one new leader at once: one
    # OffsetForLeaderEpoch request carries them all (Kafka's fetcher thread), not one each.
    leader = ScriptedLeader(recs((0, "a0"), (2, "c1")), epoch=2, high_watermark=2)
    fail_over_three_partitions(setup, leader)
    asked = [m for m in leader.requests if isinstance(m, OffsetForLeaderEpochRequest)]
    assert len(asked) == 1 and asked[0].replica_id == 2
    assert [(q.partition, q.leader_epoch, q.current_leader_epoch) for q in asked[0].partitions] == [
        (0, 0, 2), (1, 0, 2), (2, 0, 2)]


class LeaderRefusingOnce(ScriptedLeader):
    """Answers partition 1's first epoch question with an error, as a leader still becoming leader."""

    async def handle(self, sender: str, message: Any) -> Any:
        response = await super().handle(sender, message)
        if isinstance(message, OffsetForLeaderEpochRequest) and len(self.requests) == 1:
            return OffsetForLeaderEpochResponse(None, tuple(
                EpochEnd(e.topic, e.partition, Errors.NOT_LEADER) if e.partition == 1 else e
                for e in response.partitions))
        return response


def test_a_partition_refused_in_a_shared_request_asks_again_alone(setup: Setup) -> None:
    leader = LeaderRefusingOnce(recs((0, "a0"), (2, "c1")), epoch=2, high_watermark=2)
    fail_over_three_partitions(setup, leader)
    asked = [[q.partition for q in m.partitions] for m in leader.requests
             if isinstance(m, OffsetForLeaderEpochRequest)]
    assert asked == [[0, 1, 2], [1]]
    # The other two fetch before partition 1 asks again: a refusal holds back only its own partition.
    asked_again = [i for i, m in enumerate(leader.requests) if isinstance(m, OffsetForLeaderEpochRequest)][1]
    assert any(isinstance(m, ReplicaFetchRequest) and [w.partition for w in m.partitions] == [0, 2]
               for m in leader.requests[:asked_again])


def test_a_leader_that_gives_no_answer_is_retried_after_doubling_waits(setup: Setup) -> None:
    # Kafka's replica.fetch.backoff.ms: a dead leader of thousands of partitions is not asked
    # for all of them ten times a second; once it answers, fetching is back to its pace.
    p = setup.follow_without_fetching(leader=1, epoch=1)
    asked: list[float] = []
    answering = False
    leader = ScriptedLeader(recs((1, "a0")), epoch=1, high_watermark=1)

    async def broken_broker(sender: str, message: Any) -> Any:
        if isinstance(message, ReplicaFetchRequest) and not answering:
            asked.append(setup.world.now())
            return ReplicaFetchResponse(Errors.BROKER_FENCED, ())
        return await leader.handle(sender, message)

    setup.world.run(setup.leader_runtime.network.serve(broken_broker))
    setup.fetchers.add(p)
    setup.world.run_for(8.0)
    gaps = [round(b - a, 1) for a, b in zip(asked, asked[1:])]
    assert gaps[:5] == [0.1, 0.2, 0.4, 0.8, 1.0] and set(gaps[5:]) == {1.0}, gaps
    answering = True
    assert setup.world.run_until(lambda: setup.values() == ["a0"], 1.5)


# (follower's records and HW, leader's records and HW, the log the follower ends with): a
# tail of an epoch the leader never had; an epoch the follower has and the leader lacks,
# two rounds deep; an epoch the follower led without appending (explore seed 9757).
DIVERGED = [
    (recs((0, "a0"), (0, "a1"), (1, "b2")), 2, recs((0, "a0"), (0, "a1"), (2, "c2"), (2, "c3")), 4,
     ["a0", "a1", "c2", "c3"]),
    (recs((0, "a0"), (3, "d1"), (3, "d2")), 1, recs((0, "a0"), (0, "a1"), (2, "c2")), 3, ["a0", "a1", "c2"]),
    (recs((0, "a0"), (0, "a1")), 2, recs((0, "a0"), (0, "a1"), (1, "b2")), 3, ["a0", "a1", "b2"]),
]


@pytest.mark.parametrize(("own", "own_hw", "leaders", "leader_hw", "expected"), DIVERGED,
                         ids=["unreplicated-tail", "missing-epoch", "empty-epoch"])
def test_at_truncate_on_fetch_the_follower_truncates_on_the_fetch_answer_alone(
        own: list[Record], own_hw: int, leaders: list[Record], leader_hw: int, expected: list[str]) -> None:
    # KAFKA-10554: no OffsetsForLeaderEpoch round trip; the first fetch names the follower's
    # last epoch, and the leader's answer says where the logs part.
    s = Setup(protocol=ibp.TRUNCATE_ON_FETCH)
    try:
        p = s.follower(own, high_watermark=own_hw, leader_epoch=4)
        if expected[-1] == "b2":
            p.log.epoch_cache.assign(2, 2)  # led epoch 2 from offset 2, appended nothing
        last_epoch = p.log.last_epoch
        leader = ScriptedLeader(leaders, epoch=4, high_watermark=leader_hw)
        s.serve(leader)
        s.fetchers.add(p)
        assert s.world.run_until(lambda: s.values() == expected, 5.0)
        assert not any(isinstance(m, OffsetForLeaderEpochRequest) for m in leader.requests)
        first = leader.fetches[0]
        assert (first.offset, first.last_fetched_epoch) == (len(own), last_epoch)
        truncated = [e.body for e in s.world.events("f") if isinstance(e.body, Truncated)]
        assert {t.reason for t in truncated} <= {"diverging_epoch"}
        assert p.high_watermark == leader_hw
        # Nothing diverges any more: the follower's later fetches are answered with records or
        # nothing, and it stays in step.
        s.world.run_for(2.0)
        assert s.values() == expected
    finally:
        s.world.close()
