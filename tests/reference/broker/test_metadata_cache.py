"""The broker's metadata cache (floodmark.reference.broker.metadata_cache)."""

from __future__ import annotations

from floodmark.reference.broker.metadata_cache import MetadataCache
from floodmark.reference.protocol.messages import (
    LEADER_DURING_DELETE,
    BrokerInfo,
    Errors,
    MetadataRequest,
    PartitionState,
    UpdateMetadataRequest,
)


def update(epoch: int, leader: int, brokers: tuple[int, ...] = (1, 2, 3)) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=1, controller_epoch=epoch,
        brokers=tuple(BrokerInfo(b, f"n{b}", 100 + b) for b in brokers),
        partitions=(PartitionState("t", 0, leader, 4, (leader,), 7, (1, 2, 3), epoch),),
        offline_replicas=(("t", 0, 3),),
    )


def test_describe_answers_from_the_latest_controller_and_ignores_stale_ones() -> None:
    cache = MetadataCache()
    assert cache.update(update(2, leader=2)) is None
    assert cache.update(update(1, leader=1)) == Errors.STALE_CONTROLLER_EPOCH
    response = cache.describe(MetadataRequest(("t", "missing")))
    found = {p.topic: p for p in response.partitions}
    assert found["t"].leader == 2 and found["t"].offline_replicas == (3,)
    assert found["missing"].error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert [b.broker_id for b in response.brokers] == [1, 2, 3] and response.controller_id == 1
    assert cache.address_of(2) == "n2"


def test_a_leader_that_is_not_a_live_broker_is_reported_unavailable() -> None:
    cache = MetadataCache()
    cache.update(update(1, leader=3, brokers=(1, 2)))
    (partition,) = cache.describe(MetadataRequest()).partitions
    assert partition.leader == -1 and partition.error == Errors.LEADER_NOT_AVAILABLE


def test_a_partition_sent_as_being_deleted_leaves_the_cache() -> None:
    cache = MetadataCache()
    cache.update(update(1, leader=2))
    cache.update(update(1, leader=LEADER_DURING_DELETE))
    (partition,) = cache.describe(MetadataRequest(("t",))).partitions
    assert partition.error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert cache.describe(MetadataRequest()).partitions == ()


def test_an_answer_given_once_changes_with_the_cache() -> None:
    cache = MetadataCache()
    cache.update(update(1, leader=3, brokers=(1, 2)))
    (before,) = cache.describe(MetadataRequest(("t",))).partitions
    assert before.leader == -1  # broker 3 is not known to be live
    cache.remember_brokers((BrokerInfo(3, "n3", 103),))
    (learnt,) = cache.describe(MetadataRequest(("t",))).partitions
    assert learnt.leader == 3 and learnt.error is None
    cache.update(update(2, leader=2))
    (moved,) = cache.describe(MetadataRequest(("t",))).partitions
    assert moved.leader == 2 and cache.describe(MetadataRequest()).partitions == (moved,)
    assert cache.update(update(1, leader=1)) == Errors.STALE_CONTROLLER_EPOCH  # ignored: same answer
    assert cache.describe(MetadataRequest(("t",))).partitions == (moved,)
