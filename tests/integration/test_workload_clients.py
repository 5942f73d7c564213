"""The workloads' client sessions against real brokers: topics, sends, polls and the drain.

Three brokers of the reference run in this process on real TCP with a real ZooKeeper (no
network namespaces, so no root needed), and the queue workload runs against them through
``floodmark.workloads.clients.LibraryClients``, exactly as the runner drives it.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from zookeeper_server import ZooKeeperServer, free_port

from floodmark.backends.real_clients import RealClientHost
from floodmark.contracts.history import read_history
from floodmark.harness.config import TestConfig
from floodmark.harness.generator import Generator
from floodmark.harness.recorder import Recorder
from floodmark.harness.seeds import Seeds
from floodmark.reference.broker.broker import Broker
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.real.files import FileStorage
from floodmark.reference.real.runtime import RealRuntime
from floodmark.workloads.clients import LibraryClients
from floodmark.workloads.registry import final_reads, make_workers

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("java") is None or not Path("/usr/share/java/zookeeper.jar").exists(),
                       reason="needs Java and Debian's ZooKeeper (/usr/share/java/zookeeper.jar)"),
]


async def start_brokers(zookeeper: str, root: Path, count: int) -> tuple[list[Broker], list[RealRuntime]]:
    brokers, runtimes = [], []
    for broker_id in range(1, count + 1):
        address = f"127.0.0.1:{free_port()}"
        runtime = RealRuntime(f"n{broker_id}", address, address, zookeeper, root / f"n{broker_id}.jsonl",
                              FileStorage(), broker_id)
        broker = Broker(runtime, BrokerConfig(broker_id, (str(root / f"n{broker_id}" / "a"),)))  # type: ignore[arg-type]
        await broker.start()
        brokers.append(broker)
        runtimes.append(runtime)
    return brokers, runtimes


@pytest.mark.timeout(180)
def test_queue_workload_against_real_brokers(tmp_path: Path) -> None:
    config = TestConfig(cluster="local", nemesis=(), topics=2, partitions=2, concurrency=4, rate=300)
    with ZooKeeperServer(tmp_path / "zk") as zookeeper:
        zookeeper.start()

        async def go() -> int:
            brokers, runtimes = await start_brokers(zookeeper.address, tmp_path, 3)
            try:
                clients = LibraryClients(config, RealClientHost(zookeeper.address, 1), [r.advertised_address for r in runtimes])
                await clients.create_topics(timeout=60)
                recorder = Recorder(tmp_path / "history.jsonl")
                generator = Generator(recorder, make_workers(config, clients, Seeds(1)), config.rate, 7.0)
                await generator.run(3.0)
                assert await clients.wait_for_recovery(10) == []
                failures = await final_reads(config, clients, recorder, generator.highest_process + 1)
                recorder.close()
                await clients.close()
                return failures
            finally:
                for broker in brokers:
                    await broker.stop()
                for runtime in runtimes:
                    await runtime.close()

        assert asyncio.run(go()) == 0
    ops = read_history(tmp_path / "history.jsonl")
    sends = [op for op in ops if op.f == "send" and op.type == "ok"]
    polls = [op for op in ops if op.f == "poll" and op.type == "ok"]
    drains = [op for op in ops if op.f == "drain" and op.type == "ok"]
    assert len(sends) > 100 and polls and len(drains) == 4
    drained = {(d["topic"], d["partition"], o): v for op in drains for d in op.value for o, v in d["records"]}
    for op in sends:
        assert drained[(op.value["topic"], op.value["partition"], op.value["offset"])] == op.value["value"]
    polled = [r for op in polls for d in op.value for r in d["records"]]
    assert polled, "consumers read records"
