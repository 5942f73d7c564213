"""KIP-112 log directory failure as the controller handles it, and ISR change notifications."""

from __future__ import annotations

import pytest
from controller_fixtures import StubCluster

from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=13)


def notify_log_dir_failure(world: SimWorld, cluster: StubCluster, broker: int) -> None:
    world.run(cluster.admin_zk.create(  # type: ignore[union-attr]
        zk.log_dir_event_path(zk.LOG_DIR_EVENT_PREFIX), zk.encode_log_dir_event(broker), sequential=True))


def test_replicas_on_a_failed_dir_go_offline_and_leadership_moves(world: SimWorld) -> None:
    cluster = StubCluster(world, 4)
    cluster.start()
    a, b, c = [x for x in sorted(cluster.brokers) if x != cluster.controller_id()]
    cluster.create_topic("t", {0: (a, b, c), 1: (a, c, b), 2: (b, a, c)})
    lost = {m.TopicPartition("t", 0), m.TopicPartition("t", 2)}  # t-1 sits on a's good dir
    cluster.brokers[a].offline = set(lost)
    notify_log_dir_failure(world, cluster, a)
    assert world.run_until(lambda: cluster.state("t", 0).leader == b, 10.0)
    assert a not in cluster.state("t", 0).isr and a not in cluster.state("t", 2).isr
    assert cluster.state("t", 1).leader == a and a in cluster.state("t", 1).isr  # keeps serving
    assert world.run_until(lambda: world.zk.children(zk.LOG_DIR_EVENTS) == [], 5.0)
    world.run_for(1.0)
    metadata = cluster.brokers[c].requests(m.UpdateMetadataRequest)[-1]
    assert ("t", 0, a) in metadata.offline_replicas and ("t", 1, a) not in metadata.offline_replicas
    # a cannot lead t-0 again while its replica is offline, even if b fails.
    cluster.crash(b)
    assert world.run_until(lambda: cluster.state("t", 0).leader == c, 20.0)


def test_new_controller_relearns_offline_replicas_from_init_answers(world: SimWorld) -> None:
    cluster = StubCluster(world, 4)
    cluster.start()
    a, b, c = [x for x in sorted(cluster.brokers) if x != cluster.controller_id()]
    cluster.create_topic("t", {0: (a, b, c)})
    cluster.brokers[a].offline = {m.TopicPartition("t", 0)}
    notify_log_dir_failure(world, cluster, a)
    assert world.run_until(lambda: cluster.state("t", 0).leader == b, 10.0)
    old = cluster.controller_id()
    cluster.crash(old)
    assert world.run_until(lambda: cluster.controller_id() not in (-1, old), 20.0)
    world.run_for(1.0)
    new = cluster.active().controller
    assert new is not None and m.TopicPartition("t", 0) in new.ctx.offline_replicas.get(a, set())


def test_isr_change_notifications_refresh_metadata(world: SimWorld) -> None:
    cluster = StubCluster(world, 3)
    cluster.start()
    a, b = [x for x in sorted(cluster.brokers) if x != cluster.controller_id()]
    cluster.create_topic("t", {0: (a, b)})
    s = cluster.state("t", 0)
    world.run(cluster.admin_zk.set(  # type: ignore[union-attr]
        zk.partition_state_path("t", 0),
        zk.encode_leader_isr(zk.LeaderIsr(a, s.leader_epoch, (a,), s.controller_epoch)), s.zk_version))
    world.run(cluster.admin_zk.create(  # type: ignore[union-attr]
        zk.isr_change_path(zk.ISR_CHANGE_PREFIX), zk.encode_partition_list([m.TopicPartition("t", 0)]),
        sequential=True))
    assert world.run_until(lambda: world.zk.children(zk.ISR_CHANGES) == [], 5.0)
    world.run_for(1.0)
    last = cluster.brokers[b].requests(m.UpdateMetadataRequest)[-1]
    assert [p.isr for p in last.partitions if p.topic == "t"] == [(a,)]
