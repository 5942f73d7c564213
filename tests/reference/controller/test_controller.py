"""Controller election, epochs, failover and fencing of a stale controller (sim world)."""

from __future__ import annotations

import pytest
from controller_fixtures import StubBroker, StubCluster

from floodmark.contracts.node_events import ControllerElected, ControllerResigned
from floodmark.reference.controller.zk_writes import ControllerMoved
from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.runtime import SetDataOp
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=7)


def three_partitions(cluster: StubCluster) -> None:
    cluster.create_topic("t0", {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}, **{"min.insync.replicas": "2"})


def test_exactly_one_controller_is_elected_and_epoch_starts_at_one(world: SimWorld) -> None:
    cluster = StubCluster(world, 3)
    cluster.start()
    world.run_for(2.0)
    active = [b for b in cluster.brokers.values() if b.controller and b.controller.is_active]
    assert len(active) == 1
    assert cluster.epoch() == 1
    elected = [e.body for b in cluster.brokers.values() for e in world.events(b.node)
               if isinstance(e.body, ControllerElected)]
    assert [(e.controller_epoch, e.broker) for e in elected] == [(1, active[0].broker_id)]
    assert elected[0].zxid is not None and elected[0].zxid > 0  # the election's place in ZooKeeper's order
    # The others know who the controller is.
    for b in cluster.brokers.values():
        assert b.controller is not None and b.controller.active_controller_id == active[0].broker_id


def test_new_topic_gets_leaders_and_is_new_leader_and_isr(world: SimWorld) -> None:
    cluster = StubCluster(world, 3)
    cluster.start()
    three_partitions(cluster)
    for p, leader in ((0, 1), (1, 2), (2, 3)):
        state = cluster.state("t0", p)
        assert (state.leader, state.leader_epoch, state.controller_epoch) == (leader, 0, 1)
        assert sorted(state.isr) == [1, 2, 3]
    world.run_for(1.0)
    for b in cluster.brokers.values():
        sent = [p for r in b.requests(m.LeaderAndIsrRequest) for p in r.partitions]
        assert {p.partition for p in sent} == {0, 1, 2}
        assert all(p.is_new for p in sent)
        assert b.requests(m.UpdateMetadataRequest)


def test_controller_failover_bumps_epoch_and_sends_init_state_to_every_live_broker(world: SimWorld) -> None:
    cluster = StubCluster(world, 3)
    cluster.start()
    three_partitions(cluster)
    old = cluster.controller_id()
    cluster.crash(old)
    assert world.run_until(lambda: cluster.controller_id() not in (-1, old), 20.0)
    world.run_for(1.0)
    assert cluster.epoch() == 2
    new = cluster.active()
    assert new.controller is not None and new.controller.epoch == 2
    for b in cluster.brokers.values():
        if b.broker_id == old:
            continue
        init = [r for r in b.requests(m.LeaderAndIsrRequest) if r.is_init]
        assert init and all(r.controller_epoch == 2 for r in init)
        assert {p.partition for p in init[0].partitions} == {0, 1, 2}
    # The old controller led partition old-1; it moved to an in-sync live replica.
    for p in range(3):
        state = cluster.state("t0", p)
        assert state.leader != old and old not in state.isr


def test_every_request_carries_the_controller_epoch(world: SimWorld) -> None:
    cluster = StubCluster(world, 3)
    cluster.start()
    three_partitions(cluster)
    cluster.crash(cluster.controller_id())
    world.run_until(lambda: cluster.controller_id() != -1, 20.0)
    world.run_for(1.0)
    for b in cluster.brokers.values():
        epochs = [r.controller_epoch for r in b.received]
        assert epochs == sorted(epochs) and set(epochs) <= {1, 2}


def depose(world: SimWorld, cluster: StubCluster) -> StubBroker:
    """Elect a new controller while the old one is paused (its session stays alive)."""
    zombie = cluster.active()
    world.pause(zombie.node)
    world.run(cluster.admin_zk.delete(zk.CONTROLLER))  # type: ignore[union-attr]
    assert world.run_until(lambda: cluster.epoch() == 2 and cluster.controller_id() != -1, 4.0)
    world.resume(zombie.node)
    assert zombie.controller is not None and zombie.controller.is_active  # has not noticed yet
    return zombie


def test_zombie_controller_write_is_rejected_by_the_epoch_check(world: SimWorld) -> None:
    cluster = StubCluster(world, 3)
    cluster.start()
    three_partitions(cluster)
    zombie = depose(world, cluster)
    assert zombie.controller is not None
    before = cluster.state("t0", 0)
    ops = [SetDataOp(zk.partition_state_path("t0", 0),
                     zk.encode_leader_isr(zk.LeaderIsr(3, 9, (3,), 1)), before.zk_version)]
    with pytest.raises(ControllerMoved):
        world.run(zombie.controller.zkw.multi(ops))
    assert cluster.state("t0", 0) == before
    world.run_for(2.0)
    assert not zombie.controller.is_active
    assert cluster.active() is not zombie


def test_controller_resigns_when_its_session_is_lost_and_another_takes_over(world: SimWorld) -> None:
    cluster = StubCluster(world, 3)
    cluster.start()
    three_partitions(cluster)
    old = cluster.active()
    world.pause(old.node)
    assert world.run_until(lambda: cluster.controller_id() not in (-1, old.broker_id), 30.0)
    world.resume(old.node)
    world.run_for(5.0)
    assert old.controller is not None and not old.controller.is_active
    resigned = [e.body for e in world.events(old.node) if isinstance(e.body, ControllerResigned)]
    assert resigned and resigned[0].controller_epoch == 1


def test_stopping_the_controller_hands_over_without_waiting_for_session_expiry(world: SimWorld) -> None:
    cluster = StubCluster(world, 3)
    cluster.start()
    old = cluster.active()
    assert old.controller is not None
    world.run(old.controller.stop())
    start = world.now()
    assert world.run_until(lambda: cluster.controller_id() not in (-1, old.broker_id), 5.0)
    assert world.now() - start < 1.0  # far below the 6 s session timeout
    assert cluster.epoch() == 2


def test_a_controller_that_lost_track_of_its_writes_releases_its_node_and_is_elected_again(world: SimWorld) -> None:
    cluster = StubCluster(world, 1)
    cluster.start()
    only = cluster.active()
    assert only.controller is not None
    assert world.run_until(lambda: only.controller is not None and only.controller.is_active, 5.0)
    # A connection loss leaves the outcome of the last write unknown: the controller resigns
    # but its ephemeral node (and session) survive; it must not block the election forever.
    world.run(only.controller._resign("zookeeper connection lost"))
    only.controller.enqueue("elect", only.controller._elect)
    assert world.run_until(lambda: only.controller is not None and only.controller.is_active, 5.0)
    assert cluster.epoch() == 2
