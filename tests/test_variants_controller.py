"""Controller-side protocol variants, each shown by the exact sequence that exposes its flaw.

* ``no-controller-epoch-check`` (KAFKA-6082): a controller that stalled in the middle of an
  event (a GC pause) is deposed; when it wakes it finishes its decision. With the epoch
  check its write is refused and it resigns; without it, the deposed controller's decision
  lands in ZooKeeper, where it contradicts what the brokers were told by the new controller.
* ``unclean-election``: the only in-sync replica dies; with the variant an out-of-sync
  replica becomes leader and acknowledged records are lost; with the fix the partition waits
  offline for the in-sync replica and nothing acknowledged is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from controller_fixtures import SimBrokerCluster, StubCluster

from floodmark.reference import messages as m
from floodmark.reference import zk_layout as zk
from floodmark.reference.consumer import Consumer
from floodmark.reference.controller import ControllerConfig
from floodmark.reference.producer import Producer
from floodmark.reference.sim import SimWorld
from floodmark.reference.variants import VARIANTS


@pytest.fixture
def world() -> Iterator[SimWorld]:
    w = SimWorld(seed=29)
    yield w
    w.close()


def zombie_sequence(world: SimWorld, variant: str) -> tuple[StubCluster, int, int]:
    cluster = StubCluster(world, 4, ControllerConfig(variant=VARIANTS[variant], heartbeat_timeout=None))
    cluster.start()
    zombie = cluster.active()
    b, c, d = [x for x in sorted(cluster.brokers) if x != zombie.broker_id]
    cluster.create_topic("t", {0: (b, c, d)})
    # The controller will stall (a GC pause) right before its next ZooKeeper write.
    assert zombie.controller is not None
    writer = zombie.controller.zkw
    release = asyncio.Event()
    original = writer.write_states

    async def stalled(updates: Any) -> Any:
        await release.wait()
        return await original(updates)
    writer.write_states = stalled  # type: ignore[method-assign]
    # 1. b fails; the controller decides to move t-0 to c, then stalls before writing.
    cluster.crash(b)
    assert world.run_until(lambda: world.zk.exists(zk.broker_path(b)) is None, 30.0)
    world.run_for(0.5)
    # 2. b comes back as a new incarnation, and a new controller is elected meanwhile.
    cluster.restart(b)
    world.run(cluster.admin_zk.delete(zk.CONTROLLER))  # type: ignore[union-attr]
    assert world.run_until(lambda: cluster.controller_id() not in (-1, zombie.broker_id), 10.0)
    world.run_for(1.0)
    # 3. The zombie wakes up and finishes its stale decision.
    release.set()
    world.run_for(2.0)
    return cluster, b, c


def test_without_the_epoch_check_a_zombie_controller_overwrites_zookeeper(world: SimWorld) -> None:
    cluster, b, c = zombie_sequence(world, "no-controller-epoch-check")
    state = cluster.state("t", 0)
    assert cluster.epoch() == 2
    assert (state.leader, state.controller_epoch) == (c, 1)  # written by the deposed controller
    # ... but every broker follows what the current controller told it: b leads.
    for broker in cluster.brokers.values():
        told = broker.leader_epochs.get(m.TopicPartition("t", 0))
        if told is not None:
            assert told.leader == b


def test_with_the_epoch_check_the_zombie_is_refused_and_resigns(world: SimWorld) -> None:
    cluster, b, c = zombie_sequence(world, "default")
    state = cluster.state("t", 0)
    assert (state.leader, state.leader_epoch, state.zk_version) == (b, 0, 0)  # untouched by the zombie
    for broker in cluster.brokers.values():
        told = broker.leader_epochs.get(m.TopicPartition("t", 0))
        if told is not None:
            assert told.leader == state.leader and told.leader_epoch == state.leader_epoch
    resigned = [e for broker in cluster.brokers.values() for e in cluster.world.events(broker.node)
                if e.kind == "controller_resigned" and e["controller_epoch"] == 1]
    assert resigned


def unclean_sequence(world: SimWorld, variant: str) -> tuple[SimBrokerCluster, dict[int, str], list[m.Record]]:
    # Logs are flushed every 0.2 s so that the crash below loses no acknowledged byte on
    # the leader's own disk: any loss is the election's doing.
    cluster = SimBrokerCluster(world, 3, variant=VARIANTS[variant], replica_lag_time_max=2.0,
                               isr_check_interval=0.5, log_flush_interval=0.2,
                               high_watermark_checkpoint_interval=0.2)
    cluster.start()
    controller = zk.decode_controller(world.zk.get(zk.CONTROLLER)[0])
    leader, follower = [x for x in (1, 2, 3) if x != controller]
    admin = cluster.admin()
    world.run(admin.create_topic("t", 1, 2, {zk.MIN_INSYNC_REPLICAS: "1"}, assignment={0: (leader, follower)}))
    assert world.run_until(lambda: world.zk.exists(zk.partition_state_path("t", 0)) is not None
                           and len(cluster.state("t", 0).isr) == 2, 20.0)
    producer = Producer(cluster.client, cluster.bootstrap)
    acked: dict[int, str] = {}
    for i in range(5):
        r = world.run(producer.send("t", 0, f"in-sync-{i}"))
        assert r.status == "ok"
        acked[r.offset] = f"in-sync-{i}"  # type: ignore[index]
    # The follower falls behind (cut off from the leader) and leaves the ISR.
    world.cut(f"n{follower}", f"n{leader}")
    world.cut(f"n{leader}", f"n{follower}")
    assert world.run_until(lambda: cluster.state("t", 0).isr == (leader,), 30.0)
    for i in range(5):
        r = world.run(producer.send("t", 0, f"leader-only-{i}"))
        assert r.status == "ok"  # min.insync.replicas=1 allows it
        acked[r.offset] = f"leader-only-{i}"  # type: ignore[index]
    # The only in-sync replica dies; the network heals.
    world.run_for(1.0)
    cluster.crash(leader)
    world.heal()
    world.run_for(15.0)
    if variant == "default":
        assert cluster.state("t", 0).leader == zk.NO_LEADER  # waits for the in-sync replica
        cluster.restart(leader)
        assert world.run_until(lambda: cluster.state("t", 0).leader == leader, 30.0)
        world.run_for(2.0)
    consumer = Consumer(cluster.client, cluster.bootstrap)
    result = world.run(consumer.fetch("t", 0, 0, timeout=10.0))
    assert result.ok, result
    return cluster, acked, list(result.records)


def test_unclean_election_loses_acknowledged_records(world: SimWorld) -> None:
    cluster, acked, records = unclean_sequence(world, "unclean-election")
    assert cluster.state("t", 0).leader != zk.NO_LEADER
    read = {r.offset: r.value for r in records}
    lost = {o: v for o, v in acked.items() if read.get(o) != v}
    assert sorted(lost.values()) == [f"leader-only-{i}" for i in range(5)]


def test_clean_election_keeps_every_acknowledged_record(world: SimWorld) -> None:
    cluster, acked, records = unclean_sequence(world, "default")
    assert {r.offset: r.value for r in records} == acked
