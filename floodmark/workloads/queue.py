"""The queue workload: Jepsen's Kafka test, producers and consumers over a few topics.

Producers send unique values (``"<worker>-<n>"``) to random partitions of their own share of
the test's topics with the configured acks (``all`` by default) and record the offset each
send was acknowledged at. Consumers *assign* themselves a few partitions of their share and
*poll* them from the offsets they remember, sometimes reassigning; a poll records, per partition, where it
started, the records it got and the high watermark the leader reported. After the fault
phase the runner heals everything and waits for recovery, then the *final drain* reads every
partition from offset 0 to its end, so the checkers can tell what survived.

Op shapes (history values), shared with the checkers and the report:

    send    invoke {"topic", "partition", "value"}; ok adds "offset"; fail/info = invoke value
    assign  invoke/ok [{"topic", "partition", "offset"}]   (positions reset to these)
    poll    invoke [{"topic", "partition", "offset"}] (fetch positions);
            ok [{"topic", "partition", "offset", "records": [[offset, value], ...],
                 "high_watermark"}]
    drain   as poll, one op per partition, starting at offset 0 and reading to the end

Each role's workers split the partitions between them (:func:`worker_partitions`), as
Jepsen's independent keys give each key its own group of threads: a worker blocks on one op
at a time, so with every worker free to pick any partition a paused leader soon holds every
worker until its op times out; with shares it holds only the workers of the partitions it
leads, and the others go on.

A send that may have been written (timeout, connection lost after sending, an ambiguous
error) ends ``info``; its process is retired and the worker opens new clients as a new
process (see :mod:`floodmark.harness.generator`). A poll that fails changes nothing.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

from floodmark.harness.config import TestConfig
from floodmark.harness.generator import Completion, CompletionType, Invocation
from floodmark.workloads.clients import ClientFactory, ClientSession, FetchOutcome, SessionWorker

Partition = tuple[str, int]

REASSIGN_PROBABILITY = 0.05  # per consumer op
MAX_ASSIGNED = 3  # partitions per consumer at most
DRAIN_BATCH = 500


def positions_value(positions: Sequence[tuple[Partition, int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p, "offset": o} for (t, p), o in positions]


class QueueWorker(SessionWorker):
    """One worker: a producer or a consumer, by role."""

    def __init__(
        self, config: TestConfig, clients: ClientFactory, worker: int, rng: random.Random, role: str,
        partitions: Sequence[Partition] | None = None,
    ) -> None:
        self.config = config
        self.clients = clients
        self.worker = worker
        self.rng = rng
        self.role = role  # "producer" | "consumer"
        # The partitions this worker acts on (default: every partition of the test).
        self.partitions: list[Partition] = list(config.topic_partitions if partitions is None else partitions)
        self.sent = 0
        # Consumer memory: the next offset to fetch per partition, kept across processes and
        # reassignments ("remembered offsets"), and the current assignment.
        self.positions: dict[Partition, int] = {}
        self.assigned: list[Partition] = []
        self.pending_reset: dict[Partition, int] = {}
        self.session: ClientSession | None = None

    # -- the Worker protocol

    def next_op(self) -> Invocation:
        if self.role == "producer":
            self.sent += 1
            topic, partition = self.rng.choice(self.partitions)
            value = f"{self.worker}-{self.sent}"
            return Invocation("send", {"topic": topic, "partition": partition, "value": value})
        if not self.assigned or self.pending_reset or self.rng.random() < REASSIGN_PROBABILITY:
            return Invocation("assign", positions_value(self._new_assignment()))
        return Invocation("poll", positions_value([(tp, self.positions.get(tp, 0)) for tp in self.assigned]))

    def timeout_type(self, f: str) -> CompletionType:
        return "info" if f == "send" else "fail"

    async def invoke(self, op: Invocation) -> Completion:
        if op.f == "assign":
            return self._assign(op.value)
        session = await self._session()
        if op.f == "send":
            return await self._send(session, op.value)
        if op.f == "poll":
            return await self._poll(session, op.value)
        raise ValueError(f"queue workload has no op {op.f!r}")

    # -- ops

    def _new_assignment(self) -> list[tuple[Partition, int]]:
        if self.pending_reset and self.assigned:
            chosen = list(self.assigned)
        else:
            count = self.rng.randint(1, min(MAX_ASSIGNED, len(self.partitions)))
            chosen = sorted(self.rng.sample(self.partitions, count))
        positions = []
        for tp in chosen:
            offset = self.pending_reset.get(tp, self.positions.get(tp, 0))
            positions.append((tp, offset))
        return positions

    def _assign(self, value: list[dict[str, Any]]) -> Completion:
        # Assignment is local to the consumer (no group coordinator): it always succeeds.
        self.assigned = [(d["topic"], d["partition"]) for d in value]
        for d in value:
            self.positions[(d["topic"], d["partition"])] = d["offset"]
        self.pending_reset.clear()
        return Completion("ok", value)

    async def _send(self, session: ClientSession, value: dict[str, Any]) -> Completion:
        outcome = await session.send(value["topic"], value["partition"], value["value"], self.config.acks_code)
        if outcome.type == "ok":
            return Completion("ok", {**value, "offset": outcome.offset}, node=outcome.node)
        return Completion(outcome.type, value, error=outcome.error, node=outcome.node)

    async def _poll(self, session: ClientSession, value: list[dict[str, Any]]) -> Completion:
        if len(value) == 1:  # the common case; gather would add a task per partition
            d = value[0]
            fetches = [await session.fetch(d["topic"], d["partition"], d["offset"], self.config.poll_max_records)]
        else:
            fetches = await asyncio.gather(*(
                session.fetch(d["topic"], d["partition"], d["offset"], self.config.poll_max_records) for d in value
            ))
        results, errors = [], []
        for d, fetched in zip(value, fetches):
            tp = (d["topic"], d["partition"])
            if fetched.error is not None:
                errors.append(f"{d['topic']}/{d['partition']}: {fetched.error}")
                if fetched.out_of_range:
                    # The log no longer has our position (it was truncated): start over from
                    # the beginning, as a consumer with auto.offset.reset=earliest would.
                    self.pending_reset[tp] = 0
                continue
            results.append(poll_entry(d["topic"], d["partition"], d["offset"], fetched))
            if fetched.records:
                self.positions[tp] = fetched.records[-1][0] + 1
        if not results:
            return Completion("fail", value, error="; ".join(errors))
        return Completion("ok", results, error="; ".join(errors) or None)


def poll_entry(topic: str, partition: int, offset: int, fetched: FetchOutcome) -> dict[str, Any]:
    return {
        "topic": topic, "partition": partition, "offset": offset,
        "records": [[o, v] for o, v in fetched.records],
        "high_watermark": fetched.high_watermark,
    }


async def drain_partition(
    session: ClientSession, topic: str, partition: int, deadline: float, clock: Any,
) -> Completion:
    """Read one partition from offset 0 to its high watermark, retrying until ``deadline``.

    The completion is ``ok`` with every record (as one poll entry starting at 0) when the
    read reached the high watermark the leader reported, ``fail`` otherwise.
    """
    records: list[list[Any]] = []
    offset = 0
    last_error: str | None = None
    high_watermark = -1
    while clock() < deadline:
        fetched = await session.fetch(topic, partition, offset, DRAIN_BATCH)
        if fetched.error is not None:
            last_error = fetched.error
            await asyncio.sleep(0.25)
            continue
        records.extend([o, v] for o, v in fetched.records)
        if fetched.records:
            offset = fetched.records[-1][0] + 1
        high_watermark = fetched.high_watermark
        if offset >= high_watermark and not fetched.records and high_watermark < fetched.log_end:
            # A new leader's HW lags the old one's until every ISR member fetches from it:
            # records that were acknowledged may sit above it for a moment. Stopping here
            # would report them lost, so wait until the HW covers the leader's whole log.
            last_error = f"high watermark {high_watermark} below the leader's log end {fetched.log_end}"
            await asyncio.sleep(0.25)
            continue
        if offset >= high_watermark and not fetched.records:
            entry = {"topic": topic, "partition": partition, "offset": 0,
                     "records": records, "high_watermark": high_watermark}
            return Completion("ok", [entry], node=fetched.node)
        if not fetched.records and offset < fetched.high_watermark:
            # Below the HW but nothing returned: the log start moved past us (truncated or
            # deleted); say so rather than loop.
            return Completion("fail", positions_value([((topic, partition), 0)]),
                              error=f"no records at offset {offset} below high watermark {high_watermark}")
    return Completion("fail", positions_value([((topic, partition), 0)]),
                      error=f"drain timed out at offset {offset} (high watermark {high_watermark}): {last_error}")


def worker_partitions(partitions: Sequence[Partition], roles: Sequence[str]) -> list[list[Partition]]:
    """Each worker's share of the partitions: within a role, worker k of n takes every n-th
    partition from the k-th, so each role covers every partition; with more workers than
    partitions, workers share one."""
    shares: list[list[Partition]] = []
    for worker, role in enumerate(roles):
        members = [w for w, r in enumerate(roles) if r == role]
        k, n = members.index(worker), len(members)
        share = [tp for j, tp in enumerate(partitions) if j % n == k]
        shares.append(share or [partitions[k % len(partitions)]])
    return shares


def roles(concurrency: int) -> list[str]:
    """Half the workers produce (rounded up), the rest consume."""
    producers = (concurrency + 1) // 2
    return ["producer"] * producers + ["consumer"] * (concurrency - producers)
