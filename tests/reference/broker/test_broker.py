"""Broker behaviour on the simulated runtime: replication, leader changes, ISR, fencing.

Each test starts three brokers (ids 1..3 on nodes n1..n3, every one a controller
candidate) in a deterministic SimWorld, creates a topic through the admin client, and
drives crashes, partitions and raw requests, asserting on logs, ZooKeeper state and node
events.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_fixtures import SimCluster, request, running_cluster

from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameLeader,
    BrokerState,
    Fenced,
    HwChanged,
    IsrChanged,
    Rejected,
    Stopped,
    Truncated,
)
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    Errors,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    MetadataRequest,
    MetadataResponse,
    PartitionState,
    ProduceRequest,
    ProduceResponse,
    ReplicaLogInfo,
    ReplicaLogInfoRequest,
    ReplicaLogInfoResponse,
    TopicPartition,
)
from floodmark.reference.sim.message_faults import MessageRule


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    # Followers leave the ISR after 3 s, well before the controller fences a silent broker (10 s).
    yield from running_cluster(seed=7, replica_lag_time_max=3.0)


def assert_hw_never_backwards(cluster: SimCluster) -> None:
    for name in cluster.names:
        seen: dict[tuple[str, int, int], int] = {}
        for e in cluster.events(name, HwChanged):
            key = (e.topic, e.partition, e.leader_epoch)
            assert e.high_watermark >= seen.get(key, -1), f"{name}: HW went back: {e}"
            assert e.high_watermark <= e.log_end, e
            seen[key] = e.high_watermark


def test_produce_acks_all_replicates_to_every_isr_member_before_acking(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, min_isr=2)
    result = cluster.send("t", 0, ["a", "b", "c"])
    assert result.status == "ok" and result.offset == 0
    leader = cluster.leader_name("t", 0)
    # Acknowledged means every ISR member has the records and the HW covers them.
    for name in cluster.names:
        assert cluster.values(name, "t", 0)[:3] == ["a", "b", "c"]
    assert cluster.replica(leader, "t", 0).high_watermark == 3  # type: ignore[union-attr]
    acked = cluster.events(leader, Acked)
    assert acked[-1].offset == 2 and acked[-1].high_watermark >= 3
    appended = [e for e in cluster.events(leader, Appended) if e.role == "leader"]
    assert appended[-1].values == ("a", "b", "c")  # one event per batch
    assert cluster.consume_all("t", 0) == ["a", "b", "c"]
    assert_hw_never_backwards(cluster)


def test_metadata_names_the_leader(cluster: SimCluster) -> None:
    cluster.create_topic("t", 2, 3)
    cluster.world.run_for(1.0)
    response = request(cluster, "n2", MetadataRequest(("t",)))
    assert isinstance(response, MetadataResponse)
    leaders = {(p.topic, p.partition): p.leader for p in response.partitions}
    for p in (0, 1):
        assert leaders[("t", p)] == cluster.state("t", p).leader  # type: ignore[union-attr]


def test_produce_to_a_follower_is_refused_and_nothing_is_written(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    follower = next(n for n in cluster.names if n != cluster.leader_name("t", 0))
    response = request(cluster, follower, ProduceRequest("t", 0, ("x",)))
    assert isinstance(response, ProduceResponse) and response.error == Errors.NOT_LEADER
    assert cluster.values(follower, "t", 0) == []


def test_leader_crash_elects_an_isr_member_that_has_every_acked_record(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    acked = []
    for i in range(5):
        result = cluster.send("t", 0, [f"v{i}"])
        assert result.status == "ok"
        acked.append(f"v{i}")
    old = cluster.leader_name("t", 0)
    old_epoch = cluster.state("t", 0).leader_epoch  # type: ignore[union-attr]
    cluster.crash(old)
    assert cluster.world.run_until(
        lambda: (s := cluster.state("t", 0)) is not None and s.leader_epoch > old_epoch
        and s.leader != cluster.broker_id(old), 30.0)
    new = cluster.leader_name("t", 0)
    assert cluster.world.run_until(lambda: cluster.replica(new, "t", 0).is_leader, 10.0)  # type: ignore[union-attr]
    assert cluster.send("t", 0, ["after"]).status == "ok"
    assert cluster.consume_all("t", 0) == [*acked, "after"]
    # The old leader comes back as a follower and converges on the new leader's log.
    cluster.restart(old)
    assert cluster.world.run_until(lambda: cluster.values(old, "t", 0) == [*acked, "after"], 30.0)
    assert cluster.replica(old, "t", 0).role == "follower"  # type: ignore[union-attr]
    became = cluster.events(new, BecameLeader)
    assert became[-1].leader_epoch == cluster.state("t", 0).leader_epoch  # type: ignore[union-attr]
    assert_hw_never_backwards(cluster)


def test_isr_shrinks_for_a_cut_off_follower_and_expands_when_it_catches_up(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    leader = cluster.leader_name("t", 0)
    follower = next(n for n in cluster.names if n != leader and
                    cluster.brokers[n].controller is not None and not cluster.brokers[n].controller.is_active)
    cluster.world.partition({follower}, {n for n in cluster.names if n != follower})
    response = request(cluster, leader, ProduceRequest("t", 0, ("x",), timeout=20.0), 30.0)
    assert isinstance(response, ProduceResponse) and response.error is None  # acked once the ISR shrank
    shrinks = [e for e in cluster.events(leader, IsrChanged) if e.change == "shrink"]
    assert shrinks and cluster.broker_id(follower) not in shrinks[-1].isr
    state = cluster.state("t", 0)
    assert state is not None and cluster.broker_id(follower) not in state.isr
    assert state.zk_version == shrinks[-1].zk_version
    cluster.world.heal()
    assert cluster.world.run_until(
        lambda: cluster.broker_id(follower) in cluster.state("t", 0).isr, 30.0)  # type: ignore[union-attr]
    expands = [e for e in cluster.events(leader, IsrChanged) if e.change == "expand"]
    assert expands and cluster.values(follower, "t", 0) == ["x"]


def test_acks_all_refused_before_append_when_isr_is_below_min_insync(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, min_isr=3)
    leader = cluster.leader_name("t", 0)
    others = {n for n in cluster.names if n != leader}
    cluster.world.partition({leader}, others)
    # Waits out the lag window (ambiguous: appended, never covered by the HW), then refused.
    first = request(cluster, leader, ProduceRequest("t", 0, ("maybe",), timeout=2.0))
    assert isinstance(first, ProduceResponse) and first.error == Errors.REQUEST_TIMED_OUT
    replica = cluster.replica(leader, "t", 0)
    assert replica is not None
    assert cluster.world.run_until(lambda: len(replica.isr) < 3, 30.0)
    assert replica.is_leader  # the ISR shrank (3 s lag) long before any fencing (9-10 s)
    end = replica.log_end
    second = request(cluster, leader, ProduceRequest("t", 0, ("never",), timeout=2.0))
    assert isinstance(second, ProduceResponse) and second.error == Errors.NOT_ENOUGH_REPLICAS
    assert replica.log_end == end
    assert "never" not in cluster.values(leader, "t", 0)


def test_follower_fetch_with_another_leader_epoch_is_fenced(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    cluster.crash(cluster.leader_name("t", 0))  # so that there is an older epoch
    assert cluster.world.run_until(lambda: cluster.state("t", 0).leader_epoch >= 1, 30.0)  # type: ignore[union-attr]
    leader = cluster.leader_name("t", 0)
    assert cluster.world.run_until(lambda: cluster.replica(leader, "t", 0).is_leader, 10.0)  # type: ignore[union-attr]
    follower_id = next(cluster.broker_id(n) for n in cluster.names if n != leader)
    epoch = cluster.state("t", 0).leader_epoch  # type: ignore[union-attr]
    stale = request(cluster, leader, FetchRequest("t", 0, 0, replica_id=follower_id,
                                                  current_leader_epoch=epoch - 1))
    assert isinstance(stale, FetchResponse) and stale.error == Errors.FENCED_LEADER_EPOCH
    future = request(cluster, leader, FetchRequest("t", 0, 0, replica_id=follower_id,
                                                   current_leader_epoch=epoch + 1))
    assert isinstance(future, FetchResponse) and future.error == Errors.UNKNOWN_LEADER_EPOCH
    rejected = cluster.events(leader, Rejected)
    assert {e.why for e in rejected if e.request == "Fetch"} >= {
        Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH}


def test_an_isr_expansion_whose_zookeeper_answer_was_lost_still_reaches_every_metadata_cache(
        cluster: SimCluster) -> None:
    # Explore seed 57: the expansion's write landed but its answer was lost, so the leader sent
    # no ISR change notification; its retry lost the conditional write to its own landed one
    # and adopted that ISR, again without one: every broker's metadata named the old ISR for
    # good (the convergence checker's under-replicated-after-healing).
    cluster.create_topic("t", 1, 3, assignment={0: (2, 3, 1)})  # led by broker 2, not the controller
    leader = "n2"
    assert cluster.leader_name("t", 0) == leader and cluster.brokers["n1"].controller.is_active  # type: ignore[union-attr]

    def caches() -> dict[str, tuple[int, ...]]:
        return {n: cluster.brokers[n].metadata.partitions[("t", 0)].isr for n in cluster.names}
    cluster.world.partition({"n3"}, {leader})  # (n3 keeps ZooKeeper and the controller)
    assert cluster.world.run_until(lambda: all(isr == (2, 1) for isr in caches().values())
                                   and cluster.replica(leader, "t", 0).isr == (2, 1), 30.0)  # type: ignore[union-attr]
    lost = cluster.world.add_message_rule(MessageRule(
        "drop", frozenset({"ZkSetDataResponse"}), destinations=frozenset({leader}), count=1))
    cluster.world.heal()
    assert cluster.world.run_until(lambda: 3 in cluster.state("t", 0).isr, 30.0)  # type: ignore[union-attr]
    assert lost.acted == 1  # the expansion landed; its answer did not
    assert cluster.world.run_until(lambda: 3 in cluster.replica(leader, "t", 0).isr, 30.0)  # type: ignore[union-attr]
    assert cluster.world.run_until(lambda: all(set(isr) == {1, 2, 3} for isr in caches().values()), 20.0), caches()


def test_leader_that_loses_its_conditional_isr_write_fences_itself(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    leader = cluster.leader_name("t", 0)
    replica = cluster.replica(leader, "t", 0)
    assert replica is not None
    others = {n for n in cluster.names if n != leader}
    # The leader is cut off from its followers (not from ZooKeeper). Meanwhile "the
    # controller" writes a newer leader into the state node, which the leader never hears.
    cluster.world.partition({leader}, others)
    state = cluster.state("t", 0)
    assert state is not None
    new_leader = min(cluster.broker_id(n) for n in others)
    newer = zk.LeaderIsr(new_leader, state.leader_epoch + 1, tuple(sorted(cluster.broker_id(n) for n in others)),
                         state.controller_epoch)
    cluster.run(cluster.admin.zk.set(zk.partition_state_path("t", 0), zk.encode_leader_isr(newer),
                                     state.zk_version))
    assert cluster.world.run_until(lambda: not replica.is_leader, 40.0)
    fenced = [e for e in cluster.events(leader, Fenced) if e.topic == "t"]
    assert fenced, cluster.events(leader, IsrChanged)
    after = cluster.state("t", 0)
    assert after is not None and after.leader == new_leader and after.leader_epoch == newer.leader_epoch


def test_leader_and_isr_from_a_stale_controller_or_with_an_old_epoch_is_ignored(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    leader = cluster.leader_name("t", 0)
    broker = cluster.brokers[leader]
    state = cluster.state("t", 0)
    assert state is not None
    controller_epoch = broker.replicas.controller_epoch
    demote = PartitionState("t", 0, 99, state.leader_epoch + 5, (99,), 9, (1, 2, 3), controller_epoch - 1)
    response = request(cluster, leader, LeaderAndIsrRequest(99, controller_epoch - 1, broker.incarnation,
                                                            (demote,), ()))
    assert response.error == Errors.STALE_CONTROLLER_EPOCH  # type: ignore[attr-defined]
    old = PartitionState("t", 0, 2, state.leader_epoch, (2,), 9, (1, 2, 3), controller_epoch)
    response = request(cluster, leader, LeaderAndIsrRequest(99, controller_epoch, broker.incarnation, (old,), ()))
    assert response.partition_errors[0].error == Errors.FENCED_LEADER_EPOCH  # type: ignore[attr-defined]
    response = request(cluster, leader, LeaderAndIsrRequest(99, controller_epoch, broker.incarnation - 1,
                                                            (demote,), ()))
    assert response.error == Errors.STALE_BROKER_EPOCH  # type: ignore[attr-defined]
    assert cluster.replica(leader, "t", 0).is_leader  # type: ignore[union-attr]


def test_consumer_fetch_is_bounded_by_the_hw_and_reports_out_of_range(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    leader = cluster.leader_name("t", 0)
    ok = request(cluster, leader, FetchRequest("t", 0, 1))
    assert isinstance(ok, FetchResponse) and ok.batch is not None
    assert [(r.offset, r.value) for r in ok.batch.records()] == [(1, "b")]
    beyond = request(cluster, leader, FetchRequest("t", 0, 5))
    assert isinstance(beyond, FetchResponse) and beyond.error == Errors.OFFSET_OUT_OF_RANGE
    # A record appended but not yet replicated lies between HW and log end.
    others = {n for n in cluster.names if n != leader}
    cluster.world.partition({leader}, others)
    request(cluster, leader, ProduceRequest("t", 0, ("c",), acks=1))
    pending = request(cluster, leader, FetchRequest("t", 0, 3))
    assert isinstance(pending, FetchResponse) and pending.error == Errors.OFFSET_NOT_AVAILABLE
    at_hw = request(cluster, leader, FetchRequest("t", 0, 2))
    assert isinstance(at_hw, FetchResponse) and at_hw.error is None
    assert at_hw.records == () and at_hw.batch is None


def test_restarted_broker_recovers_its_log_and_hw_checkpoint(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    follower = next(n for n in cluster.names if n != cluster.leader_name("t", 0))
    cluster.world.run_for(3.0)  # a checkpoint interval passes and followers learn the HW
    cluster.run(cluster.brokers[follower].stop())
    assert cluster.events(follower, Stopped)
    cluster.crash(follower)
    broker = cluster.restart(follower)
    assert broker.replicas.checkpointed_high_watermarks.get(("t", 0)) == 2
    assert cluster.world.run_until(lambda: cluster.replica(follower, "t", 0) is not None
                                   and cluster.values(follower, "t", 0) == ["a", "b"], 30.0)


def test_start_up_announces_the_recovered_records_above_the_checkpointed_hw(cluster: SimCluster) -> None:
    # A record is written before its ``appended`` event, so a killed broker may hold records
    # it never announced; only the uncommitted tail can be one, and start-up names it.
    cluster.create_topic("t", 1, 3)
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    follower = next(n for n in cluster.names if n != cluster.leader_name("t", 0))
    cluster.kill(follower)  # before a checkpoint interval: its checkpoint says HW 0
    broker = cluster.restart(follower)
    assert broker.replicas.checkpointed_high_watermarks.get(("t", 0), 0) == 0
    recovered = [e for e in cluster.events(follower, Appended) if e.role == "recovery"]
    assert [(e.offset, e.values) for e in recovered] == [(0, ("a", "b"))]
    # Once the checkpoint covers the whole log there is nothing unannounced to name.
    cluster.world.run_for(3.0)
    cluster.run(cluster.brokers[follower].stop())
    cluster.kill(follower)
    cluster.restart(follower)
    assert len([e for e in cluster.events(follower, Appended) if e.role == "recovery"]) == 1


def test_isr_shrinking_below_min_insync_while_waiting_is_reported_as_ambiguous(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, min_isr=2)
    leader = cluster.leader_name("t", 0)
    cluster.world.partition({leader}, {n for n in cluster.names if n != leader})
    # Appended with ISR {1,2,3}; the followers never fetch it; after 3 s the ISR is the
    # leader alone. With fewer than min.insync.replicas in the ISR the HW stands still
    # (KIP-966's strict min ISR), so the record is never committed: the wait ends in a
    # timeout, which says "maybe written", never "not written".
    response = request(cluster, leader, ProduceRequest("t", 0, ("x",), timeout=20.0), 30.0)
    assert isinstance(response, ProduceResponse)
    assert response.error == Errors.REQUEST_TIMED_OUT
    assert response.error not in Errors.DEFINITELY_NOT_WRITTEN
    replica = cluster.replica(leader, "t", 0)
    assert replica is not None and replica.isr == (replica.broker_id,)
    assert "x" in cluster.values(leader, "t", 0) and replica.high_watermark == 0
    assert not any(e.offset == 0 for e in cluster.events(leader, Acked))


def test_start_up_recovers_assigned_replicas_before_registering(cluster: SimCluster) -> None:
    from floodmark.reference.log.log_dirs import partition_dir_name

    cluster.create_topic("t", 1, 3)
    cluster.send("t", 0, ["a", "b"])
    cluster.kill("n3")  # its page cache survives: both records are on disk
    disk = cluster.world.disk("n3")
    directory = next(f"/data/{d}/{partition_dir_name('t', 0)}" for d in ("a", "b")
                     if disk.exists(f"/data/{d}/{partition_dir_name('t', 0)}"))
    segment = next(name for name in disk.list_dir(directory) if name.endswith(".log"))
    torn = disk.open_append(f"{directory}/{segment}")
    torn.write(b"\x00\x00\x00\x2a half a record")  # a write cut short by the crash
    torn.fsync()
    torn.close()
    broker = cluster.restart("n3")
    # Start-up itself opened the replica and cut the torn tail, before registering.
    replica = cluster.replica("n3", "t", 0)
    assert replica is not None and replica.log_end == 2
    since_restart: list[tuple[str, str]] = []
    for e in cluster.world.events("n3"):
        if isinstance(e.body, Truncated):
            since_restart.append((e.kind, e.body.reason))
        elif isinstance(e.body, BrokerState) and e.body.incarnation == broker.incarnation:
            since_restart.append((e.kind, e.body.state))
    assert since_restart[:2] == [("truncated", "recovery"), ("broker_state", "Inactive")], since_restart
    assert cluster.world.run_until(lambda: replica.role == "follower", 30.0)


def test_start_up_keeps_trying_to_reach_zookeeper_until_its_deadline(cluster: SimCluster) -> None:
    # A restart while ZooKeeper is out of reach for longer than one connect attempt waits
    # for it, as every later start-up step does, instead of leaving the node dead.
    cluster.create_topic("t", 1, 3)
    cluster.kill("n3")
    cluster.world.cut("n3", "zk")

    async def heal() -> None:
        await cluster.client.sleep(15.0)
        cluster.world.uncut("n3", "zk")

    cluster.client.spawn(heal(), "heal")
    started = cluster.world.now()
    broker = cluster.restart("n3")
    assert cluster.world.now() - started >= 15.0 and broker.zk is not None
    assert cluster.world.run_until(lambda: cluster.replica("n3", "t", 0) is not None
                                   and cluster.replica("n3", "t", 0).role == "follower", 30.0)  # type: ignore[union-attr]


def test_start_up_outlives_a_session_expiry_while_it_waits_to_register(cluster: SimCluster) -> None:
    # A restart right after a kill waits for the old incarnation's registration to vanish
    # with its session. If ZooKeeper expires the new session meanwhile, the broker replaces
    # it (and registers on the new one) and start-up carries on with it, instead of the
    # process exiting and leaving the node dead (explore seed 10231: a controller restarted
    # after a power loss died this way, and the data only it could have re-replicated was
    # lost when the last replica lost power later).
    cluster.create_topic("t", 1, 3)
    cluster.kill("n3")

    async def expire_while_registering() -> None:
        await cluster.client.sleep(1.0)  # the old registration lives for 6 s more
        cluster.world.expire_session("n3")

    cluster.client.spawn(expire_while_registering(), "expire")
    broker = cluster.restart("n3")
    registrations = [e for e in cluster.events("n3", BrokerState) if e.state == "Inactive" and e.broker is None]
    assert len(registrations) == 2  # the killed incarnation's, then exactly one of this one
    assert broker.incarnation == registrations[-1].incarnation
    stat = cluster.world.zk.exists(zk.broker_path(3))
    assert stat is not None and stat.czxid == broker.incarnation
    assert cluster.world.run_until(lambda: cluster.replica("n3", "t", 0) is not None
                                   and cluster.replica("n3", "t", 0).role == "follower", 30.0)  # type: ignore[union-attr]


def test_start_up_deletes_replicas_no_longer_assigned(cluster: SimCluster) -> None:
    from floodmark.reference.log.partition_log import PartitionLog

    cluster.create_topic("t", 1, 3)
    cluster.crash("n3")
    disk = cluster.world.disk("n3")
    stray = PartitionLog.open(disk, "/data/b/gone-0")  # a replica of a topic deleted meanwhile
    stray.append_as_leader(["old"], 0)
    stray.flush()
    stray.close()
    cluster.restart("n3")
    assert not disk.exists("/data/b/gone-0")
    assert cluster.world.run_until(lambda: cluster.replica("n3", "t", 0) is not None, 30.0)


def test_a_broker_says_how_far_each_replica_it_holds_goes(cluster: SimCluster) -> None:
    # KIP-966's GetReplicaLogInfo, asked by a controller choosing among unclean survivors.
    cluster.create_topic("t", 1, 3)
    assert cluster.send("t", 0, ["a", "b", "c"]).status == "ok"
    leader = cluster.leader_name("t", 0)
    follower = next(n for n in cluster.names if n != leader)
    assert cluster.world.run_until(lambda: len(cluster.values(follower, "t", 0)) == 3, 10.0)
    epoch = cluster.state("t", 0).leader_epoch  # type: ignore[union-attr]
    asked = ReplicaLogInfoRequest((TopicPartition("t", 0), TopicPartition("nope", 3)))
    for node in (leader, follower):  # a follower answers too: it need not lead to say
        assert request(cluster, node, asked) == ReplicaLogInfoResponse(None, (
            ReplicaLogInfo("t", 0, epoch, 3),
            ReplicaLogInfo("nope", 3, -1, -1, Errors.UNKNOWN_TOPIC_OR_PARTITION)))
