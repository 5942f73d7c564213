"""Broker fault handling on the simulated runtime: log directories, self-fencing, pauses.

Four brokers (n1 the controller, n2..n4 the replicas) so the faults below hit replicas
without hitting the controller.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator

import pytest
from broker_fixtures import SimCluster

from floodmark.contracts.node_events import Acked, BrokerState, Fenced, LogDirOffline
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    Errors,
    ProduceRequest,
    ProduceResponse,
)


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    c = SimCluster(seed=5, nodes=4)
    assert c.brokers["n1"].controller.is_active
    yield c
    assert c.world.failures == [], c.world.failures
    c.close()


def produce(cluster: SimCluster, node: str, partition: int, value: str, timeout: float = 3.0) -> ProduceResponse:
    response = cluster.run(cluster.client.network.request(
        node, ProduceRequest("t", partition, (value,), timeout=timeout), timeout + 5.0))
    assert isinstance(response, ProduceResponse)
    return response


@pytest.mark.parametrize("fault", ["chmod", "eio"])
def test_failed_log_dir_goes_offline_while_the_other_keeps_serving(cluster: SimCluster, fault: str) -> None:
    cluster.create_topic("t", 2, 3, assignment={0: (2, 3, 4), 1: (2, 3, 4)})
    broker = cluster.brokers["n2"]
    bad, good = broker.log_dirs.dir_of("t", 0), broker.log_dirs.dir_of("t", 1)
    assert bad is not None and good is not None and bad != good
    assert produce(cluster, "n2", 0, "before").error is None
    disk = cluster.world.disk("n2")
    if fault == "chmod":
        disk.chmod(bad, 0)  # noticed at the next HW checkpoint (a new file in that directory)
    else:
        disk.fail_io(bad, errno.EIO)  # noticed at the next append
        assert produce(cluster, "n2", 0, "lost").error == Errors.KAFKA_STORAGE_ERROR
    assert cluster.world.run_until(lambda: not broker.log_dirs.is_online(bad), 5.0)
    offline = cluster.events("n2", LogDirOffline)
    assert offline and offline[-1].dir == bad and ("t", 0) in offline[-1].partitions
    assert produce(cluster, "n2", 0, "refused").error == Errors.KAFKA_STORAGE_ERROR
    # The controller heard about it and moved leadership of partition 0 away from n2.
    assert cluster.world.run_until(lambda: cluster.state("t", 0).leader not in (-1, 2), 30.0)  # type: ignore[union-attr]
    assert 2 not in cluster.state("t", 0).isr  # type: ignore[union-attr]
    new_leader = cluster.wait_leader("t", 0, 1)
    assert produce(cluster, new_leader, 0, "after").error is None
    # The replica on the good directory still leads and takes acks=all writes.
    assert cluster.state("t", 1).leader == 2  # type: ignore[union-attr]
    assert produce(cluster, "n2", 1, "still-here").error is None
    assert cluster.consume_all("t", 1) == ["still-here"]
    assert cluster.consume_all("t", 0) == ["before", "after"]
    assert cluster.world.zk.exists(zk.LOG_DIR_EVENTS) is not None
    described = cluster.run(cluster.client.network.request("n2", DescribeLogDirsRequest(), 5.0))
    assert isinstance(described, DescribeLogDirsResponse) and described.broker_id == 2
    by_path = {d.path: d for d in described.dirs}
    assert by_path[bad].error == Errors.KAFKA_STORAGE_ERROR
    assert by_path[good].error is None
    assert [(r.topic, r.partition) for r in by_path[good].replicas] == [("t", 1)]
    assert by_path[good].replicas[0].log_end == 1 and by_path[good].replicas[0].size > 0


def test_broker_cut_off_from_the_controller_fences_itself_and_comes_back_as_new_incarnation(
        cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, assignment={0: (2, 3, 4)})
    broker = cluster.brokers["n2"]
    first_incarnation = broker.incarnation
    cluster.world.partition({"n2"}, {"n1"})
    assert cluster.world.run_until(lambda: broker.heartbeat.fenced, 15.0)
    states = cluster.events("n2", BrokerState)
    assert any(e.state == "Fenced" and e.incarnation == first_incarnation for e in states)
    assert any(e.topic == "t" for e in cluster.events("n2", Fenced))
    # While fenced it refuses to act as leader.
    response = produce(cluster, "n2", 0, "refused")
    assert response.error in (Errors.BROKER_FENCED, Errors.NOT_LEADER)
    assert "refused" not in cluster.values("n2", "t", 0)
    # It re-registered as a new incarnation; the controller moved leadership away.
    assert cluster.world.run_until(lambda: broker.incarnation != first_incarnation, 15.0)
    assert cluster.wait_leader("t", 0, 1) != "n2"
    cluster.world.heal()
    replica = cluster.replica("n2", "t", 0)
    assert cluster.world.run_until(lambda: not broker.heartbeat.fenced and replica is not None
                                   and replica.role == "follower", 30.0)
    leader = cluster.leader_name("t", 0)
    assert produce(cluster, leader, 0, "later").error is None
    assert cluster.world.run_until(lambda: cluster.values("n2", "t", 0) == ["later"], 10.0)


def test_paused_leader_is_fenced_and_acknowledges_nothing_in_its_old_epoch(cluster: SimCluster) -> None:
    cluster.create_topic("t", 1, 3, assignment={0: (2, 3, 4)})
    assert produce(cluster, "n2", 0, "v0").error is None
    cluster.world.pause("n2")
    # A write that reaches the paused leader is handled only when it resumes.
    in_flight = cluster.client.spawn(cluster.client.network.request(
        "n2", ProduceRequest("t", 0, ("during-pause",), timeout=20.0), 30.0), name="produce")
    cluster.world.run_for(12.0)  # past the 6 s session timeout: the controller elects anew
    new_leader = cluster.wait_leader("t", 0, 1)
    assert new_leader != "n2"
    acked_before = len(cluster.events("n2", Acked))
    cluster.world.resume("n2")
    assert cluster.world.run_until(in_flight.done, 30.0)
    response = in_flight.result()
    assert response.error is not None  # never acknowledged
    assert len(cluster.events("n2", Acked)) == acked_before
    replica = cluster.replica("n2", "t", 0)
    assert cluster.world.run_until(lambda: replica is not None and replica.role == "follower", 30.0)
    assert cluster.consume_all("t", 0)[0] == "v0"


def test_a_beat_stuck_on_zookeeper_does_not_hold_off_self_fencing() -> None:
    # Explore seed 5173: with a 30 s ZooKeeper session, a beat's read of /controller waits
    # up to 20 s for a reply that a cut lost. The broker, cut from ZooKeeper and the
    # controller, fenced itself only once that read gave up: long after the controller had
    # fenced it and moved its leaderships, it still served reads as a deposed leader.
    cluster = SimCluster(seed=5, nodes=4, zk_session_timeout=30.0)
    try:
        cluster.create_topic("t", 1, 3, assignment={0: (2, 3, 4)})
        broker = cluster.brokers["n2"]
        fence = cluster.configs["n2"].broker_fence_timeout
        assert fence is not None
        cut_at = cluster.world.loop.time()
        cluster.world.partition({"n2"}, {"n1", "zk"})
        assert cluster.world.run_until(lambda: broker.heartbeat.fenced, fence + 2.0)
        assert cluster.world.loop.time() - cut_at <= fence + 1.5
        # It fenced itself before the controller gave up on it.
        fenced_by_controller = [e for e in cluster.events("n1", BrokerState) if e.broker == 2 and e.state == "Fenced"]
        assert fenced_by_controller == []
        assert any(e.topic == "t" for e in cluster.events("n2", Fenced))
        assert cluster.world.failures == [], cluster.world.failures
    finally:
        cluster.close()
