"""ISR change requests (KIP-343), as the controller handles them.

A leader speaking the ``kip-343`` inter-broker protocol proposes its shrunk or expanded ISRs
to the controller instead of writing ZooKeeper. The controller handles a request as one
event on its event task (so it is ordered with elections and broker failures): it checks the
requester's incarnation, decides each partition against its cached state (the rules live in
:mod:`floodmark.reference.protocol.isr_change_rules`), writes every accepted ISR in batched,
controller-epoch-fenced multi-ops, and answers one result per partition in request order; the
leader learns the new state and ZooKeeper version from the answer, every other broker from
the UpdateMetadata that follows. A state node that changed under the controller's cache (a
legacy leader of a mixed cluster writes its ISR itself) is re-read and decided again.
"""

from __future__ import annotations

from collections.abc import Callable

from floodmark.contracts.node_event_kinds import IsrWritten
from floodmark.reference.controller import reassignment
from floodmark.reference.controller.brokers import on_brokers_changed
from floodmark.reference.controller.partitions import send_update_metadata
from floodmark.reference.controller.parts import ControllerParts
from floodmark.reference.protocol import isr_change_rules as rules
from floodmark.reference.protocol.messages import (
    Errors,
    IsrChangePartition,
    IsrChangeRequest,
    IsrChangeResponse,
    IsrChangeResult,
    TopicPartition,
)
from floodmark.reference.protocol.zk_layout import LeaderIsr

# A state node that keeps changing under the controller (legacy leaders writing it) is given
# up after this many rounds; the leader proposes again on its next ISR check.
WRITE_ROUNDS = 3


async def on_isr_change(ctl: ControllerParts, request: IsrChangeRequest) -> IsrChangeResponse:
    ctx = ctl.ctx
    live = ctx.brokers.get(request.broker_id)
    error = rules.request_error(request.broker_incarnation,
                                None if live is None else live.registration.incarnation,
                                live is not None and live.fenced, ctl.config.variant)
    if error == Errors.UNKNOWN_INCARNATION_ID:
        ctl.enqueue("brokers", lambda: on_brokers_changed(ctl))  # registered since our last look
    if error is not None:
        return IsrChangeResponse(error)
    results: dict[int, IsrChangeResult] = {}
    pending: dict[int, IsrChangePartition] = {}
    seen: set[TopicPartition] = set()
    for i, proposal in enumerate(request.partitions):
        tp = TopicPartition(proposal.topic, proposal.partition)
        if tp in seen:
            results[i] = IsrChangeResult(tp.topic, tp.partition, Errors.INVALID_REQUEST)
        else:
            seen.add(tp)
            pending[i] = proposal
    changed: list[TopicPartition] = []
    for _ in range(WRITE_ROUNDS):
        if not pending:
            break
        pending = await _decide_and_write(ctl, request, pending, results, changed)
    for i, proposal in pending.items():  # still racing a writer outside the controller
        results[i] = IsrChangeResult(proposal.topic, proposal.partition, Errors.NOT_LEADER_FOR_PARTITION)
    if changed:
        send_update_metadata(ctl, changed)
        await reassignment.resume(ctl, [tp for tp in changed if tp in ctx.reassignments])
    return IsrChangeResponse(None, tuple(results[i] for i in range(len(request.partitions))))


async def _decide_and_write(ctl: ControllerParts, request: IsrChangeRequest, pending: dict[int, IsrChangePartition],
                            results: dict[int, IsrChangeResult],
                            changed: list[TopicPartition]) -> dict[int, IsrChangePartition]:
    """Decide ``pending`` against the cache and write what was accepted; returns the
    proposals whose write lost a race (their states re-read into the cache)."""
    ctx = ctl.ctx
    requester = request.broker_id
    variant = ctl.config.variant
    updates: dict[TopicPartition, LeaderIsr] = {}
    index: dict[TopicPartition, int] = {}
    for i, proposal in sorted(pending.items()):
        tp = TopicPartition(proposal.topic, proposal.partition)
        current = ctx.states.get(tp)
        replicas = ctx.replicas(tp)
        decision = rules.decide(requester, proposal, current, replicas,
                                _eligible(ctl, tp), variant)
        if decision.error is not None or current is None:
            results[i] = IsrChangeResult(tp.topic, tp.partition, decision.error)
        elif decision.unchanged:
            results[i] = _result(tp, current, None)
        else:
            min_insync = ctx.min_insync_replicas(tp, ctl.config.min_insync_replicas)
            updates[tp] = rules.next_state(current, decision.isr, replicas, min_insync, ctx.epoch, variant)
            index[tp] = i
    if not updates:
        return {}
    written, conflicts = await ctl.zkw.write_states(updates)
    for tp, state in written.items():
        ctx.states[tp] = state
        changed.append(tp)
        zxid = ctl.zkw.written_zxids.get(tp)
        results[index[tp]] = _result(tp, state, zxid)
        ctl.runtime.emit(IsrWritten(
            topic=tp.topic, partition=tp.partition, leader=state.leader, leader_epoch=state.leader_epoch,
            isr=state.isr, zk_version=state.zk_version, requester=requester,
            requested_leader_epoch=pending[index[tp]].leader_epoch,
            requester_incarnation=request.broker_incarnation, zxid=zxid))
    if conflicts:
        for tp, fresh in zip(conflicts, await ctl.zkw.read_states(conflicts)):
            if fresh is not None:
                ctx.states[tp] = fresh
    return {index[tp]: pending[index[tp]] for tp in conflicts}


def _eligible(ctl: ControllerParts, tp: TopicPartition) -> Callable[[int], bool]:
    ctx = ctl.ctx
    return lambda r: ctx.may_lead(r, tp)


def _result(tp: TopicPartition, state: LeaderIsr, zxid: int | None) -> IsrChangeResult:
    return IsrChangeResult(tp.topic, tp.partition, None, leader=state.leader, leader_epoch=state.leader_epoch,
                           isr=state.isr, zk_version=state.zk_version, elr=state.elr, zxid=zxid)
