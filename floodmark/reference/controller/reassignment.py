"""Replica reassignment (V3 design) and its cancellation (KIP-236).

Moving a partition from its original replicas OAR to a target RAR without losing
availability or committed records, in the V3 design's steps:

1. write the assignment AR = RAR + OAR to ZooKeeper (so a successor knows the move started);
2. bump the leader epoch and send LeaderAndIsr to every replica: the new replicas (RAR - OAR)
   start and fetch from the leader as followers;
3. wait until every replica of RAR is in the ISR (the leader adds them as they catch up; the
   controller watches the partition's state node);
4. elect a leader from RAR (keep the current one if it is in RAR) with ISR limited to RAR,
   bump the epoch and tell the replicas;
5. StopReplica(delete=True) to the replicas leaving (OAR - RAR);
6. write AR = RAR and drop the partition from ``/admin/reassign_partitions``.

``/admin/reassign_partitions`` keeps ``original_replicas`` next to the target, so a
reassignment that has not completed can be cancelled (KIP-236) by creating
``/admin/reassign_cancel``: the same steps 4-6 run with OAR as the target, and the replicas
that were being added are stopped and deleted. Each step re-reads ZooKeeper and is
idempotent, so a new controller resumes a move wherever its predecessor stopped.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from floodmark.reference.controller.admin import read_partition_request
from floodmark.reference.controller.election import Decision, reassignment_leader
from floodmark.reference.controller.partitions import (
    Decide,
    change_partitions,
    send_leader_and_isr,
    send_stop_replica,
)
from floodmark.reference.controller.parts import ControllerParts
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import TopicPartition
from floodmark.reference.protocol.zk_layout import LeaderIsr, Reassignment
from floodmark.reference.runtime import DeleteOp, NoNodeError, SetDataOp, TxnOp


def _union(target: tuple[int, ...], original: tuple[int, ...]) -> tuple[int, ...]:
    return target + tuple(r for r in original if r not in target)


async def load(ctl: ControllerParts) -> None:
    """Failover: pick up the reassignments in progress."""
    for entry in await _read_node(ctl):
        _remember(ctl, entry)


def _remember(ctl: ControllerParts, entry: Reassignment) -> Reassignment | None:
    ctx = ctl.ctx
    tp = entry.tp
    current = ctx.replicas(tp)
    if not current:
        return None
    original = entry.original_replicas or current
    r = Reassignment(tp.topic, tp.partition, entry.replicas, original)
    ctx.reassignments[tp] = r
    return r


async def _read_node(ctl: ControllerParts) -> list[Reassignment]:
    watch = ctl.watcher("reassign", lambda: on_reassign_node(ctl))
    if await ctl.zk.exists(zk.REASSIGN_PARTITIONS, watch=watch) is None:
        return []
    try:
        data, _ = await ctl.zk.get(zk.REASSIGN_PARTITIONS)
        return zk.decode_reassignments(data)
    except NoNodeError:
        return []
    except zk.LayoutError as e:
        ctl.runtime.log.error("ignoring malformed reassignment request: %s", e)
        return []


async def on_reassign_node(ctl: ControllerParts) -> None:
    ctx = ctl.ctx
    for entry in await _read_node(ctl):
        if entry.tp in ctx.reassignments:
            continue
        r = _remember(ctl, entry)
        if r is None:
            ctl.runtime.log.warning("reassignment of unknown partition %s-%s dropped", entry.topic, entry.partition)
            await _finish(ctl, [entry.tp])
            continue
        await _start(ctl, r)
    await resume(ctl, list(ctx.reassignments))  # new ones, and any a predecessor left pending


async def _start(ctl: ControllerParts, r: Reassignment) -> None:
    """Steps 1-2: AR = RAR + OAR in ZooKeeper, then a new epoch so new replicas start."""
    ctx = ctl.ctx
    union = _union(r.replicas, r.original_replicas)
    if ctx.replicas(r.tp) != union:
        await _write_assignment(ctl, r.tp, union)
    changed = await change_partitions(ctl, [r.tp], _same_leader_new_epoch(ctl))
    send_leader_and_isr(ctl, changed)


def _same_leader_new_epoch(ctl: ControllerParts) -> Decide:
    def decide(tp: TopicPartition, s: LeaderIsr) -> Decision:
        return Decision(LeaderIsr(s.leader, s.leader_epoch + 1, s.isr, ctl.ctx.epoch, s.zk_version))
    return decide


async def resume_all(ctl: ControllerParts) -> None:
    await resume(ctl, list(ctl.ctx.reassignments))


async def resume(ctl: ControllerParts, partitions: Iterable[TopicPartition]) -> None:
    """Step 3: complete every listed reassignment whose target replicas are all in sync."""
    ctx = ctl.ctx
    for tp in zk.sorted_partitions(set(partitions)):
        r = ctx.reassignments.get(tp)
        if r is None:
            continue
        union = _union(r.replicas, r.original_replicas)
        if ctx.replicas(tp) != union and ctx.replicas(tp) != r.replicas:
            await _start(ctl, r)  # a predecessor died before step 1 reached ZooKeeper
        fresh = await ctl.zkw.read_state(tp)
        if fresh is None:
            continue
        ctx.states[tp] = fresh
        if all(replica in fresh.isr for replica in r.replicas):
            await _complete(ctl, r, r.replicas)
        else:
            # Watch the state node: the leader writes the ISR as new replicas catch up.
            await ctl.zk.exists(zk.partition_state_path(tp.topic, tp.partition),
                                watch=ctl.watcher("reassign-isr", functools.partial(resume, ctl, [tp])))


async def _complete(ctl: ControllerParts, r: Reassignment, final: tuple[int, ...]) -> None:
    """Steps 4-6 towards ``final`` (the target, or the original replicas when cancelling)."""
    ctx = ctl.ctx
    tp = r.tp
    everyone = ctx.replicas(tp)
    changed = await change_partitions(ctl, [tp], lambda tp_, s: reassignment_leader(
        final, s, lambda b: ctx.may_lead(b, tp_), ctx.epoch))
    leaving = [b for b in everyone if b not in final]
    await _write_assignment(ctl, tp, final)
    ctx.reassignments.pop(tp, None)
    send_leader_and_isr(ctl, changed)
    for b in leaving:
        send_stop_replica(ctl, b, [tp], delete=True)
    await _finish(ctl, [tp])
    ctl.runtime.log.info("reassignment of %s-%s finished at %s", tp.topic, tp.partition, list(final))


async def _write_assignment(ctl: ControllerParts, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
    ctx = ctl.ctx
    old = ctx.assignments[tp.topic]
    partitions = dict(old.partitions)
    partitions[tp.partition] = tuple(replicas)
    new = zk.TopicAssignment(tp.topic, partitions, old.config)
    ctx.assignments[tp.topic] = new  # before the write: our own watch must see no change
    await ctl.zkw.multi([SetDataOp(zk.topic_path(tp.topic), zk.encode_topic(new))])


async def _finish(ctl: ControllerParts, done: list[TopicPartition]) -> None:
    """Drop finished partitions from /admin/reassign_partitions (delete it when empty)."""
    try:
        data, stat = await ctl.zk.get(zk.REASSIGN_PARTITIONS)
    except NoNodeError:
        return
    try:
        remaining = [e for e in zk.decode_reassignments(data) if e.tp not in done]
    except zk.LayoutError:
        remaining = []
    op: TxnOp
    if remaining:
        op = SetDataOp(zk.REASSIGN_PARTITIONS, zk.encode_reassignments(remaining), stat.version)
    else:
        op = DeleteOp(zk.REASSIGN_PARTITIONS, stat.version)
    await ctl.zkw.multi([op])


async def on_cancel_node(ctl: ControllerParts) -> None:
    """KIP-236: revert reassignments in progress to their original replicas."""
    ctx = ctl.ctx
    watch = ctl.watcher("reassign-cancel", lambda: on_cancel_node(ctl))
    request = await read_partition_request(ctl, zk.REASSIGN_CANCEL, watch, "reassignment cancellation")
    if request is None:
        return
    wanted, version = request
    # None listed cancels every reassignment; a malformed list cancels none.
    targets = [] if wanted is None else wanted or list(ctx.reassignments)
    for tp in zk.sorted_partitions(set(targets)):
        r = ctx.reassignments.get(tp)
        if r is None:
            continue
        fresh = await ctl.zkw.read_state(tp)
        if fresh is not None:
            ctx.states[tp] = fresh
        await _complete(ctl, r, r.original_replicas)
        ctl.runtime.log.info("reassignment of %s-%s cancelled", tp.topic, tp.partition)
    await ctl.zkw.multi([DeleteOp(zk.REASSIGN_CANCEL, version)])
    await ctl.zk.exists(zk.REASSIGN_CANCEL, watch=watch)
