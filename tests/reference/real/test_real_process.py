"""The broker process (floodmark.reference.real.process) as a real process against a real ZooKeeper."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from runtime_fixtures import zookeeper_server_fixture  # noqa: F401
from zookeeper_server import ZooKeeperServer, free_port

from floodmark.reference.protocol import messages as m
from floodmark.reference.real import process
from floodmark.reference.real.transport import TcpNetwork, split_address


def test_bad_arguments_exit_254_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--id", "1", "--zookeeper", "127.0.0.1:1", "--log-dirs", "/tmp/a"]
    assert process.main([*base, "--listen", "nohost"]) == 254
    assert "not a host:port address: 'nohost'" in capsys.readouterr().err
    assert process.main([*base, "--listen", "127.0.0.1:1", "--variant", "nope"]) == 254
    assert process.main([*base, "--listen", "127.0.0.1:1", "--inter-broker-protocol", "2.8"]) == 254
    assert "inter-broker protocol version '2.8'" in capsys.readouterr().err
    assert process.main(["--id", "1", "--zookeeper", "z:1", "--log-dirs", ",", "--listen", "h:1"]) == 254
    assert "--log-dirs" in capsys.readouterr().err
    assert process.main([*base, "--listen", "127.0.0.1:1", "--run-id", "a b"]) == 254
    assert "--run-id: 'a b' is not a run id" in capsys.readouterr().err


def test_tunables_reach_the_broker_config() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    process.add_broker_arguments(parser)
    args = parser.parse_args(["--id", "3", "--zookeeper", "z:1", "--log-dirs", "/a, /b", "--listen", "h:9",
                              "--variant", "truncate-to-hw", "--zk-session-timeout", "2.5",
                              "--min-insync-replicas", "1", "--inter-broker-protocol", "kip-343"])
    config = process.build_config(args)
    assert (config.broker_id, config.log_dirs, config.variant.name) == (3, ("/a", "/b"), "truncate-to-hw")
    assert (config.zk_session_timeout, config.min_insync_replicas) == (2.5, 1)
    assert config.inter_broker_protocol == "kip-343" and config.protocol.isr_changes_by_request
    assert config.run_id is None  # (a broker started by hand runs for no chaos run)
    assert process.build_config(parser.parse_args(["--id", "3", "--zookeeper", "z:1", "--log-dirs", "/a",
                                                   "--listen", "h:9", "--run-id", "0eb44760cb914ca5"])
                                ).run_id == "0eb44760cb914ca5"


def wait_for(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen; broker log:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


@pytest.mark.integration
def test_broker_process_serves_survives_garbage_and_stops_cleanly_on_sigterm(
        zookeeper_server: ZooKeeperServer, tmp_path: Path) -> None:
    listen = f"127.0.0.1:{free_port()}"
    events = tmp_path / "events" / "n7.jsonl"
    log = tmp_path / "n7.log"
    command = [sys.executable, "-m", "floodmark.reference.real.process", "--id", "7",
               "--zookeeper", zookeeper_server.address, "--log-dirs", f"{tmp_path / 'a'},{tmp_path / 'b'}",
               "--listen", listen, "--events", str(events), "--zk-session-timeout", "4"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    zk = KazooClient(hosts=zookeeper_server.address)
    zk.start(10)
    try:
        wait_for(lambda: zk.exists("/brokers/ids/7") is not None, 30, "registration", proc, log)

        async def talk() -> Any:
            host, port = split_address(listen)
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"\x00\x00\x00\x03bad")
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # that connection is closed
            writer.close()
            client = TcpNetwork(None, __import__("logging").getLogger("test"))
            try:
                return await client.request(listen, m.MetadataRequest(), 5.0)
            finally:
                await client.close()

        metadata = asyncio.run(talk())
        assert isinstance(metadata, m.MetadataResponse)
        assert proc.poll() is None
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
        assert zk.exists("/brokers/ids/7") is None  # the session was closed, not left to expire
        kinds = [json.loads(line)["kind"] for line in events.read_text().splitlines()]
        assert kinds[0] == "started" and kinds[-1] == "stopped", events.read_text()[-1500:]
        assert "rejected a frame" in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        zk.stop()
        zk.close()


def start_without_zookeeper(tmp_path: Path, startup_timeout: float = 60.0) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "broker.log"
    command = [sys.executable, "-m", "floodmark.reference.real.process", "--id", "1",
               "--zookeeper", f"127.0.0.1:{free_port()}", "--log-dirs", str(tmp_path / "a"),
               "--listen", f"127.0.0.1:{free_port()}", "--zk-session-timeout", "2",
               "--startup-timeout", str(startup_timeout)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def test_unreachable_zookeeper_fails_the_start_with_exit_1(tmp_path: Path) -> None:
    # It keeps trying until its start-up deadline (a lost connect answer must not leave a
    # restarted node dead), then gives up.
    proc, log = start_without_zookeeper(tmp_path, startup_timeout=8.0)
    try:
        assert proc.wait(60) == 1
        text = log.read_text()
        assert "could not start" in text and "retrying" in text
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_sigterm_while_starting_exits_cleanly(tmp_path: Path) -> None:
    proc, log = start_without_zookeeper(tmp_path)
    try:
        # Wait until it is connecting (kazoo complains), so the signal handlers are in place.
        wait_for(lambda: "refused" in log.read_text(), 30, "connecting to ZooKeeper", proc, log)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()[-2000:]
        assert "stopped before it finished starting" in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_the_broker_process_collects_garbage_less_often() -> None:
    default = gc.get_threshold()
    try:
        process.tune_collector()
        assert gc.get_threshold() == process.COLLECTOR_THRESHOLDS
        assert gc.get_threshold()[0] > 100 * default[0]  # young collections far rarer
    finally:
        gc.set_threshold(*default)
