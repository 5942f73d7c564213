"""The partition state machine: decide, write to ZooKeeper, then tell the brokers.

Every leader or ISR change the controller makes goes through :func:`change_partitions`, in
the order the V3 design requires: the decision is written to the partition's state node
first (conditionally, batched, fenced by the controller epoch), and only what was written is
sent to brokers in LeaderAndIsr requests (to every replica of the partition) followed by
UpdateMetadata (to every live broker, so clients find the new leader). A successor
controller reading ZooKeeper therefore never finds less than the brokers were told.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping

from floodmark.contracts.node_event_kinds import LeaderElected
from floodmark.reference.controller.election import Decision
from floodmark.reference.controller.parts import ControllerParts
from floodmark.reference.protocol.eligible_leaders import last_known_elr, next_elr, tracks_elr
from floodmark.reference.protocol.messages import (
    LeaderAndIsrRequest,
    PartitionState,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataRequest,
)
from floodmark.reference.protocol.zk_layout import LeaderIsr, sorted_partitions

Decide = Callable[[TopicPartition, LeaderIsr], Decision | None]

MAX_CONFLICT_ROUNDS = 5


async def change_partitions(
    ctl: ControllerParts, partitions: Iterable[TopicPartition], decide: Decide, *, reread: bool = False,
    on_written: Callable[[list[TopicPartition]], None] | None = None, recovered: Collection[int] = (),
) -> list[TopicPartition]:
    """Apply ``decide`` to each partition and persist the results; returns what changed.

    ``recovered``: the brokers whose unclean recovery (KIP-966) this change acts on; they
    leave the ELR too. Only then: a broker's registration says "unclean" until the broker
    hears it was acted on, and a replica that has since caught up and rejoined an ISR holds
    every committed record again, so it joins the ELR like any other when it leaves.

    A partition whose state node changed under us (a leader wrote its ISR) is re-read and
    decided again, so a write is never based on a stale ISR; ``reread`` also refreshes the
    states first, for decisions that might otherwise wrongly conclude "nothing to do".
    ``on_written`` hears each batch of partitions once it is written (thousands are written
    in many transactions): the caller may prepare its requests while the rest is written.
    """
    ctx = ctl.ctx
    pending = sorted_partitions(set(partitions))
    changed: list[TopicPartition] = []
    if reread:  # for decisions where "no change" on a stale ISR would be wrong
        for tp, fresh in zip(pending, await ctl.zkw.read_states(pending)):
            if fresh is not None:
                ctx.states[tp] = fresh
    for _ in range(MAX_CONFLICT_ROUNDS):
        decisions: dict[TopicPartition, Decision] = {}
        for tp in pending:
            state = ctx.states.get(tp)
            if state is None:
                continue
            decision = decide(tp, state)
            if decision is not None:
                decisions[tp] = _with_elr(ctl, tp, state, decision, recovered)
        if not decisions:
            break
        # Decided, not yet written: a controller stopped here writes, when it resumes, what it
        # decided for its own reign (KAFKA-6082), unless the controller epoch fences it.
        await ctl.runtime.safepoint()

        def record(written: dict[TopicPartition, LeaderIsr], decisions: dict[TopicPartition, Decision] = decisions) -> None:
            done = sorted_partitions(written)
            for tp in done:
                ctx.states[tp] = state = written[tp]
                changed.append(tp)
                ctl.runtime.emit(LeaderElected(
                    topic=tp.topic, partition=tp.partition, leader=state.leader,
                    leader_epoch=state.leader_epoch, isr=state.isr,
                    controller_epoch=ctx.epoch, zk_version=state.zk_version,
                    unclean=decisions[tp].unclean, zxid=ctl.zkw.written_zxids.pop(tp, None),
                    recovery=decisions[tp].recovery,
                ))
            if on_written is not None:
                on_written(done)

        _, conflicts = await ctl.zkw.write_states({tp: d.state for tp, d in decisions.items()}, on_chunk=record)
        if not conflicts:
            break
        for tp, fresh in zip(conflicts, await ctl.zkw.read_states(conflicts)):
            if fresh is None:
                ctx.states.pop(tp, None)
            else:
                ctx.states[tp] = fresh
        pending = conflicts
    return changed


def _with_elr(ctl: ControllerParts, tp: TopicPartition, old: LeaderIsr, decision: Decision,
              recovered: Collection[int]) -> Decision:
    """The decision with its ELR (KIP-966) brought up to date, whichever rule made it."""
    new = decision.state
    if decision.unclean or not tracks_elr(ctl.config.variant):
        # After an unclean election the new leader's log is the reference: nobody is safer.
        return decision if not new.elr else dataclasses.replace(decision, state=dataclasses.replace(new, elr=()))
    replicas = ctl.ctx.replicas(tp)
    min_insync = ctl.ctx.min_insync_replicas(tp, ctl.config.min_insync_replicas)
    elr = next_elr(replicas, old.isr, old.elr, new.isr, min_insync, not_eligible=recovered)
    last_known = last_known_elr(replicas, (*old.last_known_elr, *new.last_known_elr), new.isr, elr, min_insync)
    if (elr, last_known) == (new.elr, new.last_known_elr):
        return decision
    return dataclasses.replace(decision, state=dataclasses.replace(new, elr=elr, last_known_elr=last_known))


def send_leader_and_isr(
    ctl: ControllerParts, partitions: Iterable[TopicPartition], *, brokers: Iterable[int] | None = None,
    is_new: bool = False, is_init: bool = False, update_metadata: bool = True,
    known: Mapping[TopicPartition, PartitionState] | None = None,
) -> None:
    """Send each live replica the state of its partitions, then UpdateMetadata to all.

    ``known``: partition states already built for this decision (by :func:`partition_states`),
    so that thousands of them are not built twice.
    """
    ctx = ctl.ctx
    wanted = None if brokers is None else set(brokers)
    serving = {b for b in ctx.live_broker_ids() if wanted is None or b in wanted}
    per_broker: dict[int, list[PartitionState]] = defaultdict(list)
    tps = sorted_partitions(tp for tp in set(partitions) if tp in ctx.states)
    if known is not None and not is_new:
        states = [known.get(tp) or ctx.partition_state(tp) for tp in tps]
    else:
        states = [ctx.partition_state(tp, is_new=is_new) for tp in tps]  # once per partition
    for state in states:
        for replica in state.replicas:
            if replica in serving:
                per_broker[replica].append(state)
    for broker in sorted(per_broker):
        mine = tuple(per_broker[broker])
        leaders = {s.leader for s in mine if ctx.is_serving(s.leader)}
        ctl.channel.send(broker, LeaderAndIsrRequest(
            controller_id=ctx.broker_id, controller_epoch=ctx.epoch,
            broker_incarnation=ctx.incarnation(broker), partitions=mine,
            live_leaders=ctx.broker_infos(leaders), is_init=is_init,
        ))
    if update_metadata:
        _send_update_metadata(ctl, tps, states if not is_new else [ctx.partition_state(tp) for tp in tps])


class StatesAsWritten:
    """The LeaderAndIsr view of each batch of partitions, built as soon as ZooKeeper has it.

    A failover writes thousands of new leaders in many transactions; building their requests'
    states while the later transactions are still in flight takes that work off the path to
    the brokers. (Telling brokers batch by batch was measured slower: each batch changes
    every follower's fetch session while the rest are still being told.)
    """

    def __init__(self, ctl: ControllerParts) -> None:
        self.ctl = ctl
        self.states: dict[TopicPartition, PartitionState] = {}

    def __call__(self, partitions: list[TopicPartition]) -> None:
        self.states.update(partition_states(self.ctl, partitions))


def partition_states(ctl: ControllerParts, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionState]:
    """The current LeaderAndIsr/UpdateMetadata view of ``partitions``, to share between requests."""
    ctx = ctl.ctx
    return {tp: ctx.partition_state(tp) for tp in partitions if tp in ctx.states}


def send_update_metadata(
    ctl: ControllerParts, partitions: Iterable[TopicPartition], *, brokers: Iterable[int] | None = None,
    known: Mapping[TopicPartition, PartitionState] | None = None,
) -> None:
    ctx = ctl.ctx
    tps = sorted_partitions(tp for tp in set(partitions) if tp in ctx.states)
    states = [(known.get(tp) if known is not None else None) or ctx.partition_state(tp) for tp in tps]
    _send_update_metadata(ctl, tps, states, brokers)


def _send_update_metadata(
    ctl: ControllerParts, tps: list[TopicPartition], states: list[PartitionState],
    brokers: Iterable[int] | None = None,
) -> None:
    ctx = ctl.ctx
    down = {b for b in ctx.brokers if not ctx.is_serving(b)}
    offline = tuple(
        (tp.topic, tp.partition, r) for tp, s in zip(tps, states) for r in s.replicas
        if r in down or r in ctx.brokers and tp in ctx.offline_replicas.get(r, ()) or r not in ctx.brokers
    )
    request = UpdateMetadataRequest(
        controller_id=ctx.broker_id, controller_epoch=ctx.epoch, brokers=ctx.broker_infos(),
        partitions=tuple(states), offline_replicas=offline,
    )
    for broker in ctx.live_broker_ids() if brokers is None else sorted(set(brokers)):
        ctl.channel.send(broker, request)


def send_stop_replica(
    ctl: ControllerParts, broker: int, partitions: Iterable[TopicPartition], *, delete: bool,
) -> None:
    tps = tuple(sorted_partitions(set(partitions)))
    if not tps or not ctl.ctx.is_serving(broker):
        return
    ctl.channel.send(broker, StopReplicaRequest(
        controller_id=ctl.ctx.broker_id, controller_epoch=ctl.ctx.epoch,
        broker_incarnation=ctl.ctx.incarnation(broker), partitions=tps, delete=delete,
    ))
