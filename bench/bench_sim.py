"""Simulator speed: CPU seconds per simulated minute of a 3-broker queue workload.

The ``sim`` backend runs ZooKeeper, the brokers, the network, the disks and the clients in
one process on virtual time, and ``floodmark explore`` runs thousands of seeds on it, so
what a simulated second costs in real CPU decides how much can be explored. The target is
60 simulated seconds of the default queue test (3 brokers, 2 topics of 3 partitions,
replication factor 3, 200 client ops per second over 8 workers: half send with acks=all,
half poll) in about one CPU second.

The workers here are the queue workload's in miniature (sends to random partitions through
the batching producer, polls from remembered positions), paced on virtual time; the
harness's generator and recorder are left out, as they cost the same on every backend.
``--cpu-model`` switches on the simulated CPU (handling takes virtual time); ``--profile``
prints the hottest functions.

    python bench/bench_sim.py [--seconds 60] [--runs 3] [--seed 1] [--cpu-model] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from broker_fixtures import SimCluster  # noqa: E402

from floodmark.reference.client.accumulator import SendAccumulator  # noqa: E402
from floodmark.reference.client.consumer import Consumer  # noqa: E402
from floodmark.reference.client.producer import Producer  # noqa: E402
from floodmark.reference.sim.cpu import CpuCosts  # noqa: E402
from floodmark.reference.sim.runtime import SimRuntime  # noqa: E402

TOPICS = ("t0", "t1")
PARTITIONS = 3
RATE = 200.0  # ops per second over all workers
WORKERS = 8


def build(seed: int, cpu_model: bool) -> SimCluster:
    cluster = SimCluster(seed=seed, nodes=3, cpu=CpuCosts() if cpu_model else None)
    for topic in TOPICS:
        cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3, min_isr=2)
    return cluster


def workload(cluster: SimCluster, seconds: float) -> dict[str, int]:
    """Run the workers for ``seconds`` of virtual time; returns op counts by outcome."""
    client: SimRuntime = cluster.client
    sender = SendAccumulator(Producer(client, cluster.names))
    partitions = [(t, p) for t in TOPICS for p in range(PARTITIONS)]
    counts = {"send ok": 0, "send other": 0, "poll ok": 0, "poll other": 0}
    interval = WORKERS / RATE  # each worker's pace

    async def producer(worker: int) -> None:
        sent = 0
        while True:
            topic, partition = client.random.choice(partitions)
            sent += 1
            result = await sender.send(topic, partition, f"{worker}-{sent}", timeout=5.0)
            counts["send ok" if result.status == "ok" else "send other"] += 1
            await client.sleep(interval)

    async def consumer(worker: int) -> None:
        reader = Consumer(client, cluster.names)
        positions = {tp: 0 for tp in partitions}
        while True:
            tp = client.random.choice(partitions)
            result = await reader.fetch(tp[0], tp[1], positions[tp], timeout=5.0, max_records=100)
            if result.ok:
                positions[tp] = result.next_offset
                counts["poll ok"] += 1
            else:
                counts["poll other"] += 1
            await client.sleep(interval)

    for w in range(WORKERS):
        role = producer if w < WORKERS // 2 else consumer
        client.spawn(role(w), f"worker-{w}")
    cluster.world.run_for(seconds)
    return counts


def measure(seed: int, seconds: float, cpu_model: bool, profile: bool) -> tuple[float, dict[str, int]]:
    cluster = build(seed, cpu_model)
    profiler = cProfile.Profile() if profile else None
    try:
        start = time.process_time()
        if profiler is not None:
            profiler.enable()
        counts = workload(cluster, seconds)
        if profiler is not None:
            profiler.disable()
        spent = time.process_time() - start
        assert cluster.world.failures == [], cluster.world.failures
    finally:
        cluster.close()
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return spent, counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds of workload")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpu-model", action="store_true", help="handling takes virtual time")
    parser.add_argument("--profile", action="store_true", help="print the hottest functions (one run)")
    args = parser.parse_args(argv)
    figures: list[float] = []
    counts: dict[str, Any] = {}
    for _ in range(1 if args.profile else args.runs):
        spent, counts = measure(args.seed, args.seconds, args.cpu_model, args.profile)
        figures.append(spent)
    ops = sum(counts.values())
    print(f"{args.seconds:.0f} simulated s, {ops} ops {counts}: "
          f"median {statistics.median(figures):.2f} CPU s over {len(figures)} run(s) "
          f"({', '.join(f'{f:.2f}' for f in figures)})")


if __name__ == "__main__":
    main()
