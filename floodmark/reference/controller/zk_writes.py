"""The controller's ZooKeeper writes: fenced by the controller epoch, batched by the hundreds.

**Fencing (KAFKA-6082).** A controller that lost its ZooKeeper session, or was paused while
another broker won the election, may still believe it is controller and keep writing. Every
write it makes is therefore a multi-op transaction that starts with a version check on
``/controller_epoch``: the election that replaced it bumped that node, so the zombie's
transaction fails as a whole and the zombie resigns (:class:`ControllerMoved`). The
``controller_writes_without_epoch_check`` variant drops the check, bringing back the bug.

**Conditional state writes.** Partition state nodes are also written on their own ZooKeeper
version, because leaders change the ISR concurrently. A batch that loses such a race is
retried without the loser; the caller re-reads the losers and decides again.

**Batching.** Electing leaders for 10,000 partitions one write at a time costs 10,000 round
trips (the V3 design estimated 40 s). The writer packs state updates into multi-ops of
``ops_per_multi`` operations (each well under ZooKeeper's 1 MB request limit) and keeps
several of them in flight at once; ``batched=False`` writes one partition per transaction,
one after another, for comparison (``bench/bench_failover.py``). Reads are batched too: a
new controller re-reads every state node with ``get_many`` (ZooKeeper's multiRead), a few
hundred nodes per round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from floodmark.reference.controller.context import ControllerContext
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import TopicPartition
from floodmark.reference.runtime import (
    BadVersionError,
    CheckOp,
    Coordination,
    NodeExistsError,
    NoNodeError,
    SetDataOp,
    TransactionFailed,
    TxnOp,
)

# ZooKeeper refuses a request over jute.maxbuffer (1 MB by default); a multi is kept well below.
MAX_MULTI_BYTES = 512 * 1024
MULTI_OP_OVERHEAD_BYTES = 32  # per operation: its multi header, version and length prefixes


class ControllerMoved(Exception):
    """Another controller was elected since ours: stop acting as controller."""


class ControllerZk:
    def __init__(
        self, zk_client: Coordination, ctx: ControllerContext, log: logging.Logger, *, epoch_check: bool = True,
        batched: bool = True, ops_per_multi: int = 500,
    ) -> None:
        self.zk = zk_client
        self.ctx = ctx
        self.log = log
        self.epoch_check = epoch_check
        self.batched = batched
        self.ops_per_multi = max(1, ops_per_multi)
        self.transactions = 0  # for the benchmark: ZooKeeper round trips made
        # The ZooKeeper transaction id of the last state write per partition (for its event).
        self.written_zxids: dict[TopicPartition, int] = {}

    def replace_session(self, zk_client: Coordination) -> None:
        """Write through a new ZooKeeper session (the broker's old one was lost)."""
        self.zk = zk_client

    def begin_reign(self, ctx: ControllerContext) -> None:
        """Fence writes by ``ctx``'s controller epoch from now on (a new context after resigning)."""
        self.ctx = ctx

    # ------------------------------------------------------------------ fenced transactions

    async def multi(self, ops: Sequence[TxnOp]) -> list[Any]:
        """Apply ``ops`` atomically, guarded by the controller epoch's ZooKeeper version.

        Raises :class:`ControllerMoved` if the epoch changed, ``TransactionFailed`` (with the
        index into ``ops``) if another op was rejected.
        """
        guard: list[TxnOp] = []
        if self.epoch_check:
            guard.append(CheckOp(zk.CONTROLLER_EPOCH, self.ctx.epoch_zk_version))
        self.transactions += 1
        try:
            results = await self.zk.multi(guard + list(ops))
        except TransactionFailed as e:
            if guard and e.index == 0:
                raise ControllerMoved(
                    f"{zk.CONTROLLER_EPOCH} changed since epoch {self.ctx.epoch}") from None
            raise TransactionFailed(e.index - len(guard), e.cause) from None
        return results[len(guard):]

    async def multi_in_chunks(self, ops: Sequence[TxnOp], step: int, leftover: type[Exception]) -> bool:
        """Apply ``ops`` in transactions of ``step`` ops, taking ``leftover`` errors as done.

        A predecessor controller may have got part of the way (created a node, or deleted
        one): a transaction that fails because an op met ``leftover`` is applied again one
        op at a time, keeping what is already there. True if any transaction failed so.
        """
        met_leftovers = False
        for start in range(0, len(ops), step):
            chunk = ops[start:start + step]
            try:
                await self.multi(chunk)
            except Exception as e:
                if not isinstance(getattr(e, "cause", None), leftover):
                    raise
                met_leftovers = True
                for op in chunk:
                    try:
                        await self.multi([op])
                    except Exception as inner:
                        if not isinstance(getattr(inner, "cause", None), leftover):
                            raise
        return met_leftovers

    # ------------------------------------------------------------------ partition states

    async def write_states(
        self, updates: Mapping[TopicPartition, zk.LeaderIsr], *, in_flight: int = 8,
        on_chunk: Callable[[dict[TopicPartition, zk.LeaderIsr]], None] | None = None,
    ) -> tuple[dict[TopicPartition, zk.LeaderIsr], list[TopicPartition]]:
        """Write new states conditionally on the versions they carry.

        Returns the states as written (with their new ZooKeeper versions) and the partitions
        whose write lost a race (their node changed since it was read: re-read, decide again).
        Up to ``in_flight`` transactions are outstanding at once, so ZooKeeper's round trips
        and log syncs overlap, as Kafka pipelines its asynchronous ZooKeeper requests.
        ``on_chunk`` hears what each transaction wrote as soon as it is written, so that the
        caller records it and builds its requests while the last are still being written.
        """
        order = zk.sorted_partitions(updates)
        size = self.ops_per_multi if self.batched else 1
        if not self.batched:
            in_flight = 1  # the naive way the comparison is against: one write after another
        chunks: list[list[tuple[TopicPartition, SetDataOp]]] = [[]]
        chunk_bytes = 0
        for tp in order:
            op = SetDataOp(zk.partition_state_path(tp.topic, tp.partition),
                           zk.encode_leader_isr(updates[tp]), updates[tp].zk_version)
            op_bytes = len(op.path) + len(op.data) + MULTI_OP_OVERHEAD_BYTES
            if chunks[-1] and (len(chunks[-1]) >= size or chunk_bytes + op_bytes > MAX_MULTI_BYTES):
                chunks.append([])
                chunk_bytes = 0
            chunks[-1].append((tp, op))
            chunk_bytes += op_bytes
        slots = asyncio.Semaphore(in_flight)

        async def write(chunk: list[tuple[TopicPartition, SetDataOp]]) -> tuple[
                dict[TopicPartition, zk.LeaderIsr], list[TopicPartition]]:
            async with slots:
                result = await self._write_chunk(chunk, updates)
            if on_chunk is not None and result[0]:
                on_chunk(result[0])
            return result

        written: dict[TopicPartition, zk.LeaderIsr] = {}
        conflicts: list[TopicPartition] = []
        for chunk_written, chunk_conflicts in await asyncio.gather(*(write(c) for c in chunks if c)):
            written.update(chunk_written)
            conflicts.extend(chunk_conflicts)
        return written, zk.sorted_partitions(conflicts)

    async def _write_chunk(
        self, chunk: list[tuple[TopicPartition, SetDataOp]], updates: Mapping[TopicPartition, zk.LeaderIsr],
    ) -> tuple[dict[TopicPartition, zk.LeaderIsr], list[TopicPartition]]:
        written: dict[TopicPartition, zk.LeaderIsr] = {}
        conflicts: list[TopicPartition] = []
        while chunk:
            try:
                results = await self.multi([op for _, op in chunk])
            except TransactionFailed as e:
                if not isinstance(e.cause, (BadVersionError, NoNodeError)) or not 0 <= e.index < len(chunk):
                    raise
                conflicts.append(chunk[e.index][0])
                chunk = chunk[:e.index] + chunk[e.index + 1:]
                continue
            for (tp, _), stat in zip(chunk, results):
                written[tp] = updates[tp].with_version(stat.version)
                self.written_zxids[tp] = stat.mzxid
            break
        return written, conflicts

    async def read_state(self, tp: TopicPartition) -> zk.LeaderIsr | None:
        return (await self.read_states([tp]))[0]

    async def read_states(self, tps: Sequence[TopicPartition]) -> list[zk.LeaderIsr | None]:
        """Read many state nodes in batched reads (``None``: absent or malformed)."""
        replies = await self.zk.get_many([zk.partition_state_path(tp.topic, tp.partition) for tp in tps])
        result: list[zk.LeaderIsr | None] = []
        for tp, reply in zip(tps, replies):
            if reply is None:
                result.append(None)
                continue
            try:
                result.append(zk.decode_leader_isr(tp.topic, tp.partition, reply[0], reply[1].version))
            except zk.LayoutError as e:
                # Never guess a leader epoch: the partition is left alone until someone fixes it.
                self.log.error("ignoring malformed partition state: %s", e)
                result.append(None)
        return result

    # ------------------------------------------------------------------ reads

    async def read_epoch(self) -> tuple[int, int]:
        """The current controller epoch and its node's version (creating it at 0)."""
        with contextlib.suppress(NodeExistsError):
            await self.zk.create(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(0))
        data, stat = await self.zk.get(zk.CONTROLLER_EPOCH)
        return zk.decode_controller_epoch(data), stat.version

    async def read_topic(self, topic: str) -> zk.TopicAssignment | None:
        return await zk.read_topic(self.zk, topic)

    async def read_broker(self, broker_id: int) -> zk.BrokerRegistration | None:
        try:
            data, stat = await self.zk.get(zk.broker_path(broker_id))
        except NoNodeError:
            return None
        return zk.decode_broker(broker_id, data, stat.czxid)

    async def read_reassignments(self) -> list[zk.Reassignment]:
        try:
            data, _ = await self.zk.get(zk.REASSIGN_PARTITIONS)
        except NoNodeError:
            return []
        return zk.decode_reassignments(data)

    async def ensure_layout(self) -> None:
        for path in zk.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
