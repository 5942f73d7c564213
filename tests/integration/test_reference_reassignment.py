"""Replica reassignment and its cancellation with real broker processes and the CLI tools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from reference_processes import ProcessCluster, run_client, skip_reason

from floodmark.reference.client.consumer import Consumer
from floodmark.reference.client.producer import Producer
from floodmark.reference.protocol import zk_layout as zk

pytestmark = [pytest.mark.integration, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]


def floodmark(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floodmark", *args], capture_output=True, text=True, timeout=60)


def assignment(cluster: ProcessCluster, topic: str) -> dict[int, tuple[int, ...]]:
    (described,) = cluster.admin_call(lambda a: a.describe_topics([topic]))
    return {p.partition: p.replicas for p in described.partitions}


@pytest.mark.timeout(300)
def test_reassign_then_cancel_with_the_cli(tmp_path: Path) -> None:
    with ProcessCluster(tmp_path, 3) as cluster:
        zookeeper = cluster.zookeeper.address
        created = floodmark("topics", "--zookeeper", zookeeper, "--create", "--topic", "t", "--partitions", "1",
                            "--replication-factor", "2", "--config", "min.insync.replicas=1")
        assert created.returncode == 0, created.stderr
        cluster.wait_for(lambda: (s := cluster.state("t", 0)) is not None and len(s.isr) == 2, 30.0, "t in sync")
        original = assignment(cluster, "t")[0]
        spare = next(b for b in (1, 2, 3) if b not in original)

        async def produce(runtime: object) -> list[int]:
            producer = Producer(runtime, cluster.bootstrap())  # type: ignore[arg-type]
            results = [await producer.send("t", 0, f"v{i}", timeout=20.0) for i in range(20)]
            return [r.offset if r.status == "ok" and r.offset is not None else -1 for r in results]
        offsets = run_client(produce)
        assert offsets == list(range(20))

        # 1. Move the partition to (spare, original[0]): completes once spare has caught up.
        target = (spare, original[0])
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": list(target)}]}))
        executed = floodmark("reassign-partitions", "--zookeeper", zookeeper, "--execute",
                             "--reassignment-json-file", str(plan))
        assert executed.returncode == 0, executed.stderr
        cluster.wait_for(lambda: assignment(cluster, "t")[0] == target, 60.0, "reassignment complete")
        verified = floodmark("reassign-partitions", "--zookeeper", zookeeper, "--verify",
                             "--reassignment-json-file", str(plan))
        assert verified.returncode == 0 and "is complete" in verified.stdout

        async def read(runtime: object) -> list[str]:
            consumer = Consumer(runtime, cluster.bootstrap())  # type: ignore[arg-type]
            result = await consumer.fetch("t", 0, 0, timeout=20.0)
            assert result.ok, result
            return [r.value for r in result.records]
        assert run_client(read) == [f"v{i}" for i in range(20)]

        # 2. Move it towards a broker that cannot catch up (paused), then cancel (KIP-236).
        leaving = next(b for b in (1, 2, 3) if b not in target)
        cluster.pause(leaving)
        try:
            stuck = (target[0], leaving)
            plan.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": list(stuck)}]}))
            executed = floodmark("reassign-partitions", "--zookeeper", zookeeper, "--execute",
                                 "--reassignment-json-file", str(plan))
            assert executed.returncode == 0, executed.stderr
            cluster.wait_for(lambda: set(assignment(cluster, "t")[0]) == set(target) | {leaving}, 30.0,
                             "reassignment started (AR = RAR + OAR)")
            cancelled = floodmark("reassign-partitions", "--zookeeper", zookeeper, "--cancel")
            assert cancelled.returncode == 0, cancelled.stderr
            cluster.wait_for(lambda: assignment(cluster, "t")[0] == target, 30.0, "reverted to the original replicas")
            cluster.wait_for(lambda: zk.REASSIGN_PARTITIONS.rsplit("/", 1)[1] not in cluster.zk_children(zk.ADMIN),
                             30.0, "reassignment request removed")
        finally:
            cluster.resume(leaving)
        assert run_client(read) == [f"v{i}" for i in range(20)]
