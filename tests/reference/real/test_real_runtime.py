"""Tests of the real runtime (floodmark.reference.real.runtime)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from runtime_fixtures import zookeeper_server_fixture  # noqa: F401
from zookeeper_server import ZooKeeperServer, free_port

from floodmark.contracts.node_events import (
    BecameLeader,
    Started,
    Stopped,
    iter_events,
    read_events_dir,
)
from floodmark.reference.protocol import messages as m
from floodmark.reference.real.files import FileStorage
from floodmark.reference.real.runtime import RealRuntime, client_runtime


def broker_runtime(tmp_path: Path, zookeeper: str | None = None) -> RealRuntime:
    listen = f"127.0.0.1:{free_port()}"
    return RealRuntime("n1", listen, listen, zookeeper, tmp_path / "events" / "n1.jsonl", FileStorage(), seed=4)


def test_events_are_written_and_numbering_continues_after_a_restart(tmp_path: Path) -> None:
    async def life() -> None:
        runtime = broker_runtime(tmp_path)
        runtime.emit(Started())
        runtime.emit(BecameLeader(topic="t", partition=0, leader_epoch=3, isr=(1, 2), log_end=0, high_watermark=0))
        await runtime.close()

    asyncio.run(life())
    asyncio.run(life())
    events = list(iter_events(tmp_path / "events" / "n1.jsonl"))
    assert [(e.seq, e.kind) for e in events] == [(0, "started"), (1, "became_leader"),
                                                 (2, "started"), (3, "became_leader")]
    assert isinstance(events[1].body, BecameLeader) and events[1].body.isr == (1, 2) and events[1].node == "n1"


def test_a_process_that_stopped_cleanly_records_nothing_more(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A task still ending after the broker's clean stop (its runtime's close cancels it) may
    emit; its event would say the process went on after it said it stopped, which the event
    readers refuse (``contracts.node_lives``). It is logged, not recorded."""
    late = BecameLeader(topic="t", partition=0, leader_epoch=3, isr=(1,), log_end=0, high_watermark=0)

    async def life() -> None:
        runtime = broker_runtime(tmp_path)
        runtime.emit(Started(broker=1))
        runtime.emit(Stopped())
        runtime.emit(late)
        await runtime.close()

    with caplog.at_level(logging.WARNING):
        asyncio.run(life())
        asyncio.run(life())
    kinds = [e.kind for e in read_events_dir(tmp_path / "events")["n1"]]
    assert kinds == ["started", "stopped", "started", "stopped"]
    assert sum("after the clean stop: not recorded" in r.getMessage() for r in caplog.records) == 2


def test_requests_between_runtimes_and_spawned_task_failures_are_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> Any:
        server = broker_runtime(tmp_path)

        async def handler(sender: str, message: Any) -> Any:
            return m.ProduceResponse(None, base_offset=len(message.values))

        await server.network.serve(handler)
        client = client_runtime("client", seed=1)

        async def failing() -> None:
            raise RuntimeError("background bug")

        task = client.spawn(failing(), "doomed")
        await asyncio.gather(task, return_exceptions=True)
        reply = await client.network.request(server.advertised_address, m.ProduceRequest("t", 0, ("a", "b")), 5.0)
        forever = client.spawn(asyncio.sleep(3600), "sleeper")
        await client.close()
        await server.close()
        return reply, forever

    with caplog.at_level(logging.ERROR):
        reply, forever = asyncio.run(scenario())
    assert reply == m.ProduceResponse(None, base_offset=2)
    assert forever.cancelled()  # close() cancelled the background task
    assert any("task doomed failed" in r.getMessage() for r in caplog.records)


def test_client_runtime_has_no_storage_and_needs_zookeeper_for_coordination() -> None:
    runtime = client_runtime("client", seed=0)
    with pytest.raises(PermissionError):
        runtime.storage.make_dirs("/tmp/x")
    with pytest.raises(RuntimeError, match="without a ZooKeeper address"):
        asyncio.run(runtime.coordination(5.0))
    assert runtime.random.random() == client_runtime("other", seed=0).random.random()


@pytest.mark.integration
def test_coordination_sessions_come_from_the_configured_zookeeper(
        zookeeper_server: ZooKeeperServer, tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime = broker_runtime(tmp_path, zookeeper_server.address)
        zk = await runtime.coordination(5.0)
        path = await zk.create("/runtime-test/eph", b"x", ephemeral=True, makepath=True)
        other = await runtime.coordination(5.0)
        assert other.session_id != zk.session_id
        stat = await other.exists(path)
        assert stat is not None and stat.ephemeral_owner == zk.session_id
        await runtime.close()  # closes both sessions
        check = client_runtime("check", 0, zookeeper_hosts=zookeeper_server.address)
        observer = await check.coordination(5.0)
        assert await observer.exists(path) is None
        await observer.delete("/runtime-test", recursive=True)
        await check.close()

    asyncio.run(scenario())
