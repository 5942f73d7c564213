"""Brokers that recovered from an unclean shutdown leave every ISR before they may lead (KIP-966).

A broker acknowledges records without fsync (Kafka's default: durability comes from the
ISR, not the disk), so a power loss takes the unsynced tail of its logs with it: records a
leader acknowledged, records a follower reported and the leader counted toward its HW. Its
place in the ISR then claims records it no longer has. Usually that claim dies with the
broker, since the controller takes a failed broker out of the ISR (or moves its leadership)
when its registration goes. Not always: a controller cut off from ZooKeeper when the broker
failed cannot write that down, and its successor finds the broker registered again, in
the ISR and maybe still leader, and keeps it there in the same epoch; the followers then
truncate to the empty log by leader epoch. And a broker that was the last ISR member keeps
its place while it is down, so that it can lead again when it returns.

KIP-966's answer, in the ZooKeeper-era design: the broker tells the controller in its
registration that it did not shut down cleanly (its log directories lacked the clean
shutdown marker); the controller, on learning of such a registration (a broker starting,
or every registered broker at failover), takes the broker out of the ISR of every partition
it is in, even as the last member, and elects another in-sync replica, in a new leader
epoch, where it led. All of this is written to ZooKeeper before the controller sends the
broker anything, so a successor never finds less; the broker takes the first LeaderAndIsr
meant for that registration as the acknowledgement and rewrites its registration as clean,
so that a successor does not take it out again after it caught up. It rejoins the ISR as
any follower does, by catching up with the leader. When every member of the ISR recovered
uncleanly (and the ELR too), one of them or of the replicas remembered from before leads
(KIP-966's ``Balanced`` unclean recovery; unclean election instead where it is allowed; see
:func:`~floodmark.reference.controller.election.balanced_recovery`). It waits, offline, until every replica that may hold the most is back and has said how far
its log goes (a broker down, or its log directory offline, may be the one furthest along): the controller resumes it
whenever it elects offline partitions (a broker starting or heartbeating again, failover).
Which one: the controller first asks every candidate that is back how far its log goes
(KIP-966's GetReplicaLogInfo, :func:`log_ends`) and elects the one furthest along, so that a
replica a SIGKILL left whole is preferred to one a power loss emptied.

A SIGKILL is an unclean shutdown too (no marker): it loses nothing on disk, so the rule is
merely conservative there. The ``no-kip-966`` variant switches the rule off.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Mapping

from floodmark.contracts.node_event_kinds import BrokerState
from floodmark.reference.controller.context import INACTIVE
from floodmark.reference.controller.election import (
    leaves_isr,
    needs_balanced_recovery,
    recovery_candidates,
    remove_recovered_replicas,
    waiting_recovery,
)
from floodmark.reference.controller.partitions import change_partitions
from floodmark.reference.controller.parts import ControllerParts
from floodmark.reference.protocol.messages import (
    ReplicaLogInfoRequest,
    ReplicaLogInfoResponse,
    TopicPartition,
)


async def remove_recovered_brokers(ctl: ControllerParts, brokers: Iterable[int]) -> list[TopicPartition]:
    """Take those of ``brokers`` that registered after an unclean shutdown out of every ISR,
    electing new leaders where they led; returns the partitions changed (written, not sent)."""
    ctx = ctl.ctx
    recovered = sorted(b for b in set(brokers)
                       if b in ctx.brokers and leaves_isr(ctx.brokers[b].registration, ctl.config.variant))
    if not recovered:
        return []
    for b in recovered:
        ctl.runtime.emit(BrokerState(broker=b, state=INACTIVE, incarnation=ctx.incarnation(b),
                                     why="recovered from an unclean shutdown: leaves every ISR"))
    affected = [tp for tp in ctx.partitions()
                if ctx.states[tp].leader in recovered
        or any(r in recovered for r in (*ctx.states[tp].isr, *ctx.states[tp].elr))]
    allow_unclean = ctl.config.variant.unclean_leader_election

    def eligible(tp: TopicPartition) -> Callable[[int], bool]:
        return lambda r: ctx.may_lead(r, tp)

    def min_insync(tp: TopicPartition) -> int:
        return ctx.min_insync_replicas(tp, ctl.config.min_insync_replicas)

    # Where one of several unclean survivors will be chosen, ask them how far their logs go.
    choices = {tp: recovery_candidates(ctx.replicas(tp), ctx.states[tp], recovered, eligible(tp))
               for tp in affected
               if needs_balanced_recovery(ctx.states[tp], recovered, allow_unclean=allow_unclean)}
    ends = await log_ends(ctl, {tp: choice for tp, choice in choices.items() if len(choice) > 1})
    return await change_partitions(ctl, affected, lambda tp, s: remove_recovered_replicas(
        ctx.replicas(tp), s, recovered, eligible(tp), ctx.epoch, allow_unclean=allow_unclean,
        min_insync=min_insync(tp), log_ends=ends.get(tp)), recovered=recovered)


async def waiting_log_ends(ctl: ControllerParts, partitions: Iterable[TopicPartition]) -> LogEnds:
    """How far the logs go of the possible leaders of every waiting balanced recovery among
    ``partitions`` that can resume now (all of them back), to choose the one furthest along."""
    ctx = ctl.ctx
    waiting = {tp: waiting_recovery(ctx.replicas(tp), ctx.states[tp], functools.partial(ctx.may_lead, tp=tp))
               for tp in partitions if tp in ctx.states}
    return await log_ends(ctl, {tp: possible for tp, possible in waiting.items() if len(possible) > 1})


LogEnds = dict[TopicPartition, dict[int, tuple[int, int]]]
"""Per partition asked, per replica that answered: (last leader epoch, log end offset)."""


async def log_ends(ctl: ControllerParts, candidates: Mapping[TopicPartition, list[int]]) -> LogEnds:
    """Ask each candidate broker, once for all its partitions and all brokers at once, how far
    its replicas go (KIP-966's GetReplicaLogInfo). A broker that does not answer within the
    request timeout is left out; so is a replica it cannot read (the recovery then waits)."""
    asked: dict[int, list[TopicPartition]] = {}
    for tp in sorted(candidates, key=lambda t: (t.topic, t.partition)):
        for broker in candidates[tp]:
            asked.setdefault(broker, []).append(tp)
    brokers = sorted(asked)

    async def ask(broker: int) -> ReplicaLogInfoResponse | None:
        live = ctl.ctx.brokers.get(broker)
        if live is None:
            return None
        try:
            response = await ctl.runtime.network.request(
                live.registration.address, ReplicaLogInfoRequest(tuple(asked[broker])), ctl.config.request_timeout)
        except (ConnectionError, TimeoutError, OSError) as e:
            ctl.runtime.log.warning("no log info from broker %s: %s", broker, e)
            return None
        return response if isinstance(response, ReplicaLogInfoResponse) and response.error is None else None

    ends: LogEnds = {tp: {} for tp in candidates}  # asked, whoever answers
    for broker, response in zip(brokers, await asyncio.gather(*(ask(b) for b in brokers))):
        for info in () if response is None else response.partitions:
            if info.error is None:
                ends.setdefault(TopicPartition(info.topic, info.partition), {})[broker] = (info.last_epoch, info.log_end)
    return ends
