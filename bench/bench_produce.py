"""Produce throughput and latency of the reference implementation (acks=all, rf=3, 3 brokers).

Starts a real ZooKeeper and three real broker processes (``floodmark broker``) on this
machine, creates a topic with replication factor 3 and min.insync.replicas=2 through the
admin client, then runs several concurrent producers sending batches with acks=all for a
fixed time. Prints acknowledged records per second and the p50/p99 latency of a batch
(send to acknowledgement), for each run and the median of the runs.

    python bench/bench_produce.py [--runs 3] [--seconds 10] [--batch 200] [--producers 6]
                                  [--partitions 3]

Everything started is stopped at the end (brokers with SIGTERM, then ZooKeeper).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))  # the test support
from zookeeper_server import ZooKeeperServer, free_port, missing_requirements  # noqa: E402

from floodmark.reference.client.admin import Admin
from floodmark.reference.client.producer import Producer
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import ACKS_ALL
from floodmark.reference.real.runtime import client_runtime


def start_brokers(zookeeper: str, work: Path, count: int) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    processes, addresses = [], []
    for broker_id in range(1, count + 1):
        port = free_port()
        address = f"127.0.0.1:{port}"
        dirs = ",".join(str(work / f"b{broker_id}" / d) for d in ("a", "b"))
        log = open(work / f"broker{broker_id}.log", "wb")  # noqa: SIM115 (closed with the process)
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "floodmark", "broker", "--id", str(broker_id),
             "--zookeeper", zookeeper, "--log-dirs", dirs, "--listen", address,
             "--events", str(work / "events" / f"n{broker_id}.jsonl")],
            stdout=log, stderr=subprocess.STDOUT))
        addresses.append(address)
    return processes, addresses


def stop_brokers(processes: list[subprocess.Popen[bytes]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


async def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


async def one_run(admin: Admin, addresses: list[str], run: int, args: argparse.Namespace) -> tuple[float, float, float]:
    topic = f"bench{run}"
    await admin.create_topic(topic, args.partitions, 3, {zk.MIN_INSYNC_REPLICAS: "2"})

    async def ready() -> bool:
        described = await admin.describe_topics([topic])
        return bool(described) and all(p.leader >= 0 and len(p.isr) == 3 for p in described[0].partitions)

    await wait_for(ready, 30.0, f"topic {topic} to be fully replicated")
    runtime = client_runtime(f"bench-client-{run}", seed=run)
    producer = Producer(runtime, addresses, acks=ACKS_ALL, request_timeout=10.0)
    # Warm up: metadata and connections.
    for p in range(args.partitions):
        result = await producer.send(topic, p, "warm-up")
        if result.status != "ok":
            raise RuntimeError(f"warm-up send failed: {result}")
    latencies: list[float] = []
    acked = 0
    failed = 0
    stop_at = time.monotonic() + args.seconds

    async def worker(index: int) -> None:
        nonlocal acked, failed
        sequence = 0
        while time.monotonic() < stop_at:
            partition = (index + sequence) % args.partitions
            values = [f"{index}-{sequence}-{i}" for i in range(args.batch)]
            sequence += 1
            started = time.monotonic()
            result = await producer.send_batch(topic, partition, values, timeout=10.0)
            if result.status == "ok":
                latencies.append(time.monotonic() - started)
                acked += len(values)
            else:
                failed += 1

    began = time.monotonic()
    await asyncio.gather(*(worker(i) for i in range(args.producers)))
    elapsed = time.monotonic() - began
    await runtime.close()
    # Delete the topic so that its idle replicas do not load the next run.
    await admin.delete_topic(topic)

    async def deleted() -> bool:
        return topic not in await admin.list_topics()

    await wait_for(deleted, 30.0, f"topic {topic} to be deleted")
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000 if latencies else float("nan")
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000 if latencies else float("nan")
    rate = acked / elapsed
    print(f"run {run}: {acked} records acknowledged in {elapsed:.1f}s = {rate:,.0f} records/s; "
          f"batch latency p50 {p50:.1f} ms, p99 {p99:.1f} ms; {failed} failed batches", flush=True)
    return rate, p50, p99


async def bench(zookeeper: str, addresses: list[str], args: argparse.Namespace) -> None:
    admin_runtime = client_runtime("bench-admin", seed=0, zookeeper_hosts=zookeeper)
    admin = await Admin.connect(admin_runtime, bootstrap=addresses)
    try:
        async def registered() -> bool:
            return len(await admin.brokers()) == 3 and await admin.controller() >= 0

        await wait_for(registered, 60.0, "three brokers and a controller")
        results = [await one_run(admin, addresses, run, args) for run in range(1, args.runs + 1)]
    finally:
        await admin.close()
        await admin_runtime.close()
    rates, p50s, p99s = zip(*results)
    print(f"median of {args.runs} runs: {statistics.median(rates):,.0f} acknowledged records/s "
          f"(acks=all, rf=3, min.insync.replicas=2, {args.producers} producers, batches of {args.batch}); "
          f"latency p50 {statistics.median(p50s):.1f} ms, p99 {statistics.median(p99s):.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--producers", type=int, default=6)
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="bench-produce-"))
    server = ZooKeeperServer(work / "zk")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        server.start()
        processes, addresses = start_brokers(server.address, work, 3)
        asyncio.run(bench(server.address, addresses, args))
    finally:
        stop_brokers(processes)
        server.stop()
        if os.environ.get("BENCH_KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
