"""The send accumulator: sends of one turn (or one linger) to one partition travel as one batch."""

from __future__ import annotations

import asyncio

import pytest
from controller_fixtures import SimBrokerCluster, sim_broker_cluster_with_topic

from floodmark.reference.client.accumulator import MAX_BATCH_RECORDS, SendAccumulator
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


# ---------------------------------------------------------------- linger (Kafka's linger.ms)


async def send_later(sender: SendAccumulator, world: SimWorld, sends: list[tuple[float, str]]
                     ) -> list[tuple[SendResult, float]]:
    """Each (delay after the previous send, value) sent to partition 0 at its moment (no
    delay: in the same turn); each result with the virtual time it came back."""
    async def one(value: str) -> tuple[SendResult, float]:
        result = await sender.send("t", 0, value)
        return result, world.loop.time()

    replies = []
    for delay, value in sends:
        if delay:
            await asyncio.sleep(delay)
        replies.append(asyncio.ensure_future(one(value)))
    return list(await asyncio.gather(*replies))


def test_with_a_linger_sends_at_different_moments_share_a_batch(world: SimWorld, cluster: SimBrokerCluster) -> None:
    sender = SendAccumulator(Producer(cluster.client, cluster.bootstrap), linger=0.05)
    world.run(send_later(sender, world, [(0.0, "warm-up")]))  # metadata known
    assert sender.batches_sent == 1
    started = world.loop.time()
    replies = world.run(send_later(sender, world, [(0.0, "a"), (0.02, "b"), (0.1, "c")]))
    # a and b, 20 ms apart, within the 50 ms linger: one request, consecutive offsets; c,
    # after the linger, a batch of its own.
    assert sender.batches_sent == 3
    assert [(r.status, r.offset) for r, _ in replies] == [("ok", 1), ("ok", 2), ("ok", 3)]
    assert replies[0][1] == replies[1][1] >= started + 0.05  # a waited out the linger, with b
    consumer = Consumer(cluster.client, cluster.bootstrap)
    read = world.run(consumer.fetch("t", 0, 0))
    assert [(r.offset, r.value) for r in read.records] == [(0, "warm-up"), (1, "a"), (2, "b"), (3, "c")]


def test_without_a_linger_only_the_sends_of_one_turn_share_a_batch(world: SimWorld, cluster: SimBrokerCluster) -> None:
    sender = SendAccumulator(Producer(cluster.client, cluster.bootstrap), linger=0.0)
    world.run(send_later(sender, world, [(0.0, "warm-up")]))  # metadata known
    replies = world.run(send_later(sender, world, [(0.0, "a"), (0.0, "b"), (0.001, "c")]))
    assert sender.batches_sent == 3  # a and b in one turn, c a millisecond later
    assert [r.offset for r, _ in replies] == [1, 2, 3]


def test_a_full_batch_goes_without_waiting_out_its_linger(world: SimWorld, cluster: SimBrokerCluster) -> None:
    sender = SendAccumulator(Producer(cluster.client, cluster.bootstrap), linger=0.5)
    world.run(send_later(sender, world, [(0.0, "warm-up")]))
    started = world.loop.time()
    values = [(0.0, f"v{i}") for i in range(MAX_BATCH_RECORDS + 1)]
    replies = world.run(send_later(sender, world, values))
    assert sender.batches_sent == 3
    assert [r.offset for r, _ in replies] == list(range(1, MAX_BATCH_RECORDS + 2))
    assert replies[0][1] < started + 0.5 <= replies[-1][1]  # the full one went at once, the last lingered


def test_a_batch_abandoned_while_it_lingers_fails_its_sends(world: SimWorld, cluster: SimBrokerCluster) -> None:
    sender = SendAccumulator(Producer(cluster.client, cluster.bootstrap), linger=1.0)

    async def abandoned() -> BaseException | None:
        send = asyncio.ensure_future(sender.send("t", 0, "a"))
        await asyncio.sleep(0.1)
        lingering = sender._open[("t", 0)].lingering  # the clients closing cancels their tasks
        assert lingering is not None
        lingering.cancel()
        return (await asyncio.gather(send, return_exceptions=True))[0]

    outcome = world.run(abandoned())
    assert isinstance(outcome, ConnectionResetError) and sender.batches_sent == 0
