"""A leader that lost power while the controller was isolated must not lead again as it is.

The story (found by the simulator, default variant): the leader of a partition loses power,
and with it every record it had not fsynced (the broker acknowledges without fsync, as
Kafka does by default), while the controller is cut off from ZooKeeper: it never gets its
decision moving that leadership into ZooKeeper and resigns. The broker restarts with an
empty log and registers again before the next controller is elected; that controller finds
it registered and still named leader in ZooKeeper. Without KIP-966's lesson it keeps it leader
in the same epoch and the followers, truncating by leader epoch, throw away every
acknowledged record. With it, the broker says in its registration that it did not shut down
cleanly; the controller takes it out of the ISR and elects another in-sync replica in a new
epoch; the broker catches up as a follower.

The same schedule with a SIGKILL (the page cache survives, nothing is lost on disk) is safe
either way; with the fix it is merely conservative: the killed broker is also taken out of
the ISR and rejoins by catching up.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from broker_fixtures import SimCluster

from floodmark.contracts.node_events import (
    BecameLeader,
    BrokerState,
    ControllerResigned,
    LeaderElected,
    Started,
)
from floodmark.reference.broker.broker import Broker
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.log.log_dirs import CLEAN_SHUTDOWN_FILE
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    Errors,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionState,
    ProduceRequest,
    ProduceResponse,
)
from floodmark.reference.sim import SimWorld

ACKED_BATCHES = 40


@dataclass(frozen=True)
class Outcome:
    acked: dict[int, str]  # offset -> value, acknowledged with acks=all
    read: list[str]  # everything the final leader serves, from offset 0
    final: zk.LeaderIsr
    leader_before: zk.LeaderIsr  # the state the restarted broker found in ZooKeeper
    cluster: SimCluster


def isolated_controller_sequence(variant: str, *, power_loss: bool) -> Outcome:
    # n1 is the controller and holds no replica; t-0 lives on n2 (leader), n3, n4. n1 keeps
    # its ZooKeeper session longer than the broker's heartbeat timeout, so that it acts
    # (and fails to write) before ZooKeeper declares it dead.
    cluster = SimCluster(seed=7, nodes=4, variant=variant, node_config={"n1": {"zk_session_timeout": 14.0}})
    world = cluster.world
    assert cluster.brokers["n1"].controller is not None and cluster.brokers["n1"].controller.is_active
    cluster.create_topic("t", 1, 3, min_isr=2, assignment={0: (2, 3, 4)})
    acked: dict[int, str] = {}

    async def produce() -> None:
        for i in range(ACKED_BATCHES):
            values = tuple(f"v{i}-{j}" for j in range(4))
            response = await cluster.client.network.request("n2", ProduceRequest("t", 0, values, timeout=2.0), 4.0)
            assert isinstance(response, ProduceResponse) and response.error is None, response
            acked.update({response.base_offset + j: v for j, v in enumerate(values)})

    cluster.run(produce())
    leader_before = cluster.state("t", 0)
    assert leader_before is not None and leader_before.leader == 2
    # The leader goes down; a moment later the controller is cut off from ZooKeeper. n2's
    # old session expires (6 s) and it registers again as soon as it can; n1 fences it for
    # want of heartbeats (10 s) but cannot write anything down.
    (cluster.crash if power_loss else cluster.kill)("n2")
    world.run_for(1.0)
    world.partition({"n1"}, {"zk"})
    world.run_for(0.5)
    cluster.restart("n2")
    # n1's session expires; another broker is elected and reads ZooKeeper.
    assert world.run_until(lambda: world.zk.exists(zk.CONTROLLER) is not None
                           and zk.decode_controller(world.zk.get(zk.CONTROLLER)[0]) != 1, 30.0)
    registration, election = world.zk.exists(zk.broker_path(2)), world.zk.exists(zk.CONTROLLER)
    assert registration is not None and election is not None and registration.czxid < election.czxid
    assert world.run_until(lambda: bool(cluster.events("n1", ControllerResigned)), 20.0)
    assert [e for e in cluster.events("n1", LeaderElected) if e.leader_epoch > 0] == []
    world.run_for(10.0)
    world.heal()
    world.run_for(20.0)
    read = cluster.consume_all("t", 0)
    final = cluster.state("t", 0)
    assert final is not None
    return Outcome(acked, read, final, leader_before, cluster)


def lost(outcome: Outcome) -> dict[int, str]:
    """Acknowledged records the final leader does not serve at their offset."""
    return {o: v for o, v in outcome.acked.items() if o >= len(outcome.read) or outcome.read[o] != v}


def finish(outcome: Outcome) -> None:
    assert outcome.cluster.world.failures == [], outcome.cluster.world.failures
    outcome.cluster.close()


def test_power_loss_of_the_leader_while_the_controller_is_isolated_loses_nothing_acknowledged() -> None:
    out = isolated_controller_sequence("default", power_loss=True)
    assert lost(out) == {}
    assert out.read[:len(out.acked)] == [out.acked[o] for o in sorted(out.acked)]
    # The new controller took n2 out of the ISR and elected another replica in a new epoch;
    # n2 caught up as a follower and is back in the ISR.
    assert out.final.leader in (3, 4) and out.final.leader_epoch > out.leader_before.leader_epoch
    assert 2 in out.final.isr and out.cluster.values("n2", "t", 0)[:len(out.acked)] == out.read[:len(out.acked)]
    recovered = [e for name in ("n3", "n4") for e in out.cluster.events(name, BrokerState)
                 if e.broker == 2 and "unclean shutdown" in (e.why or "")]
    assert len(recovered) == 1
    finish(out)


def test_before_kip_966_the_same_power_loss_loses_every_acknowledged_record() -> None:
    out = isolated_controller_sequence("no-kip-966", power_loss=True)
    # n2 stayed leader in the epoch it had lost its records of; the followers truncated to it.
    assert (out.final.leader, out.final.leader_epoch) == (2, out.leader_before.leader_epoch)
    assert lost(out) == out.acked and len(out.acked) == 4 * ACKED_BATCHES
    finish(out)


@pytest.mark.parametrize("variant", ["default", "no-kip-966"])
def test_the_same_schedule_with_a_sigkill_loses_nothing(variant: str) -> None:
    out = isolated_controller_sequence(variant, power_loss=False)
    assert lost(out) == {}
    finish(out)


# ----------------------------------------------------------------------------- the last replica standing


@dataclass(frozen=True)
class LastReplicaOutcome:
    acked: dict[int, str]
    final: zk.LeaderIsr
    logs: dict[str, list[str]]  # each replica's log once everything settled


def last_replica_standing_sequence(variant: str, *, power_loss: bool, min_isr: int = 2) -> LastReplicaOutcome:
    """KIP-966's own example: the ISR shrinks to the leader, which then loses power.

    t-0 on n2 (leader), n3, n4 with min.insync.replicas=2; records are acknowledged while all
    three are in sync. n2 is cut off from n3 and n4, which leave the ISR (they still hold
    every acknowledged record). n2 loses power and restarts as the last ISR member, on its
    own and with what it had fsynced: nothing.
    """
    cluster = SimCluster(seed=5, nodes=4, variant=variant, replica_lag_time_max=3.0)
    world = cluster.world
    cluster.create_topic("t", 1, 3, min_isr=min_isr, assignment={0: (2, 3, 4)})
    acked: dict[int, str] = {}
    for i in range(10):
        values = [f"v{i}-{j}" for j in range(3)]
        result = cluster.send("t", 0, values)
        assert result.status == "ok" and result.offset is not None, result
        acked.update({result.offset + j: v for j, v in enumerate(values)})
    world.partition({"n2"}, {"n3", "n4"})
    assert world.run_until(lambda: cluster.state("t", 0).isr == (2,), 30.0)  # type: ignore[union-attr]
    (cluster.crash if power_loss else cluster.kill)("n2")
    world.heal()
    cluster.restart("n2")
    world.run_for(20.0)
    final = cluster.state("t", 0)
    assert final is not None
    logs = {name: cluster.values(name, "t", 0) for name in ("n2", "n3", "n4")}
    assert cluster.world.failures == [], cluster.world.failures
    cluster.close()
    return LastReplicaOutcome(acked, final, logs)


def held(log: list[str], acked: dict[int, str]) -> bool:
    return all(o < len(log) and log[o] == v for o, v in acked.items())


def test_the_last_in_sync_replica_that_lost_power_gives_way_to_an_eligible_leader_replica() -> None:
    out = last_replica_standing_sequence("default", power_loss=True)
    # n3 and n4 left an ISR below min.insync.replicas, after which the HW stood still: they
    # are eligible leader replicas (KIP-966). n2 left the ISR on its unclean restart, so one
    # of them leads, cleanly, and n2 catches up from it ...
    assert out.final.leader in (3, 4) and out.final.isr == (2, 3, 4)
    # ... and every acknowledged record is on every replica.
    assert all(held(log, out.acked) for log in out.logs.values())


def test_before_kip_966_the_last_in_sync_replica_leads_again_and_the_others_truncate() -> None:
    out = last_replica_standing_sequence("no-kip-966", power_loss=True)
    assert out.final.leader == 2
    assert not any(held(log, out.acked) for log in out.logs.values())  # gone from every replica


@pytest.mark.parametrize("variant", ["default", "no-kip-966"])
def test_the_last_in_sync_replica_killed_loses_nothing(variant: str) -> None:
    out = last_replica_standing_sequence(variant, power_loss=False)
    assert held(out.logs["n3"], out.acked) and held(out.logs["n4"], out.acked)
    if variant == "default":  # an eligible leader replica took over while n2 was down
        assert out.final.leader in (3, 4) and held(out.logs["n2"], out.acked)
    else:
        assert out.final.leader == 2 and held(out.logs["n2"], out.acked)


def test_a_killed_last_in_sync_replica_of_an_isr_at_min_insync_leads_again() -> None:
    # min.insync.replicas=1: n2 alone acknowledged records once n3 and n4 left; a SIGKILL took
    # none of them, and KIP-966's Balanced recovery lets n2 lead again rather than leave the
    # partition offline for ever; the others catch up from it.
    out = last_replica_standing_sequence("default", power_loss=False, min_isr=1)
    assert out.final.leader == 2
    assert all(held(log, out.acked) for log in out.logs.values())


# ----------------------------------------------------------------------------- before registering


def test_a_restarted_broker_ignores_what_a_deposed_controller_meant_for_its_previous_incarnation() -> None:
    """The random faults found a second way in (KIP-380's gap at start-up).

    A controller cut off from ZooKeeper keeps retrying its requests until they are
    delivered. If the broker they are for lost power and restarts, the retried LeaderAndIsr,
    meant for the previous incarnation, reaches a process that has not registered yet and so
    cannot tell it is stale. Acted on, it made a broker with an empty log leader in the
    epoch its followers were following it in; they truncated to it. The broker holds such a
    request until it knows its own incarnation, and then refuses it.
    """
    cluster = SimCluster(seed=3, nodes=4)
    world = cluster.world
    cluster.create_topic("t", 1, 3, min_isr=2, assignment={0: (2, 3, 4)})
    result = cluster.send("t", 0, [f"v{i}" for i in range(20)])
    assert result.status == "ok"
    previous = cluster.brokers["n2"].incarnation
    state = cluster.state("t", 0)
    assert state is not None and state.leader == 2
    stale = LeaderAndIsrRequest(
        controller_id=1, controller_epoch=state.controller_epoch, broker_incarnation=previous,
        partitions=(PartitionState("t", 0, 2, state.leader_epoch, state.isr, state.zk_version, (2, 3, 4),
                                   state.controller_epoch),),
        live_leaders=())
    cluster.crash("n2")
    world.restart("n2")
    broker = Broker(world.runtime("n2"), cluster.configs["n2"])
    cluster.brokers["n2"] = broker
    starting = world.runtime("n2").spawn(broker.start(), name="start")

    async def retry_until_delivered() -> object:
        while True:  # as the deposed controller's channel does
            try:
                return await cluster.client.network.request("n2", stale, 30.0)
            except (ConnectionError, TimeoutError):
                await cluster.client.sleep(0.01)

    response = cluster.run(retry_until_delivered())
    assert starting.done() or broker.incarnation > previous
    assert response == LeaderAndIsrResponse(Errors.STALE_BROKER_EPOCH)
    world.run_for(20.0)
    assert cluster.consume_all("t", 0) == [f"v{i}" for i in range(20)]
    events = [e.body for e in world.events("n2")]
    restarted = max(i for i, e in enumerate(events) if isinstance(e, Started))
    assert [e for e in events[restarted:] if isinstance(e, BecameLeader) and e.leader_epoch == state.leader_epoch] == []
    assert world.failures == [], world.failures
    cluster.close()


# ----------------------------------------------------------------------------- the broker's side


def registration(cluster: SimCluster, broker_id: int) -> zk.BrokerRegistration:
    data, stat = cluster.world.zk.get(zk.broker_path(broker_id))
    return zk.decode_broker(broker_id, data, stat.czxid)


def test_a_killed_broker_says_so_until_a_controller_took_it_out_of_the_isrs() -> None:
    cluster = SimCluster(seed=4, nodes=4)
    world = cluster.world
    cluster.create_topic("t", 1, 3, min_isr=2, assignment={0: (2, 3, 4)})
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    cluster.kill("n3")
    world.restart("n3")
    broker = Broker(world.runtime("n3"), cluster.configs["n3"])
    cluster.brokers["n3"] = broker
    said: list[bool] = []

    async def watch_registration() -> None:  # what the registration said when it appeared
        while world.zk.exists(zk.broker_path(3)) is None or not broker.incarnation:
            await cluster.client.sleep(0.0005)
        said.append(registration(cluster, 3).unclean_shutdown)

    watching = cluster.client.spawn(watch_registration(), name="watch")
    cluster.run(broker.start())
    world.run_until(watching.done, 10.0)
    assert said == [True]
    world.run_for(5.0)
    assert not registration(cluster, 3).unclean_shutdown and not broker.session.unclean_recovery
    state = cluster.state("t", 0)
    assert state is not None and 3 in state.isr  # back by catching up, as any follower
    assert cluster.values("n3", "t", 0) == ["a", "b"]
    assert world.failures == [], world.failures
    cluster.close()


def test_a_clean_restart_says_nothing_and_keeps_its_place() -> None:
    cluster = SimCluster(seed=4, nodes=4)
    cluster.create_topic("t", 1, 3, min_isr=2, assignment={0: (2, 3, 4)})
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    cluster.run(cluster.brokers["n3"].stop())
    cluster.crash("n3")  # the process exits: its clean shutdown left nothing unsynced
    cluster.restart("n3")
    assert not registration(cluster, 3).unclean_shutdown
    assert not any(e.broker == 3 and "unclean" in (e.why or "")
                   for name in cluster.names for e in cluster.events(name, BrokerState))
    assert cluster.values("n3", "t", 0) == ["a", "b"]
    assert cluster.world.failures == [], cluster.world.failures
    cluster.close()


def test_no_clean_shutdown_while_no_controller_has_acknowledged_the_unclean_recovery() -> None:
    world = SimWorld(seed=2)
    try:
        runtime = world.add_node("n1")
        config = BrokerConfig(broker_id=1, log_dirs=("/data/a",), controller_candidate=False,
                              broker_fence_timeout=None, request_timeout=0.5)
        world.disk("n1").make_dirs("/data/a/t-0")  # a replica, and no clean shutdown marker
        broker = Broker(runtime, config)
        world.run(broker.start())
        assert broker.session.unclean_recovery  # no controller ever sends it anything
        world.run(broker.stop())
        assert not world.disk("n1").exists(f"/data/a/{CLEAN_SHUTDOWN_FILE}")
    finally:
        world.close()


def test_a_recovered_broker_that_caught_up_again_joins_the_elr_when_it_leaves_the_isr() -> None:
    # Explore seed 11079: a replica back from an unclean shutdown is taken out of the ISR and
    # rejoins it by catching up; its registration said "unclean" until then. The controller
    # kept treating it as unclean for the rest of that incarnation, so when it later left an
    # ISR below min.insync.replicas (a controlled shutdown) it was kept out of the ELR too;
    # the last ISR member then recovered uncleanly and the partition stayed offline for good,
    # although the replica that left cleanly held every committed record.
    cluster = SimCluster(seed=4, nodes=3)
    cluster.create_topic("t", 1, 2, min_isr=2, assignment={0: (2, 3)})
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    cluster.kill("n3")
    cluster.restart("n3")  # registers "unclean", is taken out of the ISR, catches up
    assert cluster.world.run_until(lambda: 3 in cluster.state("t", 0).isr, 20.0)  # type: ignore[union-attr]
    assert cluster.send("t", 0, ["c"]).status == "ok"
    cluster.run(cluster.brokers["n3"].stop())  # controlled shutdown: leaves the ISR cleanly
    cluster.crash("n3")  # the process exits (nothing unsynced after a clean shutdown)
    state = cluster.state("t", 0)
    assert state is not None and state.isr == (2,) and state.elr == (3,), state
    cluster.kill("n2")  # the last ISR member goes; the partition waits for an eligible leader
    cluster.restart("n3")
    assert cluster.wait_leader("t", 0, state.leader_epoch + 1) == "n3"
    assert cluster.values("n3", "t", 0) == ["a", "b", "c"]
    assert cluster.world.failures == [], cluster.world.failures
    cluster.close()


def whole_follower_and_emptied_leader() -> SimCluster:
    """t/0 on n2 (leader) and n3 at min.insync 2 with "a" and "b" acknowledged; n3 SIGKILLed
    (its log whole), then n2, the last ISR member, lost power (its log emptied); its session
    has expired, so the partition has no leader."""
    cluster = SimCluster(seed=4, nodes=3)
    cluster.create_topic("t", 1, 2, min_isr=2, assignment={0: (2, 3)})
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    cluster.kill("n3")  # SIGKILL: nothing lost; it leaves the ISR (into the ELR)
    cluster.world.run_for(15.0)
    assert cluster.state("t", 0).isr == (2,)  # type: ignore[union-attr]
    cluster.crash("n2")  # power loss of the last ISR member: "a" and "b" were never fsynced
    cluster.world.run_for(8.0)
    return cluster


def assert_the_whole_one_led_and_nothing_was_lost(cluster: SimCluster) -> None:
    elected = [e for name in cluster.names for e in cluster.events(name, LeaderElected) if e.unclean]
    assert [e.leader for e in elected] == [3]  # still an unclean choice, recorded as such
    assert cluster.world.run_until(lambda: cluster.values("n2", "t", 0) == ["a", "b"], 20.0)
    assert cluster.values("n3", "t", 0) == ["a", "b"]
    assert cluster.world.failures == [], cluster.world.failures
    cluster.close()


def test_balanced_recovery_elects_the_survivor_whose_log_goes_furthest() -> None:
    # Explore seed 13089: both replicas of a partition recovered uncleanly, one from a SIGKILL
    # (its log whole), the other, the last leader, from a power loss (its unsynced log gone).
    # Guessing by who left last elected the empty one and the whole one truncated to it;
    # asking both how far their logs go (KIP-966's GetReplicaLogInfo) elects the whole one.
    cluster = whole_follower_and_emptied_leader()
    cluster.restart("n3")  # unclean: out of the ELR, a last-known member
    cluster.world.run_for(2.0)
    before = cluster.state("t", 0)
    assert before is not None and before.leader == -1 and before.isr == (2,)
    cluster.restart("n2")  # unclean too: every candidate recovered uncleanly
    assert cluster.wait_leader("t", 0, before.leader_epoch + 1) == "n3"
    assert_the_whole_one_led_and_nothing_was_lost(cluster)


def test_balanced_recovery_waits_until_every_replica_that_may_hold_the_most_is_back() -> None:
    # Both replicas recovered uncleanly; when the last leader, emptied by a power loss, comes
    # back, the other (whole after a SIGKILL) is away again. Electing the only one back would
    # make the other truncate to its empty log when it returns (explore seed 10806 was the
    # same story with a replica back but unable to say how far its log went: its directory
    # was unusable). The recovery waits, offline, until both are back and have answered, then
    # elects the one whose log goes furthest.
    cluster = whole_follower_and_emptied_leader()
    cluster.restart("n3")  # unclean: out of the ELR, a last-known member
    cluster.world.run_for(2.0)
    cluster.kill("n3")  # away again
    cluster.world.run_for(8.0)
    cluster.restart("n2")  # every ISR member recovered uncleanly; n3 is not back
    cluster.world.run_for(5.0)
    waiting = cluster.state("t", 0)
    assert waiting is not None and (waiting.leader, waiting.isr, waiting.last_known_elr) == (-1, (), (2, 3))
    cluster.restart("n3")
    assert cluster.wait_leader("t", 0, waiting.leader_epoch + 1) == "n3"
    assert_the_whole_one_led_and_nothing_was_lost(cluster)
