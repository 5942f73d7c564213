"""The consumer: read assigned partitions by offset from their leaders.

A consumer reads only committed records: the leader serves a consumer fetch up to its high
watermark. Right after a leader change the new leader's HW may briefly lag behind records it
already has; it answers OFFSET_NOT_AVAILABLE for offsets in that gap, which the consumer
retries rather than treating as the end of the log. Stale metadata (NOT_LEADER, fenced or
unknown leader epoch) is refreshed and the fetch retried, all within the call's deadline.

The consumer keeps a position per assigned partition (``assign``) and ``poll`` fetches from
each position and advances it; ``fetch`` reads at an explicit offset without a position.
There are no consumer groups: the harness assigns partitions itself, as Jepsen's Kafka
test does with manual assignment.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from floodmark.frozen_init import fast_frozen_init
from floodmark.reference.client.metadata import ClientMetadata
from floodmark.reference.protocol.messages import (
    ErrorResponse,
    Errors,
    FetchRequest,
    FetchResponse,
    Record,
    TopicPartition,
)
from floodmark.reference.runtime import Runtime

_RETRIABLE = frozenset({
    Errors.NOT_LEADER, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH,
    Errors.OFFSET_NOT_AVAILABLE, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.KAFKA_STORAGE_ERROR,
    Errors.BROKER_FENCED, Errors.REQUEST_TIMED_OUT,
})


@fast_frozen_init
@dataclass(frozen=True)
class FetchResult:
    topic: str
    partition: int
    offset: int  # where the fetch started
    records: tuple[Record, ...] = ()
    high_watermark: int = -1
    error: str | None = None  # None: the records are what the leader had committed
    log_end: int = -1  # the leader's log end offset when it answered (-1: not known)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def next_offset(self) -> int:
        return self.records[-1].offset + 1 if self.records else self.offset


class Consumer:
    def __init__(
        self, runtime: Runtime, bootstrap: Sequence[str], *, request_timeout: float = 5.0,
        retry_backoff: float = 0.1, max_records: int = 1000, metadata: ClientMetadata | None = None,
    ) -> None:
        self.runtime = runtime
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.max_records = max_records
        self.metadata = metadata or ClientMetadata(runtime, bootstrap)
        self.positions: dict[TopicPartition, int] = {}

    def assign(self, positions: Iterable[tuple[str, int, int]]) -> None:
        """Replace the assignment: (topic, partition, offset to read next)."""
        new: dict[TopicPartition, int] = {}
        for topic, partition, offset in positions:
            if offset < 0:
                raise ValueError(f"offset of {topic}-{partition} must be >= 0, got {offset}")
            new[TopicPartition(topic, partition)] = offset
        self.positions = new

    async def poll(self, *, timeout: float = 5.0) -> list[FetchResult]:
        """Fetch once from every assigned partition (in order) and advance the positions."""
        results: list[FetchResult] = []
        per_partition = timeout / max(1, len(self.positions))
        for tp in sorted(self.positions, key=lambda tp: (tp.topic, tp.partition)):
            result = await self.fetch(tp.topic, tp.partition, self.positions[tp], timeout=per_partition)
            if result.ok:
                self.positions[tp] = result.next_offset
            results.append(result)
        return results

    async def fetch(
        self, topic: str, partition: int, offset: int, *, timeout: float = 5.0,
        max_records: int | None = None, max_wait: float = 0.0,
    ) -> FetchResult:
        tp = TopicPartition(topic, partition)
        deadline = self.runtime.monotonic() + timeout
        error = "no leader known"
        refresh = False
        while True:
            remaining = deadline - self.runtime.monotonic()
            if remaining <= 0:
                return FetchResult(topic, partition, offset, error=error)
            leader = await self.metadata.leader_for(tp, refresh=refresh)
            refresh = True
            if leader is None:
                error = "no leader known"
                await self.runtime.sleep(min(self.retry_backoff, remaining))
                continue
            request = FetchRequest(
                topic, partition, offset, current_leader_epoch=leader.leader_epoch,
                max_records=max_records or self.max_records, max_wait=min(max_wait, remaining),
            )
            try:
                response = await self.runtime.network.request(
                    leader.address, request, min(self.request_timeout, remaining) + max_wait)
            except (ConnectionError, TimeoutError, OSError) as e:
                error = f"{type(e).__name__}: {e}"
                self.metadata.invalidate(tp)
                await self.runtime.sleep(min(self.retry_backoff, max(0.0, deadline - self.runtime.monotonic())))
                continue
            if isinstance(response, ErrorResponse) or not isinstance(response, FetchResponse):
                return FetchResult(topic, partition, offset, error=str(getattr(response, "error", "unexpected response")))
            if response.error is None:
                records = tuple(response.batch.records()) if response.batch is not None else response.records
                return FetchResult(topic, partition, offset, records, response.high_watermark,
                                   log_end=response.log_end)
            error = response.error
            if error not in _RETRIABLE:
                return FetchResult(topic, partition, offset, high_watermark=response.high_watermark, error=error)
            if error != Errors.OFFSET_NOT_AVAILABLE:
                self.metadata.invalidate(tp)
            await self.runtime.sleep(min(self.retry_backoff, max(0.0, deadline - self.runtime.monotonic())))
