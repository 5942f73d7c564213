"""The controller's ZooKeeper writes: epoch-fenced, batched, conflicts isolated (sim world)."""

from __future__ import annotations

import pytest
from controller_fixtures import StubCluster

from floodmark.reference.controller.controller import ControllerConfig
from floodmark.reference.controller.zk_writes import ControllerMoved
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.runtime import SetDataOp
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=17, check_wire=False)


def big_topic(world: SimWorld, batched: bool, partitions: int) -> tuple[StubCluster, int, int]:
    cluster = StubCluster(world, 4, ControllerConfig(heartbeat_timeout=None, batched_writes=batched,
                                                     ops_per_multi=100))
    cluster.start()
    a, b, c = [x for x in sorted(cluster.brokers) if x != cluster.controller_id()]
    cluster.create_topic("big", {p: (a, b, c) for p in range(partitions)})
    return cluster, a, b


@pytest.mark.parametrize("batched,expected", [(True, 5), (False, 500)])
def test_leader_changes_are_written_in_batches(world: SimWorld, batched: bool, expected: int) -> None:
    cluster, a, b = big_topic(world, batched, 500)
    controller = cluster.active().controller
    assert controller is not None
    before = controller.zkw.transactions
    cluster.crash(a)
    assert world.run_until(lambda: all(cluster.state("big", p).leader == b for p in (0, 250, 499)), 30.0)
    world.run_for(1.0)
    assert controller.zkw.transactions - before == expected
    assert all(cluster.state("big", p).leader_epoch == 1 for p in range(500))


def test_a_conflicting_partition_is_decided_again_without_failing_the_batch(world: SimWorld) -> None:
    cluster, a, b = big_topic(world, True, 50)
    # The leader of partition 7 shrank its ISR behind the controller's back: b is out.
    s = cluster.state("big", 7)
    world.run(cluster.admin_zk.set(  # type: ignore[union-attr]
        zk.partition_state_path("big", 7),
        zk.encode_leader_isr(zk.LeaderIsr(a, s.leader_epoch, (a, cluster.state("big", 7).isr[2]), 1)),
        s.zk_version))
    third = cluster.state("big", 7).isr[1]
    cluster.crash(a)
    assert world.run_until(lambda: cluster.state("big", 0).leader == b, 30.0)
    assert world.run_until(lambda: cluster.state("big", 7).leader == third, 5.0)
    assert all(cluster.state("big", p).leader == b for p in range(50) if p != 7)


def test_writes_carry_the_epoch_check_unless_the_variant_drops_it(world: SimWorld) -> None:
    cluster = StubCluster(world, 3)
    cluster.start()
    cluster.create_topic("t", {0: (1, 2, 3)})
    controller = cluster.active().controller
    assert controller is not None
    s = cluster.state("t", 0)
    # Bump /controller_epoch behind the controller's back: its next write must be refused.
    world.run(cluster.admin_zk.set(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(5)))  # type: ignore[union-attr]
    ops = [SetDataOp(zk.partition_state_path("t", 0), zk.encode_leader_isr(s), s.zk_version)]
    with pytest.raises(ControllerMoved):
        world.run(controller.zkw.multi(ops))
    controller.zkw.epoch_check = False  # what the no-controller-epoch-check variant does
    world.run(controller.zkw.multi(ops))
    assert cluster.state("t", 0).zk_version == s.zk_version + 1


def test_a_batch_is_split_to_stay_under_the_request_size_limit(
        world: SimWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    from floodmark.reference.controller import zk_writes as controller_zk

    # Each state write is ~100 bytes of path and data: 20 of them fill a 2,000-byte multi.
    monkeypatch.setattr(controller_zk, "MAX_MULTI_BYTES", 2000)
    cluster, a, b = big_topic(world, True, 100)  # 100 ops per multi by count alone: one multi
    controller = cluster.active().controller
    assert controller is not None
    before = controller.zkw.transactions
    cluster.crash(a)
    assert world.run_until(lambda: all(cluster.state("big", p).leader == b for p in range(100)), 30.0)
    world.run_for(1.0)
    assert 5 <= controller.zkw.transactions - before <= 10
