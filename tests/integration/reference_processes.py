"""Real broker processes against a real ZooKeeper, for the reference's integration tests.

:class:`ProcessCluster` starts a ZooKeeper server and ``floodmark broker`` processes on this
machine (each in its own process group, two log directories each, node events written to
``events/n<id>.jsonl``), and can kill -9, SIGSTOP/SIGCONT and restart them. Everything is
stopped on exit, whatever happened. Clients talk to the brokers through the client library
over the real runtime (:func:`run` opens one for the duration of a coroutine).

Brokers can be started without DAC override (``setpriv`` drops ``dac_override`` and
``dac_read_search`` from the bounding set) so that a ``chmod 000`` on a log directory really
denies them even when the tests run as root.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from zookeeper_server import ZooKeeperServer, free_port, missing_requirements

from floodmark.reference.client.admin import Admin
from floodmark.reference.client.consumer import Consumer
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.real.runtime import client_runtime

T = TypeVar("T")

BROKER_COMMAND = (sys.executable, "-m", "floodmark", "broker")  # `floodmark broker`


def skip_reason() -> str | None:
    return missing_requirements()


def no_dac_override_reason() -> str | None:
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is needed to drop DAC override"
    return None


class ProcessCluster:
    def __init__(self, root: Path, brokers: int = 3, *, no_dac_override: bool = False,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.root = root
        self.zookeeper = ZooKeeperServer(root / "zk")
        self.count = brokers
        self.no_dac_override = no_dac_override
        self.extra_args = extra_args
        self.broker_args: dict[int, tuple[str, ...]] = {}  # one broker's own, after extra_args (they win)
        self.addresses: dict[int, str] = {}
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.paused: set[int] = set()

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> ProcessCluster:
        try:
            self.zookeeper.start()
            for broker in range(1, self.count + 1):
                self.addresses[broker] = f"127.0.0.1:{free_port()}"
                self.start_broker(broker)
            self.wait_for(lambda: len(self.zk_children(zk.BROKER_IDS)) == self.count, 30.0, "brokers registered")
            self.wait_for(lambda: self.controller() != -1, 30.0, "a controller elected")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for broker in sorted(self.processes):
            process = self.processes[broker]
            if process.poll() is None:
                with _suppress_lookup():
                    os.killpg(process.pid, signal.SIGCONT)
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes.clear()
        self.zookeeper.stop()

    def log_dirs(self, broker: int) -> tuple[Path, Path]:
        return self.root / f"n{broker}" / "a", self.root / f"n{broker}" / "b"

    def start_broker(self, broker: int) -> None:
        a, b = self.log_dirs(broker)
        for d in (a, b):
            d.mkdir(parents=True, exist_ok=True)
        (self.root / "events").mkdir(exist_ok=True)
        command = [*BROKER_COMMAND, "--id", str(broker),
                   "--zookeeper", self.zookeeper.address, "--log-dirs", f"{a},{b}",
                   "--listen", self.addresses[broker], "--events", str(self.root / "events" / f"n{broker}.jsonl"),
                   *self.extra_args, *self.broker_args.get(broker, ())]
        if self.no_dac_override:
            command = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                       "--bounding-set=-dac_override,-dac_read_search", *command]
        log = open(self.root / f"n{broker}.log", "ab")  # noqa: SIM115 (closed with the process)
        self.processes[broker] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                  start_new_session=True)
        log.close()

    def kill(self, broker: int) -> None:
        """kill -9: no controlled shutdown, no flush."""
        process = self.processes[broker]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def terminate(self, broker: int, timeout: float = 90.0) -> int:
        """SIGTERM: a clean shutdown (controlled shutdown first); returns the exit code."""
        process = self.processes[broker]
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=timeout)

    def pause(self, broker: int) -> None:
        os.killpg(self.processes[broker].pid, signal.SIGSTOP)
        self.paused.add(broker)

    def resume(self, broker: int) -> None:
        os.killpg(self.processes[broker].pid, signal.SIGCONT)
        self.paused.discard(broker)

    def restart(self, broker: int) -> None:
        self.wait_for(lambda: str(broker) not in self.zk_children(zk.BROKER_IDS), 30.0,
                      f"broker {broker}'s old registration to expire")
        self.start_broker(broker)
        self.wait_for(lambda: str(broker) in self.zk_children(zk.BROKER_IDS), 30.0, f"broker {broker} registered")

    def bootstrap(self) -> list[str]:
        return [self.addresses[b] for b in sorted(self.addresses)]

    def log(self, broker: int) -> str:
        return (self.root / f"n{broker}.log").read_text(errors="replace")

    def events(self, broker: int) -> list[dict[str, Any]]:
        path = self.root / "events" / f"n{broker}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip().endswith("}")]

    # ------------------------------------------------------------------ observing ZooKeeper

    def admin_call(self, call: Callable[[Admin], Awaitable[T]]) -> T:
        async def go(admin: Admin) -> T:
            return await call(admin)
        return run(self.zookeeper.address, go, bootstrap=self.bootstrap())

    def zk_children(self, path: str) -> list[str]:
        async def go(admin: Admin) -> list[str]:
            try:
                return await admin.zk.get_children(path)
            except Exception:
                return []
        return run(self.zookeeper.address, go)

    def controller(self) -> int:
        return run(self.zookeeper.address, lambda admin: admin.controller())

    def controller_epoch(self) -> int:
        return run(self.zookeeper.address, lambda admin: admin.controller_epoch())

    def state(self, topic: str, partition: int) -> zk.LeaderIsr | None:
        async def go(admin: Admin) -> zk.LeaderIsr | None:
            try:
                data, stat = await admin.zk.get(zk.partition_state_path(topic, partition))
            except Exception:
                return None
            return zk.decode_leader_isr(topic, partition, data, stat.version)
        return run(self.zookeeper.address, go)

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- n{b}.log (tail)\n{self.log(b)[-3000:]}" for b in sorted(self.processes)
                                 if (self.root / f"n{b}.log").exists())
                raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{logs}")
            time.sleep(0.2)


def run(zookeeper: str | None, work: Callable[[Admin], Awaitable[T]], *, bootstrap: list[str] | None = None) -> T:
    """Run ``work`` with an Admin on a fresh client runtime (and close both)."""
    async def main() -> T:
        runtime = client_runtime("test-client", 0, zookeeper_hosts=zookeeper)
        try:
            async with await Admin.connect(runtime, bootstrap=bootstrap or []) as admin:  # type: ignore[arg-type]
                return await work(admin)
        finally:
            await runtime.close()
    return asyncio.run(main())


def run_client(work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work(runtime)`` on a client runtime without ZooKeeper."""
    async def main() -> T:
        runtime = client_runtime("test-client", 0)
        try:
            return await work(runtime)
        finally:
            await runtime.close()
    return asyncio.run(main())


def read_back(bootstrap: list[str], topic: str, partitions: range | tuple[int, ...]) -> dict[tuple[int, int], str]:
    """Every record of ``topic``'s ``partitions``, by (partition, offset), read with a consumer."""
    async def read_all(runtime: Any) -> dict[tuple[int, int], str]:
        consumer = Consumer(runtime, bootstrap)
        found: dict[tuple[int, int], str] = {}
        for partition in partitions:
            offset = 0
            while True:
                result = await consumer.fetch(topic, partition, offset, timeout=20.0)
                assert result.ok, result
                for record in result.records:
                    found[(partition, record.offset)] = record.value
                if not result.records:
                    break
                offset = result.next_offset
        return found
    return run_client(read_all)


class _suppress_lookup:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> bool:
        return kind is not None and issubclass(kind, ProcessLookupError)
