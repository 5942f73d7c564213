"""The producer: send records to a partition's leader and say honestly what happened.

A send ends in one of three outcomes, the distinction the harness's history depends on:

* **ok**: the leader acknowledged it at an offset (with acks=all: committed by the ISR);
* **failed**: it was certainly *not* written: every attempt was refused before appending
  (an error in :data:`Errors.DEFINITELY_NOT_WRITTEN`, or a connection that was refused, so
  the request never reached a broker);
* **unknown**: it may or may not have been written: a timeout, a connection broken after
  the request was sent, NOT_ENOUGH_REPLICAS_AFTER_APPEND, any error we cannot classify.

Refusals are retried (after refreshing metadata, which is how the producer follows a leader
change) until the send's deadline. An ambiguous attempt is never retried: retrying could
write the record twice, and the first attempt's fate would still be unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from floodmark.frozen_init import fast_frozen_init
from floodmark.reference.client.metadata import ClientMetadata
from floodmark.reference.protocol.messages import (
    ACKS_ALL,
    ErrorResponse,
    Errors,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from floodmark.reference.runtime import Runtime

SendStatus = Literal["ok", "failed", "unknown"]

# Refusals that mean our metadata is stale: look the leader up again.
_STALE_METADATA = frozenset({
    Errors.NOT_LEADER, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH,
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.KAFKA_STORAGE_ERROR, Errors.BROKER_FENCED,
})


@fast_frozen_init
@dataclass(frozen=True)
class SendResult:
    status: SendStatus
    topic: str
    partition: int
    offset: int | None = None  # the first record's offset when ok
    error: str | None = None  # why it failed or is unknown
    attempts: int = 0


class Producer:
    def __init__(
        self, runtime: Runtime, bootstrap: Sequence[str], *, acks: int = ACKS_ALL,
        request_timeout: float = 5.0, retry_backoff: float = 0.1,
        metadata: ClientMetadata | None = None,
    ) -> None:
        if acks not in (ACKS_ALL, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
        self.runtime = runtime
        self.acks = acks
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.metadata = metadata or ClientMetadata(runtime, bootstrap)

    async def send(self, topic: str, partition: int, value: str, *, timeout: float = 10.0) -> SendResult:
        return await self.send_batch(topic, partition, [value], timeout=timeout)

    async def send_batch(
        self, topic: str, partition: int, values: Sequence[str], *, timeout: float = 10.0,
    ) -> SendResult:
        """Send ``values`` as one request; ok gives the first record's offset."""
        tp = TopicPartition(topic, partition)
        deadline = self.runtime.monotonic() + timeout
        attempts = 0
        last_error = "no leader known"
        refresh = False
        while True:
            remaining = deadline - self.runtime.monotonic()
            if remaining <= 0:
                return SendResult("failed", topic, partition, error=last_error, attempts=attempts)
            leader = await self.metadata.leader_for(tp, refresh=refresh)
            refresh = True
            if leader is None:
                last_error = "no leader known"
                await self.runtime.sleep(min(self.retry_backoff, remaining))
                continue
            attempts += 1
            leader_timeout = max(0.05, min(self.request_timeout, remaining))
            request = ProduceRequest(topic, partition, tuple(values), self.acks, leader_timeout, leader.leader_epoch)
            try:
                response = await self.runtime.network.request(leader.address, request, leader_timeout + 1.0)
            except ConnectionRefusedError as e:
                last_error = f"connection refused by broker {leader.broker_id}: {e}"  # never delivered
                self.metadata.invalidate(tp)
                await self.runtime.sleep(min(self.retry_backoff, remaining))
                continue
            except (ConnectionError, TimeoutError, OSError) as e:
                return SendResult("unknown", topic, partition, error=f"{type(e).__name__}: {e}", attempts=attempts)
            if isinstance(response, ErrorResponse) or not isinstance(response, ProduceResponse):
                error = getattr(response, "error", None) or "unexpected response"
                return SendResult("unknown", topic, partition, error=str(error), attempts=attempts)
            if response.error is None:
                return SendResult("ok", topic, partition, offset=response.base_offset, attempts=attempts)
            if response.error not in Errors.DEFINITELY_NOT_WRITTEN:
                return SendResult("unknown", topic, partition, error=response.error, attempts=attempts)
            last_error = response.error
            if response.error in _STALE_METADATA:
                self.metadata.invalidate(tp)
            await self.runtime.sleep(min(self.retry_backoff, max(0.0, deadline - self.runtime.monotonic())))
