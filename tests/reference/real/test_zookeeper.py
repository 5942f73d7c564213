"""Tests of the real ZooKeeper server harness (zookeeper_server)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zookeeper_server as zookeeper
from kazoo.client import KazooClient
from zookeeper_server import ZooKeeperServer, ZooKeeperUnavailable, missing_requirements

needs_zookeeper = pytest.mark.skipif(missing_requirements() is not None,
                                     reason=f"needs a real ZooKeeper: {missing_requirements()}")


def process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def started_server(directory: Path) -> tuple[ZooKeeperServer, int]:
    """A started server and its process group (its process leads a group of its own)."""
    server = ZooKeeperServer(directory)
    server.start()
    assert server.process is not None
    return server, server.process.pid


@needs_zookeeper
@pytest.mark.integration
def test_server_starts_serves_and_leaves_nothing_behind(tmp_path: Path) -> None:
    server, pgid = started_server(tmp_path / "zk")
    try:
        config = (tmp_path / "zk" / "zoo.cfg").read_text()
        assert "admin.enableServer=false" in config and f"clientPort={server.port}" in config
        client = KazooClient(hosts=server.address)
        client.start(5)
        client.create("/hello", b"world")
        assert client.get("/hello")[0] == b"world"
        client.stop()
        client.close()
    finally:
        server.stop()
    assert not server.running
    assert not process_group_alive(pgid)


@needs_zookeeper
@pytest.mark.integration
def test_data_survives_a_restart_in_the_same_directory(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk") as server:
        client = KazooClient(hosts=server.address)
        client.start(5)
        client.create("/kept", b"1")
        client.stop()
        client.close()
        server.stop()
        server.start()
        client = KazooClient(hosts=server.address)
        client.start(5)
        assert client.get("/kept")[0] == b"1"
        client.stop()
        client.close()


@needs_zookeeper
@pytest.mark.integration
def test_stop_kills_a_paused_server(tmp_path: Path) -> None:
    server, pgid = started_server(tmp_path / "zk")
    server.pause()
    server.stop(grace=2.0)
    assert not process_group_alive(pgid)


@needs_zookeeper
@pytest.mark.integration
def test_an_occupied_port_is_refused_before_starting(tmp_path: Path) -> None:
    occupied = ZooKeeperServer(tmp_path / "first")
    occupied.start()
    try:
        clash = ZooKeeperServer(tmp_path / "second", port=occupied.port)
        with pytest.raises(ZooKeeperUnavailable, match="already in use"):
            clash.start(timeout=15)
        assert not clash.running
    finally:
        occupied.cleanup()


@needs_zookeeper
@pytest.mark.integration
def test_a_server_that_dies_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk")
    original = server.write_config

    def broken_config() -> Path:
        path = original()
        path.write_text(path.read_text().replace("tickTime=500", "tickTime=not-a-number"))
        return path

    server.write_config = broken_config  # type: ignore[method-assign]
    with pytest.raises(ZooKeeperUnavailable, match="zookeeper.log"):
        server.start(timeout=20)
    assert not server.running


def test_missing_java_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zookeeper.shutil, "which", lambda name: None)
    assert "java" in (missing_requirements() or "")
    server = ZooKeeperServer()
    try:
        with pytest.raises(ZooKeeperUnavailable, match="java"):
            server.start()
    finally:
        server.cleanup()


def test_owned_directory_is_removed_on_cleanup() -> None:
    server = ZooKeeperServer()
    server.write_config()
    assert server.directory.exists()
    server.cleanup()
    assert not server.directory.exists()


def test_atexit_hook_stops_running_servers_and_removes_their_directories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stopped: list[float] = []
    server = ZooKeeperServer(tmp_path / "zk")
    server.stop = lambda grace=5.0: stopped.append(grace)  # type: ignore[method-assign]
    leftover = tmp_path / "zk-owned"
    leftover.mkdir()
    # Only this test's server and directory: other tests' live servers must not be touched.
    monkeypatch.setattr(zookeeper, "_RUNNING", {id(server): server})
    monkeypatch.setattr(zookeeper, "_OWNED_DIRECTORIES", {str(leftover): None})
    zookeeper._stop_all()
    assert stopped == [1.0]
    assert not leftover.exists()


@needs_zookeeper
@pytest.mark.integration
def test_the_server_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    script = (
        "import os; from zookeeper_server import ZooKeeperServer; "
        f"s = ZooKeeperServer({str(tmp_path / 'zk')!r}); s.start(); print(s.process.pid, flush=True); "
        "os.kill(os.getpid(), 9)"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "fixtures")}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    pgid = int(result.stdout.split()[0])
    deadline = time.monotonic() + 10
    while process_group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_group_alive(pgid), "the JVM outlived the killed Python process"
