"""Before the final reads: which partitions cannot serve yet, and why (named, never silent); after
them, on the simulator: whether every replica is in sync again (the convergence checker)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from floodmark.contracts.history import NEMESIS, read_history
from floodmark.harness.config import make_config
from floodmark.harness.schedule import Fault, Schedule
from floodmark.reference.broker.metadata_cache import MetadataCache
from floodmark.reference.broker.replica_fetcher import ReplicaFetchers
from floodmark.reference.client.admin import Admin
from floodmark.reference.controller.controller import Controller
from floodmark.reference.protocol.messages import (
    Errors,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicPartition,
)
from floodmark.reference.runtime import Coordination, CoordinationError
from floodmark.run.runner import Runner
from floodmark.run.swarm import swarm_config
from floodmark.workloads.clients import LibraryClients, partition_unhealthy


def metadata(*partitions: PartitionMetadata) -> SimpleNamespace:
    return SimpleNamespace(partitions={TopicPartition(p.topic, p.partition): p for p in partitions})


def test_each_partition_that_cannot_serve_is_named_with_why() -> None:
    known = metadata(
        PartitionMetadata("t0", 0, 1, 4, (1, 2, 3), (1, 2)),
        PartitionMetadata("t0", 1, -1, 4, (1, 2, 3), (), offline_replicas=(3,)),
        PartitionMetadata("t0", 2, 2, 4, (1, 2, 3), (2,)),
        PartitionMetadata("t0", 3, 2, 4, (1, 2, 3), (2, 3), error="LEADER_NOT_AVAILABLE"),
    )
    assert partition_unhealthy(known, "t0", 0, 2) is None  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t0", 0, None) == "ISR [1, 2] of replicas [1, 2, 3], below 3"  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t0", 1, 2) == "no leader (ISR [], offline replicas [3])"  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t0", 2, 2) == "ISR [2] of replicas [1, 2, 3], below 2"  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t0", 3, 2) == "error LEADER_NOT_AVAILABLE"  # type: ignore[arg-type]
    assert partition_unhealthy(known, "t1", 0, 2) == "not in the metadata"  # type: ignore[arg-type]


# ---------------------------------------------------------------- after the final reads

def _simulated_run(tmp_path: Path, *faults: Fault) -> dict[str, Any]:
    config = make_config({"cluster": "sim", "nemesis": "admin" if faults else "none", "time_limit": 20.0,
                          "seed": 4, "topics": 1, "partitions": 2})
    schedule = Schedule(faults, time_limit=20.0) if faults else None
    outcome = Runner(config, tmp_path, schedule=schedule, out=io.StringIO(), check=True, report=False).run()
    assert outcome.error is None
    results: dict[str, Any] = json.loads(outcome.run_dir.results.read_text())
    return results


def test_a_simulated_run_waits_for_every_replica_and_is_judged_by_it(tmp_path: Path) -> None:
    checkers = _simulated_run(tmp_path)["checkers"]
    assert checkers["convergence"]["valid"] is True and checkers["convergence"]["stats"]["controller"] >= 1
    assert 0 <= checkers["convergence"]["stats"]["waited"] < 1.0  # a quiet healthy cluster: at once


def test_a_follower_that_never_catches_up_is_caught_by_convergence_alone(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # A fetcher of broker 3 that stops for good (the stuck follower of the mutation analysis):
    # nothing is lost or misread, so every safety checker passes, but broker 3 never returns
    # to the ISR of the partitions it follows.
    original = ReplicaFetchers._fetch

    async def stuck(self: ReplicaFetchers, leader: int, address: str, batch: list[Any]) -> bool:
        if self.config.broker_id == 3:
            await self.runtime.sleep(1.0)
            return False
        return await original(self, leader, address, batch)
    monkeypatch.setattr(ReplicaFetchers, "_fetch", stuck)
    results = _simulated_run(tmp_path)
    checkers = results["checkers"]
    assert checkers["convergence"]["valid"] is False and results["valid"] is False
    anomalies = checkers["convergence"]["anomalies"]
    assert anomalies and all(a["type"] == "under-replicated-after-healing" for a in anomalies)
    assert all("below 3" in a["explanation"] for a in anomalies)
    assert all(c["valid"] is True for name, c in checkers.items() if name != "convergence")


def test_a_cluster_left_without_a_controller_is_caught_by_the_wait(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # A controller that, on a new ZooKeeper session, never stands for election again (the
    # fifth mutation round's mistake): once every broker's session was replaced, none watches
    # /controller, and the last controller's resignation leaves none. The brokers' metadata
    # still lists whole ISRs, so the wait for them passed, and the final drains failed
    # (durability unknown) with nothing naming why.
    original = Controller.replace_session

    async def without_reelection(self: Controller, zk_client: Coordination) -> None:
        self.enqueue = lambda name, handler: None if name == "elect" else Controller.enqueue(  # type: ignore[method-assign]
            self, name, handler)
        try:
            await original(self, zk_client)
        finally:
            del self.enqueue
    monkeypatch.setattr(Controller, "replace_session", without_reelection)
    outcome = Runner(swarm_config(39, "default"), tmp_path, out=io.StringIO(), check=True, report=False).run()
    convergence = json.loads(outcome.run_dir.results.read_text())["checkers"]["convergence"]
    assert outcome.valid is False and convergence["valid"] is False
    assert convergence["anomaly_counts"] == {"no-controller-after-healing": 1}
    assert convergence["stats"]["controller"] == -1


def test_partitions_added_and_replicas_moved_during_the_run_are_waited_for_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The wait held only test.yaml's t0/0 and t0/1 to whole ISRs: a partition an admin fault
    # added (t0/2), whose followers never fetch it, passed as converged.
    original = ReplicaFetchers._fetch

    async def deaf_to_added(self: ReplicaFetchers, leader: int, address: str, batch: list[Any]) -> bool:
        declared = [f for f in batch if f.partition.partition < 2]
        if not declared:
            await self.runtime.sleep(1.0)
            return False
        return await original(self, leader, address, declared)
    monkeypatch.setattr(ReplicaFetchers, "_fetch", deaf_to_added)
    results = _simulated_run(tmp_path, Fault(0, "admin", "add-partitions", 2.0, 1.0, 1),
                             Fault(1, "admin", "reassign", 4.0, 1.0, 2))
    history = read_history(next(tmp_path.glob("*/*/history.jsonl")))
    admin = {op.value["shape"]: op.value for op in history if op.f == "start-admin" and op.type == "ok"}
    added = range(2, admin["add-partitions"]["count"])
    convergence = results["checkers"]["convergence"]
    assert added and convergence["valid"] is False and results["valid"] is False
    assert [(a["topic"], a["partition"]) for a in convergence["anomalies"]] == [("t0", p) for p in added]
    assert all("ISR [" in a["explanation"] for a in convergence["anomalies"])  # short, as the wait found it
    [wait] = [op for op in history if op.f == "await-full-isr" and op.process == NEMESIS and op.type == "ok"]
    replicas = {f"{c['topic']}/{c['partition']}": c["replicas"] for c in wait.value["checked"]}
    assert list(replicas) == [f"t0/{p}" for p in range(added.stop)]
    [(moved, target)] = admin["reassign"]["moves"].items()
    assert replicas[moved] == target != admin["reassign"]["from"][moved]  # held to the replicas moved to


def test_a_topic_a_broker_does_not_know_yet_is_no_partition_to_wait_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A broker that has not heard of a topic answers for it with partition -1 and an error
    # (Kafka's topic-level UNKNOWN_TOPIC_OR_PARTITION). The wait took that for a partition
    # added during the run, waited for it until its limit and recorded 't0'/-1 as short:
    # convergence unknown (explore seed 31 with --workload log-lin, once).
    original = MetadataCache._describe

    def with_a_broker_behind(self: MetadataCache, request: MetadataRequest) -> MetadataResponse:
        answer = original(self, request)
        unknown = tuple(PartitionMetadata(topic, -1, -1, -1, (), (), (), Errors.UNKNOWN_TOPIC_OR_PARTITION)
                        for topic in request.topics or ())
        return dataclasses.replace(answer, partitions=(*answer.partitions, *unknown))
    monkeypatch.setattr(MetadataCache, "_describe", with_a_broker_behind)
    results = _simulated_run(tmp_path)
    assert results["checkers"]["convergence"]["valid"] is True, results["checkers"]["convergence"]
    [wait] = [op for op in read_history(next(tmp_path.glob("*/*/history.jsonl")))
              if op.f == "await-full-isr" and op.type == "ok"]
    assert [(c["topic"], c["partition"]) for c in wait.value["checked"]] == [("t0", 0), ("t0", 1)]


# ---------------------------------------------------------------- the controller the wait records

class _Clock:
    """A runtime's clock and sleep on virtual time, all the wait for a controller uses."""

    def __init__(self) -> None:
        self.now = 0.0
        self.asked = 0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def _controller_named(monkeypatch: pytest.MonkeyPatch, answers: list[int | Exception], timeout: float) -> int | None:
    """What ``_await_controller`` records when ZooKeeper answers ``answers`` in turn (the
    last again and again; an exception is raised where it stands)."""
    asked: list[int | Exception] = list(answers)
    clock = _Clock()

    class ZooKeeperAdmin:
        async def __aenter__(self) -> ZooKeeperAdmin:
            return self

        async def __aexit__(self, *exc_info: object) -> None:
            return None

        async def controller(self) -> int:
            clock.asked += 1
            assert clock.asked < 1000, "the wait for a controller never ends"
            answer = asked.pop(0) if len(asked) > 1 else asked[0]
            if isinstance(answer, Exception):
                raise answer
            return answer

    async def connect(runtime: Any, **_: Any) -> ZooKeeperAdmin:
        return ZooKeeperAdmin()
    monkeypatch.setattr(Admin, "connect", connect)
    clients = LibraryClients(make_config({"cluster": "sim"}), SimpleNamespace(), ["n1:9092"])  # type: ignore[arg-type]
    return asyncio.run(clients._await_controller(clock, timeout))  # type: ignore[arg-type]


def test_a_controller_named_within_the_time_left_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    # A failover still under way when the ISRs were found whole: none named for a moment.
    assert _controller_named(monkeypatch, [-1, -1, -1, 2], timeout=5.0) == 2
    assert _controller_named(monkeypatch, [3], timeout=0.0) == 3  # no time left: asked once all the same


def test_no_controller_by_the_deadline_is_recorded_as_none(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _controller_named(monkeypatch, [-1], timeout=2.0) == -1
    assert _controller_named(monkeypatch, [-1, -1, -1, 2], timeout=0.5) == -1  # named too late


def test_zookeeper_that_cannot_be_read_records_no_controller_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not -1 (none: invalid by convergence); absent, so the wait is judged on its ISRs alone.
    assert _controller_named(monkeypatch, [ConnectionError("refused")], timeout=2.0) is None
    assert _controller_named(monkeypatch, [-1, CoordinationError("session lost")], timeout=2.0) is None
