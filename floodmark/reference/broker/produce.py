"""Produce: how a leader appends a client's batch and when it may say "written".

``acks`` decides what the acknowledgement means:

* ``0`` and ``1``: answered as soon as the leader appended. The records may still be lost
  if the leader fails before followers copy them. Unlike Kafka, whose broker sends no
  answer to acks=0 (its producer reports offset -1), this broker answers acks=0 too and our
  producer records the offset: a history is more useful with it, and the checkers treat
  any acks=0 loss as permitted by the configuration anyway.
* ``all`` (-1): first, the ISR must have at least ``min.insync.replicas`` members, else
  NOT_ENOUGH_REPLICAS and nothing is written. After the append the request waits (without
  polling: the HW advance wakes it) until the HW covers the whole batch, i.e. every ISR
  member has it. If the ISR meanwhile shrank below the minimum the answer is
  NOT_ENOUGH_REPLICAS_AFTER_APPEND; if the wait times out, REQUEST_TIMED_OUT; if the
  replica stopped leading, REQUEST_TIMED_OUT too. Those three are *ambiguous*: the records
  are in the log and may yet be committed, so a client must report them as unknown.
"""

from __future__ import annotations

from floodmark.contracts.node_event_kinds import Acked, Rejected
from floodmark.reference.broker.replica_manager import ReplicaManager
from floodmark.reference.broker.storage_guard import ReplicaOffline
from floodmark.reference.protocol.messages import (
    ACKS_ALL,
    NO_EPOCH,
    Errors,
    ProduceRequest,
    ProduceResponse,
)
from floodmark.reference.runtime import Runtime

MAX_PRODUCE_CHARS = 1 << 20  # Kafka's message.max.bytes: a larger batch is refused, not stored


async def handle_produce(runtime: Runtime, replicas: ReplicaManager, request: ProduceRequest) -> ProduceResponse:
    topic, number = request.topic, request.partition
    if not request.values or sum(len(v) for v in request.values) > MAX_PRODUCE_CHARS:
        return ProduceResponse(Errors.INVALID_REQUEST)  # nothing, or more than one request may carry
    if request.acks not in (0, 1, ACKS_ALL):
        return ProduceResponse(Errors.INVALID_REQUEST)
    p, error = replicas.leader_error(topic, number)
    if p is None:
        return _reject(runtime, request, error or Errors.NOT_LEADER)
    if request.current_leader_epoch != NO_EPOCH:
        error = p.check_leader_epoch(request.current_leader_epoch)
        if error is not None:
            return _reject(runtime, request, error, p.leader_epoch)
    min_isr = 1
    if request.acks == ACKS_ALL:
        min_isr = await replicas.min_insync_replicas(topic)
        if not p.is_leader:  # leadership may have moved while we read the topic config
            return _reject(runtime, request, Errors.NOT_LEADER)
        error = p.check_enough_replicas(min_isr)
        if error is not None:
            return _reject(runtime, request, error, p.leader_epoch)
    epoch = p.leader_epoch
    values = request.values
    try:
        base = replicas.guarded(p, lambda: p.append_as_leader(values))
    except ReplicaOffline:
        return ProduceResponse(Errors.KAFKA_STORAGE_ERROR)
    last = base + len(values) - 1
    if request.acks != ACKS_ALL:
        return _ack(runtime, p.topic, p.partition, last, p.high_watermark, request.acks, base, epoch)
    waiters = replicas.high_watermark_waiters[(topic, number)]
    if p.high_watermark <= last:
        await waiters.wait(last + 1, request.timeout)
    current = replicas.get(topic, number)
    if current is not p or p.leader_epoch != epoch or not p.is_leader:
        return ProduceResponse(Errors.REQUEST_TIMED_OUT, base, -1, epoch)
    if p.high_watermark <= last:
        return ProduceResponse(Errors.REQUEST_TIMED_OUT, base, p.high_watermark, epoch)
    if p.check_enough_replicas(min_isr) is not None:
        return ProduceResponse(Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, base, p.high_watermark, epoch)
    return _ack(runtime, topic, number, last, p.high_watermark, request.acks, base, epoch)


def _ack(runtime: Runtime, topic: str, partition: int, last: int, high_watermark: int,
         acks: int, base: int, epoch: int) -> ProduceResponse:
    runtime.emit(Acked(topic=topic, partition=partition, offset=last, first_offset=base,
                       high_watermark=high_watermark, acks=acks, leader_epoch=epoch))
    return ProduceResponse(None, base, high_watermark, epoch)


def _reject(runtime: Runtime, request: ProduceRequest, error: str,
            leader_epoch: int = NO_EPOCH) -> ProduceResponse:
    runtime.emit(Rejected(request="Produce", why=error, topic=request.topic,
                          partition=request.partition, leader_epoch=leader_epoch))
    return ProduceResponse(error, leader_epoch=leader_epoch)
