"""Replica reassignment through the V3 RAR/AR steps, its KIP-236 cancellation, and failover."""

from __future__ import annotations

import pytest
from controller_fixtures import StubCluster

from floodmark.reference.client.admin import Admin
from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=3)

TP = m.TopicPartition("t", 0)


def setup(world: SimWorld, n: int = 5) -> tuple[StubCluster, Admin, list[int]]:
    cluster = StubCluster(world, n)
    cluster.start()
    others = [b for b in sorted(cluster.brokers) if b != cluster.controller_id()]
    cluster.create_topic("t", {0: tuple(others[:2])})
    assert cluster.admin_zk is not None
    return cluster, Admin(cluster.admin_rt, cluster.admin_zk), others


def catch_up(world: SimWorld, cluster: StubCluster, isr: tuple[int, ...]) -> None:
    """The leader admits caught-up replicas to the ISR (a conditional write, same epoch)."""
    s = cluster.state("t", 0)
    world.run(cluster.admin_zk.set(  # type: ignore[union-attr]
        zk.partition_state_path("t", 0),
        zk.encode_leader_isr(zk.LeaderIsr(s.leader, s.leader_epoch, isr, s.controller_epoch)), s.zk_version))


def test_reassignment_runs_the_rar_ar_steps(world: SimWorld) -> None:
    cluster, admin, (a, b, c, d) = setup(world)
    world.run(admin.reassign_execute([zk.Reassignment("t", 0, (c, d), ())]))
    # Steps 1-2: AR = RAR + OAR, new epoch, the new replicas were told to start.
    assert world.run_until(lambda: cluster.assignment("t").partitions[0] == (c, d, a, b), 10.0)
    assert world.run_until(lambda: cluster.state("t", 0).leader_epoch == 1, 10.0)
    world.run_for(1.0)
    started = cluster.brokers[c].leader_epochs[TP]
    assert started.leader == a and started.adding_replicas == (c, d) and started.removing_replicas == (a, b)
    assert world.run(admin.reassign_verify([zk.Reassignment("t", 0, (c, d), ())])) == {TP: "in progress"}
    # Step 3: wait until RAR is in the ISR; not yet complete with only c caught up.
    catch_up(world, cluster, (a, b, c))
    world.run_for(2.0)
    assert cluster.assignment("t").partitions[0] == (c, d, a, b)
    catch_up(world, cluster, (a, b, c, d))
    # Steps 4-6: leader from RAR, ISR within RAR, old replicas deleted, request removed.
    assert world.run_until(lambda: cluster.assignment("t").partitions[0] == (c, d), 10.0)
    s = cluster.state("t", 0)
    assert s.leader == c and sorted(s.isr) == sorted([c, d])
    assert world.run_until(lambda: world.zk.exists(zk.REASSIGN_PARTITIONS) is None, 10.0)
    world.run_for(1.0)
    for old in (a, b):
        stops = cluster.brokers[old].requests(m.StopReplicaRequest)
        assert stops and stops[-1].delete and TP in stops[-1].partitions
    assert world.run(admin.reassign_verify([zk.Reassignment("t", 0, (c, d), ())])) == {TP: "complete"}


def test_cancellation_reverts_to_the_original_replicas(world: SimWorld) -> None:
    cluster, admin, (a, b, c, d) = setup(world)
    world.run(admin.reassign_execute([zk.Reassignment("t", 0, (c, d), ())]))
    assert world.run_until(lambda: cluster.assignment("t").partitions[0] == (c, d, a, b), 10.0)
    stored = zk.decode_reassignments(world.zk.get(zk.REASSIGN_PARTITIONS)[0])
    assert stored[0].original_replicas == (a, b)
    world.run(admin.reassign_cancel())
    assert world.run_until(lambda: cluster.assignment("t").partitions[0] == (a, b), 10.0)
    assert world.run_until(lambda: world.zk.exists(zk.REASSIGN_CANCEL) is None, 10.0)
    assert world.zk.exists(zk.REASSIGN_PARTITIONS) is None
    s = cluster.state("t", 0)
    assert s.leader == a and set(s.isr) <= {a, b}
    world.run_for(1.0)
    for added in (c, d):
        stops = cluster.brokers[added].requests(m.StopReplicaRequest)
        assert stops and stops[-1].delete and TP in stops[-1].partitions


def test_new_controller_finishes_a_pending_reassignment(world: SimWorld) -> None:
    cluster, admin, (a, b, c, d) = setup(world)
    world.run(admin.reassign_execute([zk.Reassignment("t", 0, (b, c), ())]))
    assert world.run_until(lambda: cluster.assignment("t").partitions[0] == (b, c, a), 10.0)
    old = cluster.controller_id()
    cluster.crash(old)
    assert world.run_until(lambda: cluster.controller_id() not in (-1, old), 20.0)
    world.run_for(1.0)
    assert cluster.assignment("t").partitions[0] == (b, c, a)  # still waiting for c
    catch_up(world, cluster, (a, b, c))
    assert world.run_until(lambda: cluster.assignment("t").partitions[0] == (b, c), 10.0)
    assert cluster.state("t", 0).leader == b
    assert world.run_until(lambda: world.zk.exists(zk.REASSIGN_PARTITIONS) is None, 10.0)


def test_admin_refuses_a_second_reassignment_and_unknown_brokers(world: SimWorld) -> None:
    from floodmark.reference.client.admin import AdminError
    cluster, admin, (a, b, c, d) = setup(world)
    with pytest.raises(AdminError, match=r"brokers \[99\] are not registered"):
        world.run(admin.reassign_execute([zk.Reassignment("t", 0, (c, 99), ())]))
    world.run(admin.reassign_execute([zk.Reassignment("t", 0, (c, d), ())]))
    with pytest.raises(AdminError, match="already in progress"):
        world.run(admin.reassign_execute([zk.Reassignment("t", 0, (a, d), ())]))
