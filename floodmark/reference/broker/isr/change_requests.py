"""ISR changes by request (KIP-343): how a leader has the controller change its ISR.

At the ``kip-343`` inter-broker protocol a leader does not write its shrunk or expanded ISR
to ZooKeeper (:mod:`~floodmark.reference.broker.isr.updates` is the older way); it proposes
it to the controller in an ``IsrChangeRequest`` (its broker id and incarnation, and the
leader epoch it proposes in) and acts on it only once the controller accepted it: until
then the ISR that counts for acks=all and for the HW stays the old one, and no other change
of that partition's ISR is started (``isr_update_pending``).

What the leader does with the answer:

* no answer (no controller, unreachable, timed out), NOT_CONTROLLER, or a registration the
  controller has not read yet (UNKNOWN_INCARNATION_ID): ask again after a short pause,
  finding the controller afresh each time, so a controller change is followed; a retried
  proposal the controller had already applied is answered as accepted without a new write;
* INVALID_INCARNATION_ID or BROKER_FENCED: this incarnation is over; drop the change (the
  broker re-registers, and its next incarnation is told the partition's state afresh);
* per partition, NOT_LEADER_FOR_PARTITION (a newer leader exists), INVALID_UPDATE_VERSION
  (the state moved on since the version it was proposed against) or INVALID_REQUEST: drop
  the change; the controller's LeaderAndIsr, or the next ISR check, decides what follows;
* accepted: adopt the state the controller wrote (ISR, ZooKeeper version, ELR), if this
  replica still leads in the epoch it proposed in.

It stops asking for a partition once the replica no longer leads in that epoch, was fenced,
or the broker is shutting down. Changes found together (every lagging follower of every
partition, found by one ISR check) go in one request, as the controller writes them in one
batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from floodmark.contracts.node_event_kinds import Rejected
from floodmark.reference.broker.controller_route import ControllerRoute
from floodmark.reference.broker.partition import Partition
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.protocol.messages import (
    Errors,
    IsrChangePartition,
    IsrChangeRequest,
    IsrChangeResult,
)
from floodmark.reference.runtime import Runtime

RETRY_BACKOFF = 0.2  # seconds between attempts while no controller accepts or refuses
RETRIABLE = frozenset({Errors.NOT_CONTROLLER, Errors.UNKNOWN_INCARNATION_ID})

IsrChange = tuple[Partition, tuple[int, ...], str]
"""A led partition, its proposed ISR, and the kind of change ("shrink" | "expand")."""


@dataclass(frozen=True)
class _Proposal:
    partition: Partition
    leader_epoch: int  # the epoch it is proposed in: an answer counts only while it still leads in it
    zk_version: int  # the state it is proposed against: a copy landing after a newer change is refused
    isr: tuple[int, ...]
    change: str


class IsrChangeRequests:
    def __init__(self, runtime: Runtime, broker_id: int, session: BrokerSession, route: ControllerRoute,
                 closed: Callable[[], bool]) -> None:
        self.runtime = runtime
        self.broker_id = broker_id
        self.session = session
        self.route = route
        self.closed = closed  # the broker shut its replicas down

    def _still_proposing(self, proposal: _Proposal) -> bool:
        p = proposal.partition
        return (p.role == "leader" and p.leader_epoch == proposal.leader_epoch and not p.stale
                and not self.session.fenced and not self.session.stopping and not self.closed())

    async def propose_many(self, changes: Sequence[IsrChange]) -> list[bool]:
        """Have the controller make each proposed ISR its partition's, in one request; per
        change, whether the controller accepted it and the partition adopted it."""
        proposals = [_Proposal(p, p.leader_epoch, p.zk_version, isr, change) for p, isr, change in changes]
        for proposal in proposals:
            proposal.partition.isr_update_pending = True
        adopted: set[int] = set()
        waiting = list(range(len(proposals)))
        while True:
            waiting = [i for i in waiting if self._still_proposing(proposals[i])]
            if not waiting:
                break
            request = IsrChangeRequest(self.broker_id, self.session.incarnation, tuple(
                IsrChangePartition(proposals[i].partition.topic, proposals[i].partition.partition,
                                   proposals[i].leader_epoch, proposals[i].isr, proposals[i].zk_version)
                for i in waiting))
            response = await self.route.isr_change(request)
            if response is None or response.error in RETRIABLE:
                await self.runtime.sleep(RETRY_BACKOFF)
                continue
            results: Sequence[IsrChangeResult | None] = response.partitions
            if response.error is not None or len(results) != len(waiting):
                results = [None] * len(waiting)
            for i, result in zip(waiting, results):
                # A LeaderAndIsr or fencing that overtook the answer rules instead.
                if self._still_proposing(proposals[i]) and self._settle(proposals[i], result, response.error):
                    adopted.add(i)
            break
        for proposal in proposals:
            p = proposal.partition
            if p.leader_epoch == proposal.leader_epoch and p.isr_update_pending:
                p.end_isr_update()  # answered: the controller wrote it (adopted) or refused it
        return [i in adopted for i in range(len(proposals))]

    def _settle(self, proposal: _Proposal, result: IsrChangeResult | None, request_error: str | None) -> bool:
        p = proposal.partition
        error = request_error if result is None else result.error
        if (result is None or error is not None
                or (result.leader, result.leader_epoch) != (self.broker_id, proposal.leader_epoch)):
            self.runtime.emit(Rejected(request="IsrChange",
                                       why=f"the controller answered {error or 'for another leader'}",
                                       topic=p.topic, partition=p.partition, leader_epoch=proposal.leader_epoch))
            return False
        p.apply_isr(result.isr, result.zk_version, proposal.change, result.elr, zxid=result.zxid)
        return True
