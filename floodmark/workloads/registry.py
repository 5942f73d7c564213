"""Workloads by name: the workers a test runs, and the reads that close it.

A workload is a way of using the log. Each offers *workers* (the client processes of the
fault phase, see :class:`floodmark.harness.generator.Worker`) and *final reads* that run
after every fault is healed and the cluster has recovered, each reading one partition from
offset 0 to its end (the leader's high watermark, once it covers the leader's whole log), as
Jepsen's log workloads end: the queue workload's final drain (``drain``), and the log-lin
workload's ``final-read``, an op of the log model whose completion holds every record, so
that an acknowledged append lost at the tail of a log, which no later append took the offset
of and no read reached, is seen missing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from floodmark.contracts.history import DRAIN, FINAL_READ
from floodmark.harness.config import WORKLOADS, TestConfig
from floodmark.harness.generator import Completion, Worker
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
    if config.workload not in ("queue", "log-lin"):
        return 0
    session = await clients.open("drain")
    failures = 0
    queue = config.workload == "queue"
    f = DRAIN if queue else FINAL_READ
    try:
        for number, (topic, partition) in enumerate(config.topic_partitions):
            process = first_process + number
            # (the log model's reads name their partition in a map; the queue's in a list of positions)
            invoke_value: Any = positions_value([((topic, partition), 0)]) if queue else \
                {"topic": topic, "partition": partition, "offset": 0}
            recorder.record("invoke", process, f, invoke_value)
            clock = asyncio.get_running_loop().time  # the run's clock, virtual in the simulator
            deadline = clock() + config.drain_timeout
            completion = await drain_partition(session, topic, partition, deadline, clock)
            if completion.type != "ok":
                failures += 1
            value = completion.value if queue else _as_final_read(invoke_value, completion)
            recorder.record(completion.type, process, f, value, node=completion.node, error=completion.error)
    finally:
        await session.close()
    return failures


def _as_final_read(invoked: dict[str, Any], drained: Completion) -> dict[str, Any]:
    """A drain's completion as the log model's final read: the invocation with every record
    and the high watermark read to, when it read to the end."""
    if drained.type != "ok":
        return invoked
    entry = drained.value[0]
    return {**invoked, "records": entry["records"], "high_watermark": entry["high_watermark"]}
