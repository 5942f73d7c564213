"""Controller-side protocol variants, each shown by the exact sequence that exposes its flaw.

* ``no-controller-epoch-check`` (KAFKA-6082): a controller that stalled in the middle of an
  event (a GC pause) is deposed; when it wakes it finishes its decision. With the epoch
  check its write is refused and it resigns; without it, the deposed controller's decision
  lands in ZooKeeper, where it contradicts what the brokers were told by the new controller.
  That alone loses nothing: every controller write is also conditional on the partition state
  node's version, so the zombie decides on the freshest state, only shrinks the ISR and picks
  its leader from it (and a leader that then loses a conditional ISR write fences itself).
  Node versions restart at 0 when a node is recreated, though: if the topic is deleted and
  created again while the zombie stalls, its write, conditional on version 0, lands on the
  new topic's state and names a replica of the old topic, which holds none of the new
  topic's records, as leader with an ISR of itself. The next controller reads that state
  and elects it when it returns; the real in-sync replicas truncate to its empty log and
  every acknowledged record is lost. With the check the same sequence loses nothing.
* ``unclean-election``: the only in-sync replica goes down; with the variant an out-of-sync
  replica becomes leader and acknowledged records are lost; with the fix the partition waits
  offline for the in-sync replica and nothing acknowledged is lost. (It goes down cleanly:
  one that crashed would lead again only after catching up, which no one else can offer it;
  ``test_unclean_shutdown`` shows that case.)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from controller_fixtures import SimBrokerCluster, StubCluster

from floodmark.checkers.white_box.epoch_invariants import stale_controller_writes
from floodmark.contracts.node_events import ControllerResigned
from floodmark.reference.client.consumer import Consumer
from floodmark.reference.client.producer import Producer
from floodmark.reference.controller.controller import ControllerConfig
from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=29)


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

    async def stalled(updates: Any, **kw: Any) -> Any:
        await release.wait()
        return await original(updates, **kw)
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
                if isinstance(e.body, ControllerResigned) and e.body.controller_epoch == 1]
    assert resigned


def test_the_zombies_write_breaks_the_controller_fencing_invariant(world: SimWorld) -> None:
    """What the invariants checker sees in the node events: the deposed controller's write,
    ordered by zxid after its successor's election; with the check there is no such write."""
    cluster, _, _ = zombie_sequence(world, "no-controller-epoch-check")
    found = stale_controller_writes({b.node: cluster.world.events(b.node) for b in cluster.brokers.values()})
    assert [(a.type, a.details["controller_epoch"]) for a in found] == [("stale-controller-write", 1)]


@pytest.mark.sim_world(seed=29)
def test_with_the_epoch_check_no_stale_controller_write_is_seen(world: SimWorld) -> None:
    cluster, _, _ = zombie_sequence(world, "default")
    assert stale_controller_writes({b.node: cluster.world.events(b.node) for b in cluster.brokers.values()}) == []


def controller_id(world: SimWorld) -> int:
    if world.zk.exists(zk.CONTROLLER) is None:
        return -1
    return zk.decode_controller(world.zk.get(zk.CONTROLLER)[0])


@dataclass(frozen=True)
class RecreatedTopicOutcome:
    zombie: int  # the deposed controller
    b: int  # the old topic's replica the zombie chose; no copy of the new topic's records
    c: int  # the new topic's first leader
    d: int  # its other in-sync replica
    after_zombie: zk.LeaderIsr  # t-0's state once the zombie has woken up
    final: zk.LeaderIsr
    acked: dict[int, str]
    read: dict[int, str]


def recreated_topic_sequence(world: SimWorld, variant: str) -> RecreatedTopicOutcome:
    """A zombie's stale decision on a deleted topic, written on the recreated topic's state."""
    cluster = SimBrokerCluster(world, 5, variant=VARIANTS[variant], log_flush_interval=0.2,
                               high_watermark_checkpoint_interval=0.2)
    cluster.start()
    zombie_id = controller_id(world)
    a, b, c, d = [x for x in sorted(cluster.brokers) if x != zombie_id]
    admin = cluster.admin()
    world.run(admin.create_topic("t", 1, 2, {zk.MIN_INSYNC_REPLICAS: "1"}, assignment={0: (a, b)}))
    assert world.run_until(lambda: world.zk.exists(zk.partition_state_path("t", 0)) is not None, 20.0)
    world.run_for(2.0)
    assert cluster.state("t", 0) == zk.LeaderIsr(a, 0, (a, b), 1, 0)
    # The controller will stall (a GC pause) right before its next ZooKeeper write.
    zombie = cluster.brokers[zombie_id].controller
    release = asyncio.Event()
    decided: list[dict[m.TopicPartition, zk.LeaderIsr]] = []
    original = zombie.zkw.write_states

    async def stalled(updates: Any, **kw: Any) -> Any:
        decided.append(dict(updates))
        await release.wait()
        return await original(updates, **kw)
    zombie.zkw.write_states = stalled
    # 1. a fails; the controller decides that b leads the old t-0 alone, conditionally on
    #    version 0 of its state node, then stalls.
    cluster.crash(a)
    assert world.run_until(lambda: world.zk.exists(zk.broker_path(a)) is None, 30.0)
    world.run_for(0.5)
    assert decided == [{m.TopicPartition("t", 0): zk.LeaderIsr(b, 1, (b,), 1, 0)}]
    # 2. A new controller is elected; t is deleted (b, alive, deletes its copy) and b fails.
    world.run(admin.zk.delete(zk.CONTROLLER))
    assert world.run_until(lambda: controller_id(world) not in (-1, zombie_id), 10.0)
    world.run(admin.delete_topic("t"))
    assert world.run_until(lambda: world.zk.exists(zk.topic_path("t")) is None
                           and world.zk.exists(zk.delete_topic_path("t")) is None, 20.0)
    world.run_for(1.0)
    cluster.crash(b)
    assert world.run_until(lambda: world.zk.exists(zk.broker_path(b)) is None, 30.0)
    # 3. t is created again on c, d and (down) b: its state node starts again at version 0.
    world.run(admin.create_topic("t", 1, 3, {zk.MIN_INSYNC_REPLICAS: "2"}, assignment={0: (c, d, b)}))
    assert world.run_until(lambda: world.zk.exists(zk.partition_state_path("t", 0)) is not None, 20.0)
    world.run_for(2.0)
    assert cluster.state("t", 0) == zk.LeaderIsr(c, 0, (c, d), 2, 0)
    producer = Producer(cluster.client, cluster.bootstrap)
    acked: dict[int, str] = {}
    for i in range(5):
        r = world.run(producer.send("t", 0, f"v{i}"))
        assert r.status == "ok"  # acks=all, committed by the ISR {c, d}
        acked[r.offset] = f"v{i}"  # type: ignore[index]
    # 4. The zombie wakes up and finishes its decision about the old topic.
    release.set()
    world.run_for(2.0)
    after_zombie = cluster.state("t", 0)
    # 5. The next controller failover reads ZooKeeper; then b returns.
    epoch = zk.decode_controller_epoch(world.zk.get(zk.CONTROLLER_EPOCH)[0])
    world.run(admin.zk.delete(zk.CONTROLLER))
    assert world.run_until(lambda: controller_id(world) != -1
                           and zk.decode_controller_epoch(world.zk.get(zk.CONTROLLER_EPOCH)[0]) > epoch, 10.0)
    world.run_for(2.0)
    cluster.restart(b)
    world.run_for(5.0)
    consumer = Consumer(cluster.client, cluster.bootstrap)
    result = world.run(consumer.fetch("t", 0, 0, timeout=10.0))
    assert result.ok, result
    world.run(admin.close())
    return RecreatedTopicOutcome(zombie_id, b, c, d, after_zombie, cluster.state("t", 0), acked,
                                 {r.offset: r.value for r in result.records})


def test_without_the_epoch_check_a_zombie_write_on_a_recreated_topic_loses_acknowledged_records(
        world: SimWorld) -> None:
    out = recreated_topic_sequence(world, "no-controller-epoch-check")
    # The deposed controller's decisions landed on the new topic: only b, which is down, in sync.
    assert (out.after_zombie.controller_epoch, out.after_zombie.isr) == (1, (out.b,))
    assert out.final.leader == out.b  # elected from that ISR when it came back
    lost = {o: v for o, v in out.acked.items() if out.read.get(o) != v}
    assert lost == out.acked and len(lost) == 5  # every acknowledged record is gone


def test_with_the_epoch_check_the_recreated_topic_keeps_every_acknowledged_record(world: SimWorld) -> None:
    out = recreated_topic_sequence(world, "default")
    assert out.after_zombie == zk.LeaderIsr(out.c, 0, (out.c, out.d), 2, 0)  # untouched by the zombie
    assert (out.final.leader, out.final.leader_epoch) == (out.c, 0)
    assert out.read == out.acked
    refused = [e for e in world.events(f"n{out.zombie}")
               if isinstance(e.body, ControllerResigned) and e.body.controller_epoch == 1
               and zk.CONTROLLER_EPOCH in e.body.why]
    assert refused


def unclean_sequence(world: SimWorld, variant: str) -> tuple[SimBrokerCluster, dict[int, str], list[m.Record]]:
    # Logs are flushed every 0.2 s, and the leader below shuts down cleanly, so that it loses
    # no acknowledged byte on its own disk: any loss is the election's doing.
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
    # The only in-sync replica shuts down (its clean shutdown keeps the leadership: no other
    # replica is in sync) and its process exits; the network heals.
    world.run_for(1.0)
    world.run(cluster.brokers[leader].stop())
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
