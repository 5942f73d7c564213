"""The send accumulator: sends to one partition gathered into one request, as Kafka batches.

Kafka's producer does not send each record on its own: records bound for the same
partition wait in a *batch* (its RecordAccumulator) that goes out as one ProduceRequest,
and each record's future completes from that request's answer. With ``linger.ms=0`` a
batch holds whatever arrived while the previous requests were being prepared; here, the
sends made during the current turn of the event loop (the sends of every client woken by
the same acknowledgement, say). With a *linger* (``linger.ms > 0``) a partition's batch
stays open that long after its first send (the runtime's sleep: virtual time on the
simulator), and every send to the partition meanwhile joins it; a batch that fills up
(:data:`MAX_BATCH_RECORDS`) goes at once, as Kafka's RecordAccumulator sends a full batch
without waiting out its linger.

Each send still has its own outcome, derived from its batch's:

* **ok**: the leader wrote the batch contiguously, so record ``i`` is at ``base + i``;
* **failed**: nothing of the batch was written (a refusal before appending);
* **unknown**: the batch may or may not be in the log, so each of its records may or may
  not be; a caller must report each as unknown.

A batch is one append on the leader, so it is written or refused whole; what the producer
retries (refusals, after refreshing metadata) it retries whole. This module is protocol
code: it uses only the :class:`~floodmark.reference.runtime.Runtime` and the producer.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field

from floodmark.reference.client.producer import Producer, SendResult

MAX_BATCH_RECORDS = 500


@dataclass(eq=False)
class _Batch:
    topic: str
    partition: int
    timeout: float
    values: list[str] = field(default_factory=list)
    waiting: list[asyncio.Future[SendResult]] = field(default_factory=list)
    lingering: asyncio.Task[None] | None = None  # the wait that closes it (linger > 0 only)


class SendAccumulator:
    """Gathers sends per partition while a turn (or the linger) lasts and sends each
    partition's as one batch.

    ``linger`` (seconds, Kafka's ``linger.ms``): 0 closes a batch after the turn of its
    first send; more keeps it open that long.
    """

    def __init__(self, producer: Producer, linger: float = 0.0) -> None:
        self.producer = producer
        self.runtime = producer.runtime
        self.linger = linger
        self._open: dict[tuple[str, int], _Batch] = {}
        self.batches_sent = 0

    async def send(self, topic: str, partition: int, value: str, *, timeout: float = 10.0) -> SendResult:
        """Send one record; ok gives its own offset. ``timeout`` bounds the whole batch's
        request (once its linger is over: Kafka's request.timeout.ms)."""
        key = (topic, partition)
        batch = self._open.get(key)
        if batch is None or len(batch.values) >= MAX_BATCH_RECORDS:
            batch = self._open[key] = _Batch(topic, partition, timeout)
            if self.linger > 0:
                batch.lingering = self.runtime.spawn(self._linger(batch), name=f"linger-{topic}-{partition}")
            else:
                # The task's first step runs after every callback of this turn: the batch is
                # closed only when no more sends of this turn can join it.
                self.runtime.spawn(self._send_batch(batch), name=f"send-batch-{topic}-{partition}")
        index = len(batch.values)
        batch.values.append(value)
        reply: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        batch.waiting.append(reply)
        if batch.lingering is not None and len(batch.values) >= MAX_BATCH_RECORDS:
            self._close(batch)  # full: no reason to wait out the linger
        result = await reply
        if result.status == "ok" and result.offset is not None and index:
            # The batch's first record is at the batch's offset: its result is the batch's.
            return dataclasses.replace(result, offset=result.offset + index)
        return result

    async def _linger(self, batch: _Batch) -> None:
        try:
            await self.runtime.sleep(self.linger)
        except BaseException as e:
            if batch.lingering is not None:  # cancelled (the clients closed), not sent full
                _settle(batch, e)
            raise
        batch.lingering = None
        await self._send_batch(batch)

    def _close(self, batch: _Batch) -> None:
        """Send a full batch now, not when its linger ends."""
        key = (batch.topic, batch.partition)
        if self._open.get(key) is batch:
            del self._open[key]
        lingering, batch.lingering = batch.lingering, None
        if lingering is not None:
            lingering.cancel()
        self.runtime.spawn(self._send_batch(batch), name=f"send-batch-{batch.topic}-{batch.partition}")

    async def _send_batch(self, batch: _Batch) -> None:
        key = (batch.topic, batch.partition)
        if self._open.get(key) is batch:
            del self._open[key]
        self.batches_sent += 1
        outcome: SendResult | BaseException
        try:
            outcome = await self.producer.send_batch(batch.topic, batch.partition, batch.values, timeout=batch.timeout)
        except Exception as e:  # a bug: nobody may hang
            outcome = e
        except BaseException as e:  # cancelled (the clients closed): settle, then stop
            _settle(batch, e)
            raise
        _settle(batch, outcome)


def _settle(batch: _Batch, outcome: SendResult | BaseException) -> None:
    for reply in batch.waiting:
        if reply.done():  # its caller gave up (cancelled)
            continue
        if isinstance(outcome, BaseException):
            reply.set_exception(ConnectionResetError(f"the batch was abandoned: {outcome!r}"))
        else:
            reply.set_result(outcome)
