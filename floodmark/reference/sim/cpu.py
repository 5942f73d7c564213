"""Computation takes virtual time: one CPU per simulated node, and what each message costs.

Without a CPU model, handling any message costs no virtual time: a broker applying a
10,000-partition LeaderAndIsr answers as fast as one with a single partition, and a leader
flooded with fetches never falls behind, so whole classes of timing bugs (a controller's
request that takes longer than a session timeout, heartbeats queued behind bulk work) can
never show. With it, each node has one CPU that does one thing at a time:

* a node that **receives a request** works on it for ``cost(request)`` before its handler
  runs, and for ``cost(response)`` before the response leaves (building and encoding it);
* a node that **receives a response** works on it for ``cost(response)`` before the
  requester sees it (decoding it and, for a follower, appending what it fetched);
* work queues: a job starts when the CPU has finished the jobs before it, so handlers queue
  behind each other and a burst shows up as latency.

The cost of a message is ``per_message + per_partition * partitions + per_record * records``
(see :class:`CpuCosts` for the defaults and why). ZooKeeper traffic is not charged: the
server is not modelled as a machine, and a client's share of a ZooKeeper reply is small
next to the protocol work it leads to, which is charged where that work sends messages.

Known simplification: work already queued when a node is paused still completes on time
(its handler then waits at the gate until the node resumes); a dead process's queue dies
with it, so a restarted node starts with an idle CPU.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from floodmark.reference.protocol import messages as m
from floodmark.reference.sim.loop import VirtualTimeLoop


def _records(response: m.FetchResponse) -> int:
    return len(response.records) + (len(response.batch.values) if response.batch is not None else 0)


def _replica_fetch_items(response: m.ReplicaFetchResponse) -> tuple[int, int]:
    """The partitions and records of a follower's fetch: ``_records`` of each partition's
    response, summed in a loop (every follower fetch is priced twice, and a generator and a
    call per partition were most of it)."""
    records = 0
    for partition in response.partitions:
        fetched = partition.response
        records += len(fetched.records)
        if fetched.batch is not None:
            records += len(fetched.batch.values)
    return len(response.partitions), records


# (partitions, records) a message carries, by type; other messages carry neither.
_WORK_ITEMS: dict[type, Callable[[Any], tuple[int, int]]] = {
    m.ProduceRequest: lambda r: (1, len(r.values)),
    m.FetchRequest: lambda r: (1, 0),
    m.FetchResponse: lambda r: (1, _records(r)),
    m.ReplicaFetchRequest: lambda r: (len(r.partitions), 0),
    m.ReplicaFetchResponse: _replica_fetch_items,
    m.OffsetForLeaderEpochRequest: lambda r: (len(r.partitions), 0),
    m.OffsetForLeaderEpochResponse: lambda r: (len(r.partitions), 0),
    m.MetadataResponse: lambda r: (len(r.partitions), 0),
    m.LeaderAndIsrRequest: lambda r: (len(r.partitions), 0),
    m.LeaderAndIsrResponse: lambda r: (len(r.partition_errors), 0),
    m.StopReplicaRequest: lambda r: (len(r.partitions), 0),
    m.StopReplicaResponse: lambda r: (len(r.partition_errors), 0),
    m.UpdateMetadataRequest: lambda r: (len(r.partitions), 0),
    m.ControlledShutdownResponse: lambda r: (len(r.remaining_partitions), 0),
    m.DescribeLogDirsResponse: lambda r: (sum(len(d.replicas) for d in r.dirs), 0),
    m.ReplicaLogInfoRequest: lambda r: (len(r.partitions), 0),
    m.ReplicaLogInfoResponse: lambda r: (len(r.partitions), 0),
}


@dataclass(frozen=True)
class CpuCosts:
    """Seconds of one CPU a message costs. Orders of magnitude of a JVM Kafka broker, so
    that sizes matter as they do there, not a measurement of this Python implementation:

    * ``per_message`` 50 µs: a broker core handles some 20,000 small requests per second
      (network thread, request queue, handler, response);
    * ``per_partition`` 20 µs: becoming leader or follower, or updating the metadata of one
      partition, touches its log, epoch cache and fetcher state; a 10,000-partition
      LeaderAndIsr then takes 0.2 s of a broker's CPU, as large controller requests
      are known to take tenths of seconds to seconds;
    * ``per_record`` 2 µs: validating, copying and indexing one small record, about half a
      million records per second per core.
    """

    per_message: float = 50e-6
    per_partition: float = 20e-6
    per_record: float = 2e-6

    def cost(self, message: Any) -> float:
        count = _WORK_ITEMS.get(type(message))
        if count is None:
            return self._bare
        partitions, records = count(message)
        return self.per_message + self.per_partition * partitions + self.per_record * records

    @functools.cached_property
    def _bare(self) -> float:
        """The cost of a message that carries neither partitions nor records (the same
        expression, so the same float), worked out once."""
        return self.per_message + self.per_partition * 0 + self.per_record * 0


class SimCpu:
    """One node's CPU: a queue of work in virtual time, and what it did (the evidence)."""

    def __init__(self, loop: VirtualTimeLoop, costs: CpuCosts) -> None:
        self._loop = loop
        self._clock = loop.clock  # read as an attribute: a charge per message
        self.costs = costs
        self.busy_until = 0.0  # virtual time at which the work queued so far is done
        self.busy = 0.0  # seconds of work done or queued, in total
        self.jobs = 0
        self.queued = 0.0  # seconds jobs waited for the CPU, in total

    def charge(self, seconds: float) -> float:
        """Queue ``seconds`` of work behind the work queued before it; returns the virtual
        time at which it is done. The caller schedules what follows the work at that time,
        so queued work costs the simulation one timer, not a sleeping task."""
        now = self._clock.now
        start = self.busy_until if self.busy_until > now else now
        self.busy_until = start + seconds
        self.busy += seconds
        self.jobs += 1
        self.queued += start - now
        return self.busy_until

    async def handle(self, message: Any) -> None:
        """Spend the CPU time ``message`` costs, after the work queued before it."""
        await self.work(self.costs.cost(message))

    async def work(self, seconds: float) -> None:
        await asyncio.sleep(self.charge(seconds) - self._loop.time())

    def process_died(self) -> None:
        """The process's queued work died with it: the CPU is idle from now."""
        now = self._loop.time()
        if self.busy_until > now:
            self.busy -= self.busy_until - now
            self.busy_until = now
