"""Serving fetches: what a leader hands to followers and to consumers.

A **follower's** fetch at offset ``o`` is also its progress report: it says the follower has
everything below ``o``. The leader first checks it (KIP-320: the follower's view of the
leader epoch must be the leader's own; its last fetched epoch must end where the follower
thinks in the leader's log, else the answer says where the logs diverge), then records the
progress, which may advance the HW and let the follower back into the ISR, then answers with
records from ``o`` and its HW. A follower asks for all the partitions it follows from this
broker in one ReplicaFetchRequest. With nothing to send the leader holds the fetch (long
poll) until new records arrive in any of them or ``max_wait`` passes, so replication
latency is a round trip, not a polling interval, and idle partitions cost nothing.

A **consumer's** fetch reads only below the HW: committed records. An offset between the HW
and the log end exists only on a leader whose HW has not caught up since it was elected:
OFFSET_NOT_AVAILABLE, retriable. Beyond the log end: OFFSET_OUT_OF_RANGE. Consumers get
their records in the compact :class:`RecordBatch` too: a poll carries dozens of records,
and a tagged object per record was most of the cost of encoding and decoding it.

OffsetForLeaderEpoch (KIP-101/279) answers a follower's "where does my latest epoch end in
your log?" for every partition it asks about at once, each fenced by the requester's leader
epoch in the same way and answered on its own.
"""

from __future__ import annotations

from floodmark.contracts.node_event_kinds import Rejected
from floodmark.reference.broker.partition import Partition
from floodmark.reference.broker.replica_manager import ReplicaManager
from floodmark.reference.broker.storage_guard import ReplicaOffline
from floodmark.reference.protocol.messages import (
    CONSUMER_REPLICA_ID,
    NO_EPOCH,
    EpochEnd,
    EpochEndQuery,
    Errors,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    PartitionFetchResult,
    Record,
    RecordBatch,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
)
from floodmark.reference.runtime import Runtime


async def handle_fetch(runtime: Runtime, replicas: ReplicaManager, request: FetchRequest) -> FetchResponse:
    p, error = replicas.leader_error(request.topic, request.partition)
    if p is None:
        return FetchResponse(error or Errors.NOT_LEADER)
    if request.replica_id == CONSUMER_REPLICA_ID:
        return await _consumer_fetch(replicas, p, request)
    wanted = FetchPartition(request.topic, request.partition, request.offset,
                            request.current_leader_epoch, request.last_fetched_epoch)
    response = _serve_follower(runtime, replicas, wanted, request.replica_id,
                               request.broker_incarnation, request.max_records, record=True)
    if not _has_news(response) and request.max_wait > 0:
        epoch = p.leader_epoch
        await replicas.log_end_waiters[p.key].wait(request.offset + 1, request.max_wait)
        if not p.is_leader or p.leader_epoch != epoch:
            return FetchResponse(Errors.NOT_LEADER, leader_epoch=p.leader_epoch)
        response = _serve_follower(runtime, replicas, wanted, request.replica_id,
                                   request.broker_incarnation, request.max_records, record=False)
    return response


async def handle_replica_fetch(runtime: Runtime, replicas: ReplicaManager,
                               request: ReplicaFetchRequest) -> ReplicaFetchResponse:
    """A follower's fetch for all the partitions it follows from this broker."""
    deadline = runtime.monotonic() + request.max_wait
    record = True
    while True:
        looks: list[FetchResponse | Partition] = []
        news = False
        for wanted in request.partitions:
            look = _look(runtime, replicas, wanted, request.replica_id, request.broker_incarnation,
                         request.max_records, record=record)
            looks.append(look)
            if not news and isinstance(look, FetchResponse) and _has_news(look):
                news = True
        record = False  # progress counts once per fetch, not once per look
        remaining = deadline - runtime.monotonic()
        if news or remaining <= 0:
            break
        await replicas.append_signal.wait(remaining)
    # A partition with nothing new is answered with its state as the look found it: nothing
    # since has changed it (looking at another partition changes none of what the answer
    # carries, and there was no await).
    return ReplicaFetchResponse(None, tuple(
        PartitionFetchResult(wanted.topic, wanted.partition, look if isinstance(look, FetchResponse) else _response(look, ()))
        for wanted, look in zip(request.partitions, looks)))


def _has_news(response: FetchResponse) -> bool:
    return response.error is not None or response.batch is not None or response.diverging_end_offset >= 0


def _serve_follower(runtime: Runtime, replicas: ReplicaManager, wanted: FetchPartition, replica_id: int,
                    incarnation: int, max_records: int, *, record: bool) -> FetchResponse:
    """Answer one partition of a follower's fetch without waiting; ``record`` its progress."""
    look = _look(runtime, replicas, wanted, replica_id, incarnation, max_records, record=record)
    return look if isinstance(look, FetchResponse) else _response(look, ())


def _look(runtime: Runtime, replicas: ReplicaManager, wanted: FetchPartition, replica_id: int,
          incarnation: int, max_records: int, *, record: bool) -> FetchResponse | Partition:
    """:func:`_serve_follower`'s answer, or the partition when it has nothing new for the
    follower (the answer is then ``_response(p, ())``, built only if it is sent: a parked
    fetch looks at every partition it asks about each time any of them changes)."""
    p, error = replicas.leader_error(wanted.topic, wanted.partition)
    if p is None:
        return FetchResponse(error or Errors.NOT_LEADER)
    check = p.check_follower_fetch(wanted.offset, wanted.current_leader_epoch, wanted.last_fetched_epoch)
    if check.error is not None:
        if record:
            runtime.emit(Rejected(request="Fetch", why=check.error, topic=p.topic,
                                  partition=p.partition, leader_epoch=p.leader_epoch,
                                  replica=replica_id, request_epoch=wanted.current_leader_epoch))
        return FetchResponse(check.error, leader_epoch=p.leader_epoch)
    if check.divergence is not None:
        return _response(p, (), diverging_epoch=check.divergence.leader_epoch,
                         diverging_end_offset=check.divergence.end_offset)
    if wanted.offset > p.log.log_end or wanted.offset < p.log.log_start:
        return FetchResponse(Errors.OFFSET_OUT_OF_RANGE, high_watermark=p.high_watermark,
                             log_end=p.log.log_end, log_start=p.log.log_start, leader_epoch=p.leader_epoch)
    if record:
        now = runtime.wall_time()
        p.record_follower_fetch(replica_id, wanted.offset, incarnation, now)
        if p.may_join_isr(replica_id, now, replicas.config.replica_lag_time_max):
            replicas.isr.expand(p, replica_id)
    if wanted.offset >= p.log.log_end:
        return p
    try:
        records = replicas.guarded(p, lambda: p.read(wanted.offset, max_records))
    except ReplicaOffline:
        return FetchResponse(Errors.KAFKA_STORAGE_ERROR)
    return FetchResponse(None, (), p.high_watermark, p.log.log_end, p.log.log_start, p.leader_epoch,
                         batch=RecordBatch.of(records) if records else None)


async def _consumer_fetch(replicas: ReplicaManager, p: Partition, request: FetchRequest) -> FetchResponse:
    error = p.check_leader_epoch(request.current_leader_epoch)
    if error is None:
        error = p.consumer_read_error(request.offset)
    if error is not None:
        return FetchResponse(error, high_watermark=p.high_watermark, log_end=p.log.log_end,
                             log_start=p.log.log_start, leader_epoch=p.leader_epoch)
    epoch = p.leader_epoch
    if request.offset >= p.high_watermark and request.max_wait > 0:
        await replicas.high_watermark_waiters[p.key].wait(request.offset + 1, request.max_wait)
        if not p.is_leader or p.leader_epoch != epoch:
            return FetchResponse(Errors.NOT_LEADER, leader_epoch=p.leader_epoch)
    limit = min(request.max_records, replicas.config.fetch_max_records)
    try:
        records = replicas.guarded(p, lambda: p.read(request.offset, limit, p.high_watermark))
    except ReplicaOffline:
        return FetchResponse(Errors.KAFKA_STORAGE_ERROR)
    return FetchResponse(None, (), p.high_watermark, p.log.log_end, p.log.log_start, p.leader_epoch,
                         batch=RecordBatch.of(records) if records else None)


def _response(p: Partition, records: tuple[Record, ...], *, diverging_epoch: int = NO_EPOCH,
              diverging_end_offset: int = -1) -> FetchResponse:
    return FetchResponse(None, records, p.high_watermark, p.log.log_end, p.log.log_start,
                         p.leader_epoch, diverging_epoch, diverging_end_offset)


def handle_offset_for_leader_epoch(runtime: Runtime, replicas: ReplicaManager,
                                   request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    """Answer each partition of the request on its own, in request order."""
    return OffsetForLeaderEpochResponse(None, tuple(_epoch_end(runtime, replicas, q) for q in request.partitions))


def _epoch_end(runtime: Runtime, replicas: ReplicaManager, query: EpochEndQuery) -> EpochEnd:
    p, error = replicas.leader_error(query.topic, query.partition)
    if p is None:
        return EpochEnd(query.topic, query.partition, error or Errors.NOT_LEADER)
    error = p.check_leader_epoch(query.current_leader_epoch)
    if error is not None:
        runtime.emit(Rejected(request="OffsetForLeaderEpoch", why=error, topic=p.topic,
                              partition=p.partition, leader_epoch=p.leader_epoch,
                              request_epoch=query.current_leader_epoch))
        return EpochEnd(query.topic, query.partition, error)
    epoch, end = p.epoch_end_offset(query.leader_epoch)
    return EpochEnd(query.topic, query.partition, None, epoch, end)
