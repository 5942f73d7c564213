"""The send accumulator: sends of one turn to one partition travel as one batch."""

from __future__ import annotations

import asyncio

import pytest
from controller_fixtures import SimBrokerCluster, sim_broker_cluster_with_topic

from floodmark.reference.client.accumulator import SendAccumulator
from floodmark.reference.client.consumer import Consumer
from floodmark.reference.client.producer import Producer, SendResult
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=5)


@pytest.fixture
def cluster(world: SimWorld) -> SimBrokerCluster:
    return sim_broker_cluster_with_topic(world)


async def send_all(sender: SendAccumulator, sends: list[tuple[int, str]], timeout: float = 10.0) -> list[SendResult]:
    return list(await asyncio.gather(*(sender.send("t", p, v, timeout=timeout) for p, v in sends)))


def test_sends_of_one_turn_share_a_batch_and_each_gets_its_own_offset(
        world: SimWorld, cluster: SimBrokerCluster) -> None:
    sender = SendAccumulator(Producer(cluster.client, cluster.bootstrap))
    first = world.run(send_all(sender, [(0, "a"), (1, "x"), (0, "b"), (0, "c"), (1, "y")]))
    assert sender.batches_sent == 2  # one per partition
    assert [r.status for r in first] == ["ok"] * 5
    assert [(r.partition, r.offset) for r in first] == [(0, 0), (1, 0), (0, 1), (0, 2), (1, 1)]
    later = world.run(send_all(sender, [(0, "d")]))  # a later turn: a batch of its own
    assert sender.batches_sent == 3 and later[0].offset == 3
    consumer = Consumer(cluster.client, cluster.bootstrap)
    read = world.run(consumer.fetch("t", 0, 0))
    assert [(r.offset, r.value) for r in read.records] == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]


def test_every_send_of_a_batch_that_cannot_be_written_shares_its_outcome(
        world: SimWorld, cluster: SimBrokerCluster) -> None:
    sender = SendAccumulator(Producer(cluster.client, cluster.bootstrap))
    world.run(send_all(sender, [(0, "warm-up")]))  # metadata known: the leader is asked
    for broker_id in list(cluster.brokers):
        cluster.crash(broker_id)
    results = world.run(send_all(sender, [(0, "a"), (0, "b")], timeout=1.0))
    assert [r.status for r in results] in (["failed", "failed"], ["unknown", "unknown"])
    assert all(r.offset is None for r in results)


def test_a_caller_that_gives_up_leaves_the_rest_of_its_batch_alone(
        world: SimWorld, cluster: SimBrokerCluster) -> None:
    sender = SendAccumulator(Producer(cluster.client, cluster.bootstrap))

    async def one_gives_up() -> list[SendResult | str]:
        impatient = asyncio.ensure_future(sender.send("t", 0, "gone"))
        patient = asyncio.ensure_future(sender.send("t", 0, "kept"))
        await asyncio.sleep(0)
        impatient.cancel()
        kept = await patient
        return ["cancelled" if impatient.cancelled() else "not cancelled", kept]

    state, kept = world.run(one_gives_up())
    assert state == "cancelled"
    # The batch held both records: the one whose caller left was still written, first.
    assert isinstance(kept, SendResult) and kept.status == "ok" and kept.offset == 1
