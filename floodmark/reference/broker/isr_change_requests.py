"""ISR changes by request (KIP-343): how a leader has the controller change its ISR.

At the ``kip-343`` inter-broker protocol a leader does not write its shrunk or expanded ISR
to ZooKeeper (:mod:`~floodmark.reference.broker.isr_updates` is the older way); it proposes
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
* per partition, NOT_LEADER_FOR_PARTITION (a newer leader exists) or INVALID_REQUEST: drop
  the change; the controller's LeaderAndIsr, or the next ISR check, decides what follows;
* accepted: adopt the state the controller wrote (ISR, ZooKeeper version, ELR), if this
  replica still leads in the epoch it proposed in.

It stops asking once the replica no longer leads in that epoch, was fenced, or the broker
is shutting down.
"""

from __future__ import annotations

from collections.abc import Callable

from floodmark.node_event_kinds import Rejected
from floodmark.reference.broker.controller_route import ControllerRoute
from floodmark.reference.broker.partition import Partition
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.protocol.messages import (
    Errors,
    IsrChangePartition,
    IsrChangeRequest,
    IsrChangeResponse,
)
from floodmark.reference.runtime import Runtime

RETRY_BACKOFF = 0.2  # seconds between attempts while no controller accepts or refuses
RETRIABLE = frozenset({Errors.NOT_CONTROLLER, Errors.UNKNOWN_INCARNATION_ID})


class IsrChangeRequests:
    def __init__(self, runtime: Runtime, broker_id: int, session: BrokerSession, route: ControllerRoute,
                 closed: Callable[[], bool]) -> None:
        self.runtime = runtime
        self.broker_id = broker_id
        self.session = session
        self.route = route
        self.closed = closed  # the broker shut its replicas down

    def _still_proposing(self, p: Partition, epoch: int) -> bool:
        return (p.role == "leader" and p.leader_epoch == epoch and not p.stale
                and not self.session.fenced and not self.session.stopping and not self.closed())

    async def propose(self, p: Partition, new_isr: tuple[int, ...], change: str) -> bool:
        """Have the controller make ``new_isr`` the ISR of ``p``; True if it did and ``p``
        adopted it."""
        epoch = p.leader_epoch
        p.isr_update_pending = True
        proposal = IsrChangePartition(p.topic, p.partition, epoch, new_isr)
        while self._still_proposing(p, epoch):
            request = IsrChangeRequest(self.broker_id, self.session.incarnation, (proposal,))
            response = await self.route.isr_change(request)
            if not self._still_proposing(p, epoch):
                break  # a LeaderAndIsr or fencing overtook the answer: it rules
            if response is None or response.error in RETRIABLE:
                await self.runtime.sleep(RETRY_BACKOFF)
                continue
            return self._settle(p, epoch, change, response)
        if p.leader_epoch == epoch:
            p.isr_update_pending = False
        return False

    def _settle(self, p: Partition, epoch: int, change: str, response: IsrChangeResponse) -> bool:
        result = response.partitions[0] if response.error is None and len(response.partitions) == 1 else None
        error = response.error if result is None else result.error
        if result is None or error is not None or (result.leader, result.leader_epoch) != (self.broker_id, epoch):
            self.runtime.emit(Rejected(request="IsrChange", why=f"the controller answered {error or 'for another leader'}",
                                       topic=p.topic, partition=p.partition, leader_epoch=epoch))
            p.isr_update_pending = False
            return False
        p.apply_isr(result.isr, result.zk_version, change, result.elr, zxid=result.zxid)
        return True
