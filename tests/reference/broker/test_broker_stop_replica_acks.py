"""StopReplica and acks=0 on real brokers in the simulated runtime.

StopReplica (``ReplicaManager.handle_stop_replica``): with ``delete`` the replica's log
directory leaves the broker's disk and the broker no longer knows the partition; without it
the replica stops (no role, no fetcher) but keeps its log; from a controller older than the
newest one seen it is refused and changes nothing. Topic deletion through the admin client
ends in StopReplica(delete) on every live replica, and in a start-up deletion on a replica
that was down meanwhile.

acks=0 (``produce.py``, ``producer.py``): the leader appends and answers at once, like
acks=1, without looking at the ISR or min.insync.replicas; floodmark's Producer reports the
send ok at the leader's offset (a Kafka acks=0 client learns no offset). The record is
committed, and readable by consumers, only once the followers copied it, and an ok under
acks=0 promises no durability. A non-leader refuses acks=0 like any produce.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from broker_fixtures import SimCluster, request, running_cluster

from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    Fenced,
    IsrChanged,
    KnownKind,
    LogDirOffline,
    Rejected,
    Truncated,
    UnknownKind,
)
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    Errors,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
)

T0 = TopicPartition("t", 0)


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    # Followers leave the ISR after 3 s, well before the controller fences a silent broker (9 s).
    yield from running_cluster(seed=7, replica_lag_time_max=3.0)


@pytest.fixture
def patient_cluster() -> Iterator[SimCluster]:
    # Followers stay in the ISR for 30 s: the HW moves only as they copy the records.
    yield from running_cluster(seed=7, replica_lag_time_max=30.0)


def stop_replica(cluster: SimCluster, node: str, *, delete: bool, controller_epoch: int | None = None,
                 incarnation: int | None = None) -> StopReplicaResponse:
    """Send ``node`` a StopReplica for t-0 as the current controller would (unless told otherwise)."""
    broker = cluster.brokers[node]
    epoch = broker.replicas.controller_epoch if controller_epoch is None else controller_epoch
    message = StopReplicaRequest(controller_id=1, controller_epoch=epoch,
                                 broker_incarnation=broker.incarnation if incarnation is None else incarnation,
                                 partitions=(T0,), delete=delete)
    response = request(cluster, node, message)
    assert isinstance(response, StopReplicaResponse), response
    return response


def log_path(cluster: SimCluster, node: str, topic: str = "t", partition: int = 0) -> str:
    path = cluster.brokers[node].log_dirs.log_path(topic, partition)
    assert path is not None, f"{node} has no log directory for {topic}-{partition}"
    return path


def followers(cluster: SimCluster, topic: str = "t", partition: int = 0) -> list[str]:
    leader = cluster.leader_name(topic, partition)
    return [n for n in cluster.names if n != leader]


def bodies(cluster: SimCluster, node: str, since: int = 0) -> list[KnownKind | UnknownKind]:
    return [e.body for e in cluster.world.events(node)[since:]]


def stop_replica_rejections(cluster: SimCluster, node: str) -> list[Rejected]:
    return [e for e in cluster.events(node, Rejected) if e.request == "StopReplica"]


# ---------------------------------------------------------------------- StopReplica


def test_stop_replica_with_delete_removes_the_leaders_log_and_it_stops_serving(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    leader = cluster.leader_name("t", 0)
    broker = cluster.brokers[leader]
    disk = cluster.world.disk(leader)
    path = log_path(cluster, leader)
    assert disk.exists(path) and disk.list_dir(path)
    cluster.world.run_for(6.0)  # a HW checkpoint names t-0
    assert ("t", 0) in broker.log_dirs.read_high_watermarks()[0]
    events_before = len(cluster.world.events(leader))

    response = stop_replica(cluster, leader, delete=True)

    assert response.error is None
    assert [(p.topic, p.partition, p.error) for p in response.partition_errors] == [("t", 0, None)]
    assert not disk.exists(path)
    assert cluster.replica(leader, "t", 0) is None
    assert broker.log_dirs.dir_of("t", 0) is None and ("t", 0) not in broker.log_dirs.replicas()
    assert ("t", 0) not in broker.replicas.checkpointed_high_watermarks
    # Clients and followers are told the partition is not here (retriable: refresh metadata).
    for acks in (-1, 1, 0):
        produced = request(cluster, leader, ProduceRequest("t", 0, ("x",), acks=acks))
        assert isinstance(produced, ProduceResponse)
        assert produced.error == Errors.UNKNOWN_TOPIC_OR_PARTITION and produced.base_offset == -1
    consumed = request(cluster, leader, FetchRequest("t", 0, 0))
    assert isinstance(consumed, FetchResponse) and consumed.error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    follower_id = cluster.broker_id(followers(cluster)[0])
    fetched = request(cluster, leader, FetchRequest("t", 0, 2, replica_id=follower_id, current_leader_epoch=0))
    assert isinstance(fetched, FetchResponse) and fetched.error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    # Nothing brings the directory back, and the next HW checkpoint forgets the partition.
    cluster.world.run_for(6.0)
    assert not disk.exists(path) and cluster.replica(leader, "t", 0) is None
    assert ("t", 0) not in broker.log_dirs.read_high_watermarks()[0]
    # Node events: a stop is not a refusal, a fence or a disk failure; the refused produces are.
    new = bodies(cluster, leader, events_before)
    assert not any(isinstance(b, LogDirOffline | Fenced | BecameLeader | BecameFollower) for b in new)
    assert not stop_replica_rejections(cluster, leader)
    refused = [b for b in new if isinstance(b, Rejected) and b.request == "Produce"]
    assert len(refused) == 3 and {b.why for b in refused} == {Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert not any(isinstance(b, Acked) for b in new)


def test_stop_replica_with_delete_on_a_follower_ends_its_fetching_for_good(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, min_isr=2)
    assert cluster.send("t", 0, ["a"]).status == "ok"
    leader = cluster.leader_name("t", 0)
    follower = followers(cluster)[0]
    broker = cluster.brokers[follower]
    disk = cluster.world.disk(follower)
    path = log_path(cluster, follower)
    assert broker.fetchers.has(("t", 0))

    assert stop_replica(cluster, follower, delete=True).partition_errors[0].error is None

    assert not broker.fetchers.has(("t", 0)) and not disk.exists(path)
    # The follower never fetches again: the leader drops it from the ISR, then commits without it.
    result = cluster.send("t", 0, ["b"], timeout=20.0)
    assert result.status == "ok" and result.offset == 1
    state = cluster.state("t", 0)
    assert state is not None and cluster.broker_id(follower) not in state.isr
    shrinks = [e for e in cluster.events(leader, IsrChanged) if e.change == "shrink"]
    assert shrinks and cluster.broker_id(follower) not in shrinks[-1].isr
    cluster.world.run_for(3.0)
    assert not disk.exists(path) and cluster.replica(follower, "t", 0) is None
    assert not any(e.role == "follower" and e.topic == "t" for e in cluster.events(follower, Appended)
                   if e.offset >= 1)


def test_stop_replica_without_delete_stops_a_follower_but_keeps_its_log(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, min_isr=2)
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    follower = followers(cluster)[0]
    broker = cluster.brokers[follower]
    disk = cluster.world.disk(follower)
    path = log_path(cluster, follower)
    files = disk.list_dir(path)
    assert files

    response = stop_replica(cluster, follower, delete=False)

    assert response.error is None and response.partition_errors[0].error is None
    replica = cluster.replica(follower, "t", 0)
    assert replica is not None and replica.role == "none"
    assert not broker.fetchers.has(("t", 0))
    assert disk.exists(path) and disk.list_dir(path) == files
    assert broker.log_dirs.dir_of("t", 0) is not None
    assert cluster.values(follower, "t", 0) == ["a", "b"]
    # It copies nothing more; the leader commits without it once it left the ISR.
    assert cluster.send("t", 0, ["c"], timeout=20.0).status == "ok"
    cluster.world.run_for(3.0)
    assert cluster.values(follower, "t", 0) == ["a", "b"]
    assert cluster.broker_id(follower) not in cluster.state("t", 0).isr  # type: ignore[union-attr]
    produced = request(cluster, follower, ProduceRequest("t", 0, ("x",), acks=1))
    assert isinstance(produced, ProduceResponse) and produced.error == Errors.NOT_LEADER
    assert cluster.values(follower, "t", 0) == ["a", "b"]


def test_stop_replica_without_delete_makes_a_leader_stop_serving_and_keep_its_log(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    assert cluster.send("t", 0, ["a", "b"]).status == "ok"
    leader = cluster.leader_name("t", 0)
    disk = cluster.world.disk(leader)
    path = log_path(cluster, leader)

    assert stop_replica(cluster, leader, delete=False).partition_errors[0].error is None

    replica = cluster.replica(leader, "t", 0)
    assert replica is not None and not replica.is_leader and replica.role == "none"
    produced = request(cluster, leader, ProduceRequest("t", 0, ("x",), acks=1))
    assert isinstance(produced, ProduceResponse) and produced.error == Errors.NOT_LEADER
    consumed = request(cluster, leader, FetchRequest("t", 0, 0))
    assert isinstance(consumed, FetchResponse) and consumed.error == Errors.NOT_LEADER
    assert disk.exists(path) and cluster.values(leader, "t", 0) == ["a", "b"]
    assert Errors.NOT_LEADER in {e.why for e in cluster.events(leader, Rejected) if e.request == "Produce"}


def test_waiting_acks_all_produce_is_answered_as_ambiguous_when_its_replica_is_deleted(
        cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    leader = cluster.leader_name("t", 0)
    broker = cluster.brokers[leader]
    cluster.world.partition({leader}, set(followers(cluster)))  # the ISR never gets the record

    async def produce_then_delete() -> tuple[object, float]:
        waiting = asyncio.ensure_future(cluster.client.network.request(
            leader, ProduceRequest("t", 0, ("w",), timeout=20.0), 30.0))
        await cluster.client.sleep(0.5)
        assert not waiting.done()
        stopped_at = cluster.world.now()
        stop = StopReplicaRequest(1, broker.replicas.controller_epoch, broker.incarnation, (T0,), delete=True)
        stopped = await cluster.client.network.request(leader, stop, 5.0)
        assert isinstance(stopped, StopReplicaResponse) and stopped.error is None
        answer = await waiting
        return answer, cluster.world.now() - stopped_at

    answer, waited = cluster.run(produce_then_delete())
    # Appended, never committed, and now gone with the log: the client must say "unknown".
    assert isinstance(answer, ProduceResponse) and answer.error == Errors.REQUEST_TIMED_OUT
    assert answer.error not in Errors.DEFINITELY_NOT_WRITTEN
    assert waited < 1.0  # answered when the replica stopped, not after the 20 s timeout
    assert not any(e.topic == "t" for e in cluster.events(leader, Acked))


def test_stop_replica_from_a_stale_controller_epoch_is_refused_and_changes_nothing(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    assert cluster.send("t", 0, ["a"]).status == "ok"
    leader = cluster.leader_name("t", 0)
    follower = followers(cluster)[0]
    for node in (leader, follower):
        broker = cluster.brokers[node]
        epoch = broker.replicas.controller_epoch
        assert epoch >= 1, "no older controller epoch to pose as"
        path = log_path(cluster, node)
        role = cluster.replica(node, "t", 0).role  # type: ignore[union-attr]
        fetching = broker.fetchers.has(("t", 0))

        for delete in (True, False):
            response = stop_replica(cluster, node, delete=delete, controller_epoch=epoch - 1)
            assert response.error == Errors.STALE_CONTROLLER_EPOCH and response.partition_errors == ()

        assert broker.replicas.controller_epoch == epoch
        assert cluster.world.disk(node).exists(path)
        replica = cluster.replica(node, "t", 0)
        assert replica is not None and replica.role == role and broker.fetchers.has(("t", 0)) == fetching
        rejections = stop_replica_rejections(cluster, node)
        assert [(e.why, e.controller_epoch) for e in rejections] == [("stale controller epoch", epoch - 1)] * 2
    assert cluster.brokers[follower].fetchers.has(("t", 0))
    # Replication goes on as before.
    assert cluster.send("t", 0, ["b"]).status == "ok"
    assert cluster.world.run_until(lambda: all(cluster.values(n, "t", 0) == ["a", "b"] for n in cluster.names), 10.0)


def test_stop_replica_for_an_older_incarnation_is_refused_and_changes_nothing(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    leader = cluster.leader_name("t", 0)
    broker = cluster.brokers[leader]
    path = log_path(cluster, leader)
    response = stop_replica(cluster, leader, delete=True, incarnation=broker.incarnation - 1)
    assert response.error == Errors.STALE_BROKER_EPOCH and response.partition_errors == ()
    assert cluster.world.disk(leader).exists(path)
    assert cluster.replica(leader, "t", 0).is_leader  # type: ignore[union-attr]
    assert cluster.send("t", 0, ["a"]).status == "ok"


def test_refused_stop_replica_for_an_older_incarnation_is_a_rejected_node_event(cluster: SimCluster) -> None:
    # DESIGN (node events): a node records every request it rejected, and why. LeaderAndIsr
    # for an older incarnation is recorded (replica_manager.py handle_leader_and_isr); the
    # same refusal of a StopReplica is not (replica_manager.py handle_stop_replica).
    cluster.create_topic("t", 1, 3)
    leader = cluster.leader_name("t", 0)
    broker = cluster.brokers[leader]
    response = stop_replica(cluster, leader, delete=True, incarnation=broker.incarnation - 1)
    assert response.error == Errors.STALE_BROKER_EPOCH
    assert [e.why for e in stop_replica_rejections(cluster, leader)] == ["stale broker incarnation"]


def test_admin_topic_deletion_removes_the_logs_from_every_replicas_disk(cluster: SimCluster) -> None:
    cluster.create_topic("t", 2, 3)
    cluster.create_topic("keep", 1, 3)
    for p in (0, 1):
        assert cluster.send("t", p, [f"v{p}"]).status == "ok"
    assert cluster.send("keep", 0, ["k0"]).status == "ok"
    paths = {(n, p): log_path(cluster, n, "t", p) for n in cluster.names for p in (0, 1)}
    keep_paths = {n: log_path(cluster, n, "keep", 0) for n in cluster.names}
    # On every broker the topic's two logs are in different directories: both get deleted from.
    assert all(paths[(n, 0)].rsplit("/", 1)[0] != paths[(n, 1)].rsplit("/", 1)[0] for n in cluster.names)
    # One replica is down (its data intact) while the topic is deleted.
    controller = cluster.name_of(cluster.run(cluster.admin.controller()))
    down = next(n for n in reversed(cluster.names) if n != controller)
    cluster.kill(down)
    assert cluster.world.run_until(
        lambda: cluster.world.zk.exists(zk.broker_path(cluster.broker_id(down))) is None, 30.0)
    events_before = {n: len(cluster.world.events(n)) for n in cluster.names}

    cluster.run(cluster.admin.delete_topic("t"))

    live = [n for n in cluster.names if n != down]
    assert cluster.world.run_until(
        lambda: cluster.world.zk.exists(zk.topic_path("t")) is None
        and cluster.world.zk.exists(zk.delete_topic_path("t")) is None
        and not any(cluster.world.disk(n).exists(paths[(n, p)]) for n in live for p in (0, 1)), 30.0)
    for n in live:
        for p in (0, 1):
            assert cluster.replica(n, "t", p) is None
        assert cluster.brokers[n].log_dirs.partitions_in("/data/a") + \
            cluster.brokers[n].log_dirs.partitions_in("/data/b") == [("keep", 0)]
    assert cluster.run(cluster.admin.list_topics()) == ["keep"]
    metadata = request(cluster, live[0], MetadataRequest(("t",)))
    assert isinstance(metadata, MetadataResponse)
    assert [p.error for p in metadata.partitions] == [Errors.UNKNOWN_TOPIC_OR_PARTITION]
    # The broker that was down still has its copy, and drops it as it starts.
    down_disk = cluster.world.disk(down)
    assert all(down_disk.exists(paths[(down, p)]) for p in (0, 1))
    cluster.restart(down)
    assert not any(down_disk.exists(paths[(down, p)]) for p in (0, 1))
    assert cluster.world.run_until(lambda: cluster.replica(down, "keep", 0) is not None
                                   and cluster.values(down, "keep", 0) == ["k0"], 30.0)
    assert cluster.replica(down, "t", 0) is None and cluster.replica(down, "t", 1) is None
    # The other topic lives on, on every disk.
    assert all(cluster.world.disk(n).exists(keep_paths[n]) for n in cluster.names)
    assert cluster.send("keep", 0, ["k1"]).status == "ok"
    # Deleting is neither a refusal nor a disk failure in anyone's node events.
    for n in cluster.names:
        assert not any(isinstance(b, LogDirOffline) for b in bodies(cluster, n, events_before[n]))
        assert not stop_replica_rejections(cluster, n)


# ---------------------------------------------------------------------- acks=0


def test_acks_zero_is_ok_at_the_leaders_offset_and_readable_once_replicated(patient_cluster: SimCluster) -> None:
    cluster = patient_cluster
    cluster.create_topic("t", 1, 3, min_isr=2)
    assert cluster.send("t", 0, ["a"]).status == "ok"
    leader = cluster.leader_name("t", 0)
    others = followers(cluster)
    cluster.world.partition({leader}, set(others))  # the client still reaches the leader

    result = cluster.send("t", 0, ["b", "c"], acks=0)

    # floodmark's Producer reports the leader's answer: ok at the first record's offset
    # (Kafka's acks=0 producer would complete the send without an offset).
    assert result.status == "ok" and result.offset == 1 and result.attempts == 1
    acked = cluster.events(leader, Acked)[-1]
    assert (acked.acks, acked.first_offset, acked.offset) == (0, 1, 2)
    assert acked.high_watermark == 1  # acknowledged before any follower had it
    assert cluster.values(leader, "t", 0) == ["a", "b", "c"]
    assert all(cluster.values(n, "t", 0) == ["a"] for n in others)
    # Not committed yet: a consumer reads nothing past "a".
    pending = request(cluster, leader, FetchRequest("t", 0, 1))
    assert isinstance(pending, FetchResponse) and pending.error is None
    assert pending.batch is None and pending.high_watermark == 1

    cluster.world.heal()
    # Fetches lost in the partition time out first; the ISR keeps every follower meanwhile.
    replica = cluster.replica(leader, "t", 0)
    assert replica is not None
    assert cluster.world.run_until(lambda: replica.high_watermark == 3, 20.0)
    assert len(replica.isr) == 3 and not cluster.events(leader, IsrChanged)
    assert all(cluster.values(n, "t", 0) == ["a", "b", "c"] for n in others)
    assert cluster.consume_all("t", 0) == ["a", "b", "c"]


def test_acks_zero_is_not_held_to_min_insync_replicas(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, min_isr=3)
    leader = cluster.leader_name("t", 0)
    replica = cluster.replica(leader, "t", 0)
    assert replica is not None
    cluster.world.partition({leader}, set(followers(cluster)))
    assert cluster.world.run_until(lambda: replica.isr == (cluster.broker_id(leader),), 30.0)
    assert replica.is_leader
    refused = request(cluster, leader, ProduceRequest("t", 0, ("all",), acks=-1))
    assert isinstance(refused, ProduceResponse) and refused.error == Errors.NOT_ENOUGH_REPLICAS
    accepted = request(cluster, leader, ProduceRequest("t", 0, ("zero",), acks=0))
    assert isinstance(accepted, ProduceResponse) and accepted.error is None and accepted.base_offset == 0
    assert cluster.values(leader, "t", 0) == ["zero"]


def test_acks_zero_to_a_non_leader_is_refused_and_writes_nothing(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3)
    assert cluster.send("t", 0, ["a"]).status == "ok"
    follower = followers(cluster)[0]
    assert cluster.world.run_until(lambda: cluster.values(follower, "t", 0) == ["a"], 10.0)
    end = cluster.replica(follower, "t", 0).log_end  # type: ignore[union-attr]
    response = request(cluster, follower, ProduceRequest("t", 0, ("x",), acks=0))
    assert isinstance(response, ProduceResponse)
    assert response.error == Errors.NOT_LEADER and response.base_offset == -1
    assert response.error in Errors.DEFINITELY_NOT_WRITTEN
    assert cluster.replica(follower, "t", 0).log_end == end  # type: ignore[union-attr]
    assert not cluster.events(follower, Acked)
    assert [e.why for e in cluster.events(follower, Rejected) if e.request == "Produce"] == [Errors.NOT_LEADER]
    assert "x" not in cluster.consume_all("t", 0)


def test_acks_zero_producer_with_a_stale_leader_reports_the_real_leaders_offset(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, assignment={0: (1, 2, 3)})
    producer = cluster.producer(acks=0)
    cluster.kill("n1")
    stale = cluster.wait_leader("t", 0, 1)
    assert cluster.run(producer.send("t", 0, "a")).status == "ok"  # the producer now knows `stale`
    cluster.restart("n1")
    assert cluster.world.run_until(lambda: 1 in cluster.state("t", 0).isr, 30.0)  # type: ignore[union-attr]
    cluster.run(cluster.admin.preferred_replica_election([T0]))
    assert cluster.wait_leader("t", 0, 2) == "n1"
    events_before = len(cluster.world.events(stale))

    result = cluster.run(producer.send("t", 0, "b"))

    # The old leader refused it (nothing written there); the retry reached n1.
    assert result.status == "ok" and result.attempts == 2 and result.offset == 1
    new = bodies(cluster, stale, events_before)
    assert [b.why for b in new if isinstance(b, Rejected)] == [Errors.NOT_LEADER]
    assert not any(isinstance(b, Acked) or (isinstance(b, Appended) and b.role == "leader") for b in new)
    acked = cluster.events("n1", Acked)[-1]
    assert (acked.acks, acked.first_offset, acked.leader_epoch) == (0, 1, 2)
    assert cluster.values("n1", "t", 0) == ["a", "b"]
    assert cluster.world.run_until(
        lambda: cluster.replica("n1", "t", 0).high_watermark == 2, 10.0)  # type: ignore[union-attr]
    assert cluster.consume_all("t", 0) == ["a", "b"]


def test_acks_zero_ok_promises_no_durability(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, assignment={0: (1, 2, 3)})
    assert cluster.send("t", 0, ["a"]).status == "ok"
    cluster.world.partition({"n1"}, {"n2", "n3"})
    lost = cluster.send("t", 0, ["lost"], acks=0)
    assert lost.status == "ok" and lost.offset == 1
    cluster.kill("n1")
    cluster.world.heal()
    new = cluster.wait_leader("t", 0, 1)
    assert cluster.send("t", 0, ["b"]).status == "ok"
    assert cluster.values(new, "t", 0) == ["a", "b"]
    # The old leader comes back and gives up the record it acknowledged.
    cluster.restart("n1")
    assert cluster.world.run_until(lambda: cluster.replica("n1", "t", 0) is not None
                                   and cluster.values("n1", "t", 0) == ["a", "b"], 30.0)
    truncated = cluster.events("n1", Truncated)
    assert truncated and truncated[-1].to_offset == 1
    assert cluster.consume_all("t", 0) == ["a", "b"]
