"""Topic lifecycle through ZooKeeper: create, describe, add/remove partitions, delete, preferred election."""

from __future__ import annotations

import pytest
from controller_fixtures import StubCluster

from floodmark.reference.client.admin import Admin, AdminError, place_replicas
from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=5)


@pytest.fixture
def cluster(world: SimWorld) -> StubCluster:
    c = StubCluster(world, 3)
    c.start()
    return c


@pytest.fixture
def admin(cluster: StubCluster) -> Admin:
    assert cluster.admin_zk is not None
    return Admin(cluster.admin_rt, cluster.admin_zk)


def test_placement_is_i_plus_j_mod_n() -> None:
    assert place_replicas([3, 1, 2], 4, 2) == {0: (1, 2), 1: (2, 3), 2: (3, 1), 3: (1, 2)}
    assert place_replicas([1, 2, 3], 2, 3, first_partition=4) == {4: (2, 3, 1), 5: (3, 1, 2)}
    with pytest.raises(AdminError, match="larger than the 2 live brokers"):
        place_replicas([1, 2], 1, 3)


def test_create_describe_and_reject_bad_topics(world: SimWorld, cluster: StubCluster, admin: Admin) -> None:
    world.run(admin.create_topic("t", 3, 3, {"min.insync.replicas": "2"}))
    assert world.run_until(lambda: all(cluster.has_state("t", p) for p in range(3)), 10.0)
    (described,) = world.run(admin.describe_topics(["t"]))
    assert described.config == {"min.insync.replicas": "2"}
    assert [(p.partition, p.replicas, p.leader, p.leader_epoch) for p in described.partitions] == [
        (0, (1, 2, 3), 1, 0), (1, (2, 3, 1), 2, 0), (2, (3, 1, 2), 3, 0)]
    with pytest.raises(AdminError, match="already exists"):
        world.run(admin.create_topic("t", 1, 1))
    with pytest.raises(AdminError, match="exceeds the replication factor"):
        world.run(admin.create_topic("u", 1, 1, {"min.insync.replicas": "2"}))
    with pytest.raises(zk.LayoutError, match="invalid topic name"):
        world.run(admin.create_topic("a/b", 1, 1))


def test_describe_reports_dead_replicas_offline(world: SimWorld, cluster: StubCluster, admin: Admin) -> None:
    world.run(admin.create_topic("t", 1, 3))
    assert world.run_until(lambda: cluster.has_state("t", 0), 10.0)
    victim = next(b for b in (1, 2, 3) if b != cluster.controller_id())
    cluster.crash(victim)
    assert world.run_until(lambda: victim not in cluster.state("t", 0).isr, 20.0)
    (described,) = world.run(admin.describe_topics(["t"]))
    assert described.partitions[0].offline_replicas == (victim,)


def test_assigned_partitions_are_zookeepers_not_a_lagging_brokers(world: SimWorld, cluster: StubCluster,
                                                                   admin: Admin) -> None:
    """What the harness's wait for whole ISRs wants: the assignment, whatever the metadata says yet."""
    world.run(admin.create_topic("t", 1, 2))
    assert world.run(admin.assigned_partitions(["t", "missing"])) == [m.TopicPartition("t", 0)]
    world.run(admin.alter_partitions("t", 3))  # read back at once: no controller has acted on it
    assert world.run(admin.assigned_partitions(["t"])) == [m.TopicPartition("t", p) for p in range(3)]
    assert world.run(admin.assigned_partitions([])) == []


def test_adding_and_removing_partitions(world: SimWorld, cluster: StubCluster, admin: Admin) -> None:
    world.run(admin.create_topic("t", 2, 2))
    assert world.run_until(lambda: cluster.has_state("t", 1), 10.0)
    world.run(admin.alter_partitions("t", 4))
    assert world.run_until(lambda: cluster.has_state("t", 3), 10.0)
    assert cluster.assignment("t").partitions[2] == (3, 1)  # (i + j) mod n continues
    assert cluster.assignment("t").partitions[3] == (1, 2)
    world.run(admin.alter_partitions("t", 1))
    assert world.run_until(lambda: not cluster.has_state("t", 1), 10.0)
    assert world.zk.children(zk.partitions_path("t")) == ["0"]
    world.run_for(1.0)
    deleted = {tp for b in cluster.brokers.values() for r in b.requests(m.StopReplicaRequest) if r.delete
               for tp in r.partitions}
    assert deleted == {m.TopicPartition("t", p) for p in (1, 2, 3)}


def test_delete_topic_stops_replicas_and_removes_its_nodes(world: SimWorld, cluster: StubCluster, admin: Admin) -> None:
    world.run(admin.create_topic("t", 2, 3))
    assert world.run_until(lambda: cluster.has_state("t", 1), 10.0)
    world.run(admin.delete_topic("t"))
    assert world.run_until(lambda: world.zk.exists(zk.topic_path("t")) is None, 10.0)
    assert world.run_until(lambda: world.zk.children(zk.DELETE_TOPICS) == [], 10.0)
    world.run_for(1.0)
    for b in cluster.brokers.values():
        stops = [r for r in b.requests(m.StopReplicaRequest) if r.delete]
        assert stops and set(stops[-1].partitions) == {m.TopicPartition("t", 0), m.TopicPartition("t", 1)}
        # Every broker is told to drop the partitions from its metadata, replica or not.
        deleting = {(s.topic, s.partition) for r in b.requests(m.UpdateMetadataRequest) for s in r.partitions
                    if s.leader == m.LEADER_DURING_DELETE}
        assert deleting == {("t", 0), ("t", 1)}
    with pytest.raises(AdminError, match="does not exist"):
        world.run(admin.delete_topic("t"))
    # The name can be used again.
    world.run(admin.create_topic("t", 1, 1))
    assert world.run_until(lambda: cluster.has_state("t", 0), 10.0)


def test_preferred_replica_election_moves_leadership_back(world: SimWorld, cluster: StubCluster, admin: Admin) -> None:
    c = cluster.controller_id()
    a, b = [x for x in (1, 2, 3) if x != c]
    world.run(admin.create_topic("t", 1, 2, assignment={0: (a, b)}))
    assert world.run_until(lambda: cluster.has_state("t", 0), 10.0)
    cluster.crash(a)
    assert world.run_until(lambda: cluster.state("t", 0).leader == b, 20.0)
    cluster.restart(a)
    world.run_for(2.0)
    assert cluster.state("t", 0).leader == b  # a is back but not in the ISR yet
    s = cluster.state("t", 0)
    world.run(cluster.admin_zk.set(  # type: ignore[union-attr]
        zk.partition_state_path("t", 0),
        zk.encode_leader_isr(zk.LeaderIsr(b, s.leader_epoch, (b, a), s.controller_epoch)), s.zk_version))
    world.run(admin.preferred_replica_election([m.TopicPartition("t", 0)]))
    assert world.run_until(lambda: cluster.state("t", 0).leader == a, 10.0)
    assert world.run_until(lambda: world.zk.exists(zk.PREFERRED_REPLICA_ELECTION) is None, 10.0)


def test_malformed_nodes_are_skipped_and_the_rest_still_works(world: SimWorld, cluster: StubCluster,
                                                              admin: Admin) -> None:
    cluster.write(zk.topic_path("garbage"), b"{not json")
    world.run(admin.create_topic("good", 1, 3))
    assert world.run_until(lambda: cluster.has_state("good", 0), 10.0)
    # A new controller starts with the garbage still there and still manages "good".
    old = cluster.controller_id()
    cluster.crash(old)
    assert world.run_until(lambda: cluster.controller_id() not in (-1, old), 20.0)
    assert world.run_until(lambda: cluster.state("good", 0).leader not in (old, -1), 10.0)
    assert not world.failures
