"""Producer, consumer and metadata over real brokers on the sim world."""

from __future__ import annotations

import pytest
from controller_fixtures import SimBrokerCluster, sim_broker_cluster_with_topic

from floodmark.reference.client.consumer import Consumer
from floodmark.reference.client.metadata import ClientError, ClientMetadata
from floodmark.reference.client.producer import Producer
from floodmark.reference.protocol import messages as m
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=21)


@pytest.fixture
def cluster(world: SimWorld) -> SimBrokerCluster:
    return sim_broker_cluster_with_topic(world)


def test_producer_follows_a_leader_change_and_every_ack_is_read_back(world: SimWorld, cluster: SimBrokerCluster) -> None:
    producer = Producer(cluster.client, cluster.bootstrap)
    acked = {}
    for i in range(10):
        r = world.run(producer.send("t", 0, f"a{i}"))
        assert r.status == "ok" and r.offset == i
        acked[r.offset] = f"a{i}"
    leader = cluster.state("t", 0).leader
    cluster.crash(leader)
    for i in range(10):
        r = world.run(producer.send("t", 0, f"b{i}", timeout=30.0))
        assert r.status == "ok", r
        acked[r.offset] = f"b{i}"
    assert cluster.state("t", 0).leader != leader
    assert producer.metadata.leader(m.TopicPartition("t", 0)).broker_id != leader  # type: ignore[union-attr]
    consumer = Consumer(cluster.client, cluster.bootstrap)
    result = world.run(consumer.fetch("t", 0, 0))
    assert result.ok
    assert {rec.offset: rec.value for rec in result.records} == acked
    assert result.high_watermark == 20


def test_consumer_poll_advances_assigned_positions(world: SimWorld, cluster: SimBrokerCluster) -> None:
    producer = Producer(cluster.client, cluster.bootstrap)
    for p in (0, 1):
        for i in range(3):
            assert world.run(producer.send("t", p, f"{p}-{i}")).status == "ok"
    consumer = Consumer(cluster.client, cluster.bootstrap, max_records=2)
    consumer.assign([("t", 0, 0), ("t", 1, 1)])
    first = world.run(consumer.poll())
    assert [[r.value for r in f.records] for f in first] == [["0-0", "0-1"], ["1-1", "1-2"]]
    second = world.run(consumer.poll())
    assert [[r.value for r in f.records] for f in second] == [["0-2"], []]
    assert consumer.positions[m.TopicPartition("t", 0)] == 3
    with pytest.raises(ValueError, match="must be >= 0"):
        consumer.assign([("t", 0, -1)])


def test_send_without_enough_in_sync_replicas_is_failed_not_unknown(world: SimWorld, cluster: SimBrokerCluster) -> None:
    producer = Producer(cluster.client, cluster.bootstrap)
    assert world.run(producer.send("t", 0, "first")).status == "ok"
    leader = cluster.state("t", 0).leader
    for b in (1, 2, 3):
        if b != leader:
            cluster.crash(b)
    assert world.run_until(lambda: len(cluster.state("t", 0).isr) == 1, 60.0)
    r = world.run(producer.send("t", 0, "lonely", timeout=3.0))
    assert (r.status, r.error) == ("failed", m.Errors.NOT_ENOUGH_REPLICAS)
    assert r.attempts > 1  # retried until the deadline


def test_send_whose_answer_is_lost_is_unknown(world: SimWorld, cluster: SimBrokerCluster) -> None:
    producer = Producer(cluster.client, cluster.bootstrap, request_timeout=1.0)
    assert world.run(producer.send("t", 0, "first")).status == "ok"
    leader = cluster.state("t", 0).leader
    world.cut(f"n{leader}", "client")  # the request arrives, the answer does not
    r = world.run(producer.send("t", 0, "maybe", timeout=5.0))
    assert r.status == "unknown" and r.attempts == 1
    world.heal()


def test_metadata_skips_dead_bootstrap_brokers(world: SimWorld, cluster: SimBrokerCluster) -> None:
    cluster.crash(1)
    metadata = ClientMetadata(cluster.client, ["n1", "n2"])
    assert world.run(metadata.refresh(["t"]))
    assert metadata.leader(m.TopicPartition("t", 0)) is not None
    with pytest.raises(ClientError, match="no bootstrap"):
        ClientMetadata(cluster.client, [])


def test_admin_describes_log_dirs_through_zookeeper_or_bootstrap(world: SimWorld, cluster: SimBrokerCluster) -> None:
    from floodmark.reference.client.admin import describe_log_dirs_at
    admin = cluster.admin()
    answers = world.run(admin.describe_log_dirs())
    assert sorted(answers) == [1, 2, 3]
    for broker, answer in answers.items():
        assert isinstance(answer, m.DescribeLogDirsResponse) and answer.broker_id == broker
        assert sorted(d.path for d in answer.dirs) == ["/data/a", "/data/b"]
        hosted = sorted((r.topic, r.partition) for d in answer.dirs for r in d.replicas)
        assert hosted == [("t", 0), ("t", 1)]  # rf=3 on 3 brokers: every broker holds both
    cluster.crash(2)
    via_bootstrap = world.run(describe_log_dirs_at(cluster.client, ["n1"], [1, 2]))
    assert isinstance(via_bootstrap[1], m.DescribeLogDirsResponse)
    assert isinstance(via_bootstrap[2], str)  # dead: says why instead of an answer


# ----------------------------------------------------------------------------- scripted broker answers


class ScriptedRuntime:
    """A runtime whose network answers from a script (unit tests of client decisions only)."""

    def __init__(self, answers: list[object]) -> None:
        import logging
        import random
        self.answers = list(answers)
        self.sent: list[object] = []
        self.now = 0.0
        self.log = logging.getLogger("scripted")
        self.random = random.Random(0)
        self.network = self

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds

    async def request(self, address: str, message: object, timeout: float) -> object:
        if isinstance(message, m.MetadataRequest):
            return m.MetadataResponse(
                brokers=(m.BrokerInfo(1, "b1"),),
                partitions=(m.PartitionMetadata("t", 0, leader=1, leader_epoch=4, replicas=(1,), isr=(1,)),))
        self.sent.append(message)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def produce(answers: list[object], timeout: float = 1.0) -> tuple[object, ScriptedRuntime]:
    import asyncio
    runtime = ScriptedRuntime(answers)
    producer = Producer(runtime, ["b1"])  # type: ignore[arg-type]
    return asyncio.run(producer.send("t", 0, "v", timeout=timeout)), runtime


@pytest.mark.parametrize("answers,status,error", [
    ([m.ProduceResponse(None, base_offset=7)], "ok", None),
    ([m.ProduceResponse(m.Errors.NOT_LEADER), m.ProduceResponse(None, base_offset=3)], "ok", None),
    ([ConnectionRefusedError("down"), m.ProduceResponse(None, base_offset=3)], "ok", None),
    ([m.ProduceResponse(m.Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)], "unknown", m.Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
    ([m.ProduceResponse(m.Errors.REQUEST_TIMED_OUT)], "unknown", m.Errors.REQUEST_TIMED_OUT),
    ([TimeoutError("slow")], "unknown", "TimeoutError: slow"),
    ([ConnectionResetError("reset")], "unknown", "ConnectionResetError: reset"),
    ([m.ErrorResponse("UNKNOWN_SERVER_ERROR")], "unknown", "UNKNOWN_SERVER_ERROR"),
    ([m.ProduceResponse(m.Errors.NOT_LEADER), TimeoutError("slow")], "unknown", "TimeoutError: slow"),
])
def test_send_outcome_classification(answers: list[object], status: str, error: str | None) -> None:
    result, runtime = produce(answers)
    assert (result.status, result.error) == (status, error)  # type: ignore[attr-defined]
    assert all(r.current_leader_epoch == 4 for r in runtime.sent)  # type: ignore[attr-defined]
    if status == "ok":
        assert result.offset == answers[-1].base_offset  # type: ignore[attr-defined, union-attr]


def test_refusals_until_the_deadline_are_failed() -> None:
    result, runtime = produce([m.ProduceResponse(m.Errors.NOT_ENOUGH_REPLICAS)] * 100, timeout=0.55)
    assert (result.status, result.error) == ("failed", m.Errors.NOT_ENOUGH_REPLICAS)  # type: ignore[attr-defined]
    assert len(runtime.sent) == 6  # every 0.1 s until 0.55 s


def test_consumer_retries_offset_not_available_then_reads() -> None:
    import asyncio
    records = (m.Record(5, 4, "x"),)
    runtime = ScriptedRuntime([m.FetchResponse(m.Errors.OFFSET_NOT_AVAILABLE, high_watermark=5),
                               m.FetchResponse(m.Errors.OFFSET_NOT_AVAILABLE, high_watermark=5),
                               m.FetchResponse(None, records, high_watermark=6)])
    consumer = Consumer(runtime, ["b1"])  # type: ignore[arg-type]
    result = asyncio.run(consumer.fetch("t", 0, 5))
    assert result.ok and result.records == records and result.next_offset == 6
    assert len(runtime.sent) == 3
    final = asyncio.run(Consumer(ScriptedRuntime([m.FetchResponse(m.Errors.OFFSET_OUT_OF_RANGE)]),  # type: ignore[arg-type]
                                 ["b1"]).fetch("t", 0, 99))
    assert final.error == m.Errors.OFFSET_OUT_OF_RANGE  # not retriable: reported at once
