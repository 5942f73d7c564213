"""The controller's ZooKeeper writes: epoch-fenced, batched, conflicts isolated (sim world)."""

from __future__ import annotations

import dataclasses

import pytest
from controller_fixtures import StubCluster

from floodmark.reference.controller.controller import ControllerConfig
from floodmark.reference.controller.zk_writes import ControllerMoved
from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import TopicPartition
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


def test_each_written_transaction_is_heard_as_soon_as_it_is_written(world: SimWorld) -> None:
    """A failover's 10,000 new leaders take many transactions: the controller prepares what it
    tells brokers about each batch while the later ones are still being written."""
    cluster, a, _ = big_topic(world, True, 250)
    controller = cluster.active().controller
    assert controller is not None
    tps = [TopicPartition("big", p) for p in range(250)]
    current = {tp: cluster.state("big", tp.partition) for tp in tps}
    updates = {tp: dataclasses.replace(s, leader_epoch=s.leader_epoch + 1) for tp, s in current.items()}
    heard: list[list[int]] = []
    returned = False

    def on_chunk(written: dict[TopicPartition, zk.LeaderIsr]) -> None:
        assert not returned
        heard.append(sorted(tp.partition for tp in written))

    async def write() -> tuple[dict[TopicPartition, zk.LeaderIsr], list[TopicPartition]]:
        return await controller.zkw.write_states(updates, on_chunk=on_chunk)

    written, conflicts = world.run(write())
    returned = True
    assert not conflicts
    assert sorted(len(batch) for batch in heard) == [50, 100, 100]  # ops_per_multi is 100
    assert sorted(p for batch in heard for p in batch) == list(range(250))
    assert all(written[tp].zk_version == current[tp].zk_version + 1 for tp in tps)


def test_a_failover_over_many_transactions_still_tells_each_broker_everything_once(world: SimWorld) -> None:
    cluster = StubCluster(world, 4, ControllerConfig(heartbeat_timeout=None, ops_per_multi=100))
    cluster.start()
    old = cluster.controller_id()
    others = [b for b in sorted(cluster.brokers) if b != old]
    cluster.create_topic("big", {p: (old, others[p % 3], others[(p + 1) % 3]) for p in range(300)})
    world.run_for(1.0)
    cluster.crash(old)
    assert world.run_until(lambda: cluster.controller_id() not in (-1, old), 20.0)
    world.run_for(2.0)
    new = cluster.active().controller
    assert new is not None and new.zkw.transactions >= 3  # 300 new leaders: at least 3 multis
    for b in others:
        init = [r for r in cluster.brokers[b].requests(m.LeaderAndIsrRequest) if r.controller_epoch == 2]
        assert len(init) == 1 and init[0].is_init
        mine = sorted(s.partition for s in init[0].partitions)
        assert mine == [p for p in range(300) if b in (others[p % 3], others[(p + 1) % 3])]
        assert all(s.leader != old and s.leader_epoch == 1 for s in init[0].partitions)
