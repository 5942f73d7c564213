"""The log-lin workload: appends and reads at offsets, for the linearizability checker.

Each partition is an append-only log, an object whose operations are *append a value, get
the offset it landed at* and *read the value at an offset*. The linearizability checker
searches for an order of these ops consistent with real time in which every read returns the
value appended at that offset, partition by partition (P-compositionality: partitions are
independent objects). The model also takes reads of nothing at offsets not yet written, as
other systems' histories hold them; this workload records none (see below).

Op shapes (history values):

    append  invoke {"topic", "partition", "value"}; ok adds "offset"
    read    invoke {"topic", "partition", "offset"}; ok adds "value": the value at that
            offset. A read that finds nothing there fails (see below)
    final-read  invoke {"topic", "partition", "offset": 0}; ok adds "records" (every
            [offset, value] from 0) and "high_watermark": the whole log, read once per
            partition after the faults are healed (:func:`floodmark.workloads.registry.final_reads`),
            so an acknowledged append lost at the tail, which no read reached, is seen missing

Reads go to the leader and see only committed records (below the high watermark), so a
value read must be the value appended at that offset. A read that finds *nothing* proves
nothing in Kafka's contract, which promises consumers committed records, not the latest
ones: a deposed leader that has not yet heard of its successor, or a new leader whose HW
still lags its predecessor's (it learns the HW from its followers' fetches), answers
"nothing yet" for an offset already committed. Recorded as an empty ``ok`` read, such an
answer made correct runs nonlinearizable (the default variant, 3 of 100 seeds with every
fault kind), so it completes as ``fail``, an op the model does not use, with the HW it saw.
Reads pick offsets around the end of the log as this worker last saw it, where races happen.
"""

from __future__ import annotations

import random
from typing import Any

from floodmark.harness.config import TestConfig
from floodmark.harness.generator import Completion, CompletionType, Invocation
from floodmark.workloads.clients import ClientFactory, ClientSession, SessionWorker

Partition = tuple[str, int]

APPEND_PROBABILITY = 0.5
READ_WINDOW = 4  # reads land within this many offsets of the known log end


class LogLinWorker(SessionWorker):
    def __init__(self, config: TestConfig, clients: ClientFactory, worker: int, rng: random.Random) -> None:
        self.config = config
        self.clients = clients
        self.worker = worker
        self.rng = rng
        self.partitions: list[Partition] = list(config.topic_partitions)
        self.appended = 0
        self.known_end: dict[Partition, int] = {}  # one past the highest offset this worker saw
        self.session: ClientSession | None = None

    def next_op(self) -> Invocation:
        topic, partition = self.rng.choice(self.partitions)
        if self.rng.random() < APPEND_PROBABILITY:
            self.appended += 1
            value = f"{self.worker}-{self.appended}"
            return Invocation("append", {"topic": topic, "partition": partition, "value": value})
        end = self.known_end.get((topic, partition), 0)
        offset = max(0, end - self.rng.randint(0, READ_WINDOW)) if self.rng.random() < 0.8 else self.rng.randint(0, end)
        return Invocation("read", {"topic": topic, "partition": partition, "offset": offset})

    def timeout_type(self, f: str) -> CompletionType:
        return "info" if f == "append" else "fail"

    async def invoke(self, op: Invocation) -> Completion:
        session = await self._session()
        value: dict[str, Any] = op.value
        tp = (value["topic"], value["partition"])
        if op.f == "append":
            sent = await session.send(value["topic"], value["partition"], value["value"], self.config.acks_code)
            if sent.type != "ok" or sent.offset is None:
                return Completion(sent.type if sent.type != "ok" else "info", value, error=sent.error, node=sent.node)
            self._saw(tp, sent.offset + 1)
            return Completion("ok", {**value, "offset": sent.offset}, node=sent.node)
        if op.f == "read":
            fetched = await session.fetch(value["topic"], value["partition"], value["offset"], 1)
            if fetched.error is not None:
                return Completion("fail", value, error=fetched.error, node=fetched.node)
            self._saw(tp, fetched.high_watermark)
            if fetched.records and fetched.records[0][0] == value["offset"]:
                return Completion("ok", {**value, "value": fetched.records[0][1]}, node=fetched.node)
            if value["offset"] >= fetched.high_watermark:  # nothing visible: no proof (see the docstring)
                return Completion("fail", value, node=fetched.node,
                                  error=f"nothing visible at offset {value['offset']} (the serving leader's HW is "
                                        f"{fetched.high_watermark}): Kafka promises consumers no recency")
            return Completion("fail", value, node=fetched.node,
                              error=f"no record at offset {value['offset']} below high watermark {fetched.high_watermark}")
        raise ValueError(f"log-lin workload has no op {op.f!r}")

    def _saw(self, tp: Partition, end: int) -> None:
        if end > self.known_end.get(tp, 0):
            self.known_end[tp] = end
