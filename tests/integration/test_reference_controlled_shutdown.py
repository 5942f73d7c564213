"""Controlled shutdown with real processes: SIGTERM moves a broker's leaderships away first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from reference_processes import ProcessCluster, run_client, skip_reason

from floodmark.reference.client.consumer import Consumer
from floodmark.reference.client.producer import Producer

pytestmark = [pytest.mark.integration, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]


@pytest.mark.timeout(240)
def test_sigterm_moves_leaders_before_the_broker_stops(tmp_path: Path) -> None:
    with ProcessCluster(tmp_path, 3) as cluster:
        cluster.admin_call(lambda a: a.create_topic("t", 3, 3, {"min.insync.replicas": "2"}))
        cluster.wait_for(lambda: all((s := cluster.state("t", p)) is not None and len(s.isr) == 3 for p in range(3)),
                         30.0, "t in sync")

        async def produce(runtime: Any, prefix: str) -> list[Any]:
            producer = Producer(runtime, cluster.bootstrap())
            return [await producer.send("t", i % 3, f"{prefix}-{i}", timeout=20.0) for i in range(30)]
        assert all(r.status == "ok" for r in run_client(lambda rt: produce(rt, "before")))
        victim = cluster.state("t", 0).leader  # type: ignore[union-attr]
        led = [p for p in range(3) if cluster.state("t", p).leader == victim]  # type: ignore[union-attr]
        assert cluster.terminate(victim) == 0
        for p in led:
            state = cluster.state("t", p)
            assert state is not None and state.leader not in (victim, -1) and victim not in state.isr
        own = [e for e in cluster.events(victim) if e["kind"] in ("broker_state", "stopped")]
        assert any(e.get("state") == "Stopping" for e in own) and own[-1]["kind"] == "stopped"
        assert all(r.status == "ok" for r in run_client(lambda rt: produce(rt, "after")))

        async def read(runtime: Any) -> list[str]:
            consumer = Consumer(runtime, cluster.bootstrap())
            values = []
            for p in range(3):
                result = await consumer.fetch("t", p, 0, timeout=20.0)
                assert result.ok, result
                values += [r.value for r in result.records]
            return values
        values = set(run_client(read))
        assert {f"before-{i}" for i in range(30)} | {f"after-{i}" for i in range(30)} <= values
