"""Durability across a leader kill, with real broker processes and a real ZooKeeper.

A topic with replication factor 3 and min.insync.replicas 2 takes acks=all writes; the
partition's leader is killed with SIGKILL in the middle; every write the producer saw
acknowledged must be read back at its offset, with its value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from reference_processes import ProcessCluster, read_back, run_client, skip_reason

from floodmark.reference.client.producer import Producer

pytestmark = [pytest.mark.integration, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]


@pytest.mark.timeout(240)
def test_every_acknowledged_record_survives_a_leader_kill(tmp_path: Path) -> None:
    with ProcessCluster(tmp_path, 3) as cluster:
        cluster.admin_call(lambda a: a.create_topic("t", 2, 3, {"min.insync.replicas": "2"}))
        cluster.wait_for(lambda: all((s := cluster.state("t", p)) is not None and len(s.isr) == 3 for p in (0, 1)),
                         30.0, "topic t in sync")

        async def produce(runtime: Any, prefix: str, count: int) -> dict[tuple[int, int], str]:
            producer = Producer(runtime, cluster.bootstrap())
            acked: dict[tuple[int, int], str] = {}
            for i in range(count):
                partition = i % 2
                result = await producer.send("t", partition, f"{prefix}-{i}", timeout=30.0)
                assert result.status in ("ok", "unknown"), result
                if result.status == "ok":
                    assert result.offset is not None
                    acked[(partition, result.offset)] = f"{prefix}-{i}"
            return acked

        acked = run_client(lambda rt: produce(rt, "before", 40))
        assert len(acked) == 40
        state = cluster.state("t", 0)
        assert state is not None
        cluster.kill(state.leader)
        acked.update(run_client(lambda rt: produce(rt, "after", 40)))
        new_state = cluster.state("t", 0)
        assert new_state is not None and new_state.leader not in (state.leader, -1)
        assert new_state.leader_epoch > state.leader_epoch

        found = read_back(cluster.bootstrap(), "t", (0, 1))
        missing = {k: v for k, v in acked.items() if found.get(k) != v}
        assert not missing, f"acknowledged but not read back: {missing}"
