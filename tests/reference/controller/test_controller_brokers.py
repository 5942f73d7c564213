"""Broker failure, start-up, KIP-343 heartbeats/fencing and controlled shutdown (sim world)."""

from __future__ import annotations

import pytest
from controller_fixtures import StubCluster

from floodmark.contracts.node_events import BrokerState
from floodmark.reference.controller.controller import ControllerConfig
from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=11)


def non_controllers(cluster: StubCluster) -> list[int]:
    return [b for b in sorted(cluster.brokers) if b != cluster.controller_id()]


def shrink_isr(world: SimWorld, cluster: StubCluster, topic: str, partition: int, isr: tuple[int, ...]) -> None:
    """Write an ISR change as the partition's leader would (same epoch, conditional)."""
    s = cluster.state(topic, partition)
    new = zk.LeaderIsr(s.leader, s.leader_epoch, isr, s.controller_epoch)
    world.run(cluster.admin_zk.set(  # type: ignore[union-attr]
        zk.partition_state_path(topic, partition), zk.encode_leader_isr(new), s.zk_version))


def test_leader_failure_elects_first_live_isr_member_and_shrinks_isr(world: SimWorld) -> None:
    cluster = StubCluster(world, 4)
    cluster.start()
    a, b, c = non_controllers(cluster)
    cluster.create_topic("t", {0: (a, b, c), 1: (b, a, c)})
    cluster.crash(a)
    assert world.run_until(lambda: cluster.state("t", 0).leader == b, 20.0)
    s0, s1 = cluster.state("t", 0), cluster.state("t", 1)
    assert (s0.leader, s0.leader_epoch, sorted(s0.isr)) == (b, 1, sorted([b, c]))
    assert (s1.leader, s1.leader_epoch, sorted(s1.isr)) == (b, 1, sorted([b, c]))  # follower left ISR
    world.run_for(1.0)
    told = cluster.brokers[c].leader_epochs[m.TopicPartition("t", 0)]
    assert (told.leader, told.leader_epoch) == (b, 1)
    events = [e for e in cluster.leader_events() if e.partition == 0 and e.leader_epoch == 1]
    assert events and events[0].leader == b and events[0].unclean is False


def isr_member_crashed(world: SimWorld, config: ControllerConfig | None = None) -> tuple[StubCluster, int, int]:
    """Partition t-0 on (a, b) with the ISR shrunk to (a,) (b fell behind), then a crashes."""
    cluster = StubCluster(world, 3, config)
    cluster.start()
    a, b = non_controllers(cluster)
    cluster.create_topic("t", {0: (a, b)})
    shrink_isr(world, cluster, "t", 0, (a,))
    cluster.crash(a)
    return cluster, a, b


def test_no_live_isr_means_offline_then_the_isr_member_returns_and_leads(world: SimWorld) -> None:
    cluster, a, _ = isr_member_crashed(world)
    assert world.run_until(lambda: cluster.state("t", 0).leader == zk.NO_LEADER, 20.0)
    assert cluster.state("t", 0).isr == (a,)  # kept, so that a can lead again
    cluster.restart(a)
    assert world.run_until(lambda: cluster.state("t", 0).leader == a, 20.0)


def test_unclean_variant_elects_an_out_of_sync_replica(world: SimWorld) -> None:
    cluster, _, b = isr_member_crashed(
        world, ControllerConfig(variant=VARIANTS["unclean-election"], heartbeat_timeout=None))
    assert world.run_until(lambda: cluster.state("t", 0).leader == b, 20.0)
    assert cluster.state("t", 0).isr == (b,)
    # The event is emitted once the controller has ZooKeeper's reply, a network hop later.
    assert world.run_until(lambda: any(e.leader == b for e in cluster.leader_events()), 5.0)
    unclean = [e for e in cluster.leader_events() if e.leader == b]
    assert unclean and unclean[-1].unclean is True


def test_broker_that_stops_heartbeating_is_fenced_although_registered(world: SimWorld) -> None:
    cluster = StubCluster(world, 4, ControllerConfig(heartbeat_timeout=3.0))
    cluster.start()
    a, b, c = non_controllers(cluster)
    cluster.create_topic("t", {0: (a, b, c)})
    world.run_for(3.0)
    assert cluster.brokers[a].heartbeat_states[-1] == "Active"
    cluster.brokers[a].deaf = True  # alive in ZooKeeper, deaf to the controller
    assert world.run_until(lambda: cluster.state("t", 0).leader == b, 10.0)
    assert a not in cluster.state("t", 0).isr
    assert world.zk.exists(zk.broker_path(a)) is not None  # still registered
    fenced = [e.body for e in world.events(cluster.active().node)
              if isinstance(e.body, BrokerState) and e.body.state == "Fenced"]
    assert [e.broker for e in fenced] == [a]
    # Heartbeats resume: the broker is set up afresh (full LeaderAndIsr) and becomes Active.
    before = len(cluster.brokers[a].requests(m.LeaderAndIsrRequest))
    states = cluster.brokers[a].heartbeat_states
    seen = len(states)
    cluster.brokers[a].deaf = False
    assert world.run_until(lambda: "Active" in states[seen:], 10.0)
    assert states[seen] == "Inactive"  # set up again before it counts as Active
    assert len(cluster.brokers[a].requests(m.LeaderAndIsrRequest)) > before
    assert cluster.brokers[a].leader_epochs[m.TopicPartition("t", 0)].leader == b


def test_heartbeat_from_an_older_incarnation_is_refused(world: SimWorld) -> None:
    cluster = StubCluster(world, 3, ControllerConfig(heartbeat_timeout=3.0))
    cluster.start()
    a = non_controllers(cluster)[0]
    controller = cluster.active().controller
    assert controller is not None
    old = cluster.brokers[a].incarnation
    cluster.crash(a)
    new = cluster.restart(a)
    assert world.run_until(lambda: controller.ctx.incarnation(a) == new.incarnation, 20.0)
    assert new.incarnation > old
    stale = world.run(controller.handle_heartbeat(m.BrokerHeartbeatRequest(a, old)))
    assert stale.error == m.Errors.STALE_BROKER_EPOCH
    fresh = world.run(controller.handle_heartbeat(m.BrokerHeartbeatRequest(a, new.incarnation)))
    assert fresh.error is None and fresh.state in ("Inactive", "Active")


def test_controlled_shutdown_moves_leaders_first_and_reports_what_remains(world: SimWorld) -> None:
    cluster = StubCluster(world, 4)
    cluster.start()
    a, b, c = non_controllers(cluster)
    cluster.create_topic("t", {0: (a, b, c), 1: (b, a, c), 2: (a,)})
    controller = cluster.active().controller
    assert controller is not None
    response = world.run(controller.handle_controlled_shutdown(
        m.ControlledShutdownRequest(a, cluster.brokers[a].incarnation)))
    assert response.error is None
    assert response.remaining_partitions == (m.TopicPartition("t", 2),)  # rf=1: nowhere to go
    s0, s1 = cluster.state("t", 0), cluster.state("t", 1)
    assert s0.leader == b and a not in s0.isr
    assert s1.leader == b and a not in s1.isr
    world.run_for(1.0)
    stops = cluster.brokers[a].requests(m.StopReplicaRequest)
    assert stops and not stops[-1].delete
    stale = world.run(controller.handle_controlled_shutdown(m.ControlledShutdownRequest(a, 1)))
    assert stale.error == m.Errors.STALE_BROKER_EPOCH


# ----------------------------------------------------------------------------- KIP-966


def test_the_last_isr_member_back_from_an_unclean_shutdown_leads_only_by_a_balanced_recovery(
        world: SimWorld) -> None:
    # Nobody else may hold more (no ELR, nobody remembered): it leads again, but as an
    # unclean choice in a new epoch (KIP-966's Balanced recovery), never in its old one.
    cluster, a, b = isr_member_crashed(world)
    assert world.run_until(lambda: cluster.state("t", 0).leader == zk.NO_LEADER, 20.0)
    offline_epoch = cluster.state("t", 0).leader_epoch
    cluster.restart(a, unclean_shutdown=True)
    assert world.run_until(lambda: cluster.state("t", 0).leader == a, 20.0)
    world.run_for(5.0)
    s = cluster.state("t", 0)
    assert (s.leader, s.isr) == (a, (a,)) and s.leader_epoch > offline_epoch
    assert world.run_until(lambda: any(e.leader == a and e.unclean for e in cluster.leader_events()), 5.0)
    assert not any(e.leader == b for e in cluster.leader_events())
    told = cluster.brokers[a].leader_epochs[m.TopicPartition("t", 0)]
    assert (told.leader, told.isr, told.leader_epoch) == (a, (a,), s.leader_epoch)
    controller = cluster.brokers[cluster.controller_id()].node
    recovered = [e.body for e in world.events(controller) if isinstance(e.body, BrokerState)
                 and e.body.broker == a and "unclean shutdown" in (e.body.why or "")]
    assert len(recovered) == 1


def unclean_registration_at_failover(world: SimWorld, variant: str) -> tuple[StubCluster, int, int]:
    """A new controller finds a registered broker that says it recovered from an unclean
    shutdown (its predecessor never saw it fail) and that ZooKeeper still names leader."""
    cluster = StubCluster(world, 4, ControllerConfig(variant=VARIANTS[variant], heartbeat_timeout=None))
    cluster.start()
    first = cluster.controller_id()
    a, b, c = non_controllers(cluster)
    cluster.create_topic("t", {0: (a, b, c), 1: (b, a, c)})
    cluster.write(zk.broker_path(a), zk.encode_broker(f"n{a}", unclean_shutdown=True))
    world.run(cluster.admin_zk.delete(zk.CONTROLLER))  # type: ignore[union-attr]
    assert world.run_until(lambda: cluster.controller_id() not in (-1, first) or cluster.epoch() > 1, 10.0)
    world.run_for(2.0)
    return cluster, a, b


def test_at_failover_a_broker_back_from_an_unclean_shutdown_leaves_every_isr(world: SimWorld) -> None:
    cluster, a, b = unclean_registration_at_failover(world, "default")
    s0, s1 = cluster.state("t", 0), cluster.state("t", 1)
    assert (s0.leader, s0.leader_epoch, a in s0.isr) == (b, 1, False)  # led by a: moved, new epoch
    assert (s1.leader, s1.leader_epoch, a in s1.isr) == (b, 1, False)  # followed by a: left the ISR
    for replica in s0.isr + (a,):
        told = cluster.brokers[replica].leader_epochs.get(m.TopicPartition("t", 0))
        assert told is not None and (told.leader, told.leader_epoch) == (b, 1)


def test_before_kip_966_a_new_controller_keeps_it_leader_in_the_same_epoch(world: SimWorld) -> None:
    cluster, a, b = unclean_registration_at_failover(world, "no-kip-966")
    s0 = cluster.state("t", 0)
    assert (s0.leader, s0.leader_epoch, a in s0.isr) == (a, 0, True)
