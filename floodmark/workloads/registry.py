"""Workloads by name: the workers a test runs, and the reads that close it.

A workload is a way of using the log. Each offers *workers* (the client processes of the
fault phase, see :class:`floodmark.harness.generator.Worker`) and optionally *final reads*
that run after every fault is healed and the cluster has recovered: the queue workload's
final drain reads every partition from offset 0 to its end.
"""

from __future__ import annotations

import asyncio

from floodmark.harness.config import WORKLOADS, TestConfig
from floodmark.harness.generator import Worker
from floodmark.harness.recorder import Recorder
from floodmark.harness.seeds import Seeds
from floodmark.workloads.clients import ClientFactory
from floodmark.workloads.log_lin import LogLinWorker
from floodmark.workloads.queue import (
    QueueWorker,
    drain_partition,
    positions_value,
    roles,
    worker_partitions,
)


def make_workers(config: TestConfig, clients: ClientFactory, seeds: Seeds) -> list[Worker]:
    """One worker per unit of concurrency, each with its own seeded stream."""
    if config.workload == "queue":
        workers = roles(config.concurrency)
        shares = worker_partitions(config.topic_partitions, workers)
        return [QueueWorker(config, clients, w, seeds.worker(w), role, shares[w]) for w, role in enumerate(workers)]
    if config.workload == "log-lin":
        return [LogLinWorker(config, clients, w, seeds.worker(w)) for w in range(config.concurrency)]
    raise ValueError(f"unknown workload {config.workload!r}; choose one of {', '.join(WORKLOADS)}")


async def final_reads(config: TestConfig, clients: ClientFactory, recorder: Recorder, first_process: int) -> int:
    """Run the workload's closing reads as fresh processes from ``first_process``.

    Returns how many partitions could not be read to their end.
    """
    if config.workload != "queue":
        return 0
    session = await clients.open("drain")
    failures = 0
    try:
        for number, (topic, partition) in enumerate(config.topic_partitions):
            process = first_process + number
            invoke_value = positions_value([((topic, partition), 0)])
            recorder.record("invoke", process, "drain", invoke_value)
            clock = asyncio.get_running_loop().time  # the run's clock, virtual in the simulator
            deadline = clock() + config.drain_timeout
            completion = await drain_partition(session, topic, partition, deadline, clock)
            if completion.type != "ok":
                failures += 1
            recorder.record(completion.type, process, "drain", completion.value,
                            node=completion.node, error=completion.error)
    finally:
        await session.close()
    return failures
