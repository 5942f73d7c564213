"""ISR change requests (KIP-343): what the controller accepts from a leader, decided purely.

Under the ``kip-343`` inter-broker protocol a leader no longer writes a shrunk or expanded
ISR to ZooKeeper; it proposes it to the controller, which is then the partition state's only
writer. The controller must refuse what a leader no longer has the right to propose:

* the whole request, when it comes from an older *incarnation* of the broker (a newer
  registration of that broker id exists: INVALID_INCARNATION_ID) or from a broker the
  controller fenced for missed heartbeats (BROKER_FENCED); a registration the controller has
  not read yet is UNKNOWN_INCARNATION_ID, which the leader retries;
* one partition, when the requester does not lead it in the leader epoch it proposes in
  (NOT_LEADER_FOR_PARTITION: a newer leader was elected while the request was on its way),
  or when the ISR is malformed: empty, with a broker twice, without the leader, naming a
  non-replica, or adding a replica the controller does not consider eligible (fenced,
  stopping, or its log directory offline): INVALID_REQUEST;
* one partition, when it was proposed against an older version of the state node than the
  current one (INVALID_UPDATE_VERSION, Kafka's partition epoch check): a request held back
  in the network past its timeout may land after the leader's retry was accepted and a
  newer change after it; written, it would undo that change without the leader, whose
  wait is over, ever learning of it (explore seed 183 shrank an ISR behind its leader's
  back, and the leader never proposed the follower back: its own ISR still held it).

A proposal equal to the current ISR is accepted without a write (a leader retrying a
request whose answer it lost), whatever version it was proposed against. The
``stale-isr-change-accepted`` variant skips the incarnation, leader and version checks: the
proposal of a deposed leader lands on the current leader's state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from floodmark.reference.protocol.eligible_leaders import last_known_elr, next_elr, tracks_elr
from floodmark.reference.protocol.messages import Errors, IsrChangePartition
from floodmark.reference.protocol.variants import Variant
from floodmark.reference.protocol.zk_layout import LeaderIsr


def accepts_stale_isr_change(variant: Variant) -> bool:
    """The one place the ``stale-isr-change-accepted`` switch is read."""
    return variant.isr_change_without_leader_check


def request_error(requested_incarnation: int, registered_incarnation: int | None, fenced: bool,
                  variant: Variant) -> str | None:
    """Why the whole request is refused, if it is."""
    if registered_incarnation is None or requested_incarnation > registered_incarnation:
        return Errors.UNKNOWN_INCARNATION_ID
    if requested_incarnation < registered_incarnation and not accepts_stale_isr_change(variant):
        return Errors.INVALID_INCARNATION_ID
    if fenced:
        return Errors.BROKER_FENCED
    return None


@dataclass(frozen=True)
class IsrDecision:
    """The controller's answer for one proposed ISR: an error, or the ISR to hold."""

    error: str | None
    isr: tuple[int, ...] = ()
    unchanged: bool = False  # it is the ISR already: nothing to write


def decide(requester: int, proposal: IsrChangePartition, current: LeaderIsr | None,
           replicas: Sequence[int], eligible: Callable[[int], bool], variant: Variant) -> IsrDecision:
    """Accept or refuse one partition's proposal against the controller's current state."""
    if current is None or not replicas:
        return IsrDecision(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    stale = current.leader != requester or current.leader_epoch != proposal.leader_epoch
    if stale and not accepts_stale_isr_change(variant):
        return IsrDecision(Errors.NOT_LEADER_FOR_PARTITION)
    isr = tuple(proposal.isr)
    if (not isr or len(set(isr)) != len(isr) or requester not in isr
            or any(r not in replicas for r in isr)):
        return IsrDecision(Errors.INVALID_REQUEST)
    if any(not eligible(r) for r in isr if r not in current.isr):
        return IsrDecision(Errors.INVALID_REQUEST)
    if isr == current.isr:
        return IsrDecision(None, isr, unchanged=True)
    if proposal.zk_version < current.zk_version and not accepts_stale_isr_change(variant):
        return IsrDecision(Errors.INVALID_UPDATE_VERSION)
    return IsrDecision(None, isr)


def next_state(current: LeaderIsr, isr: tuple[int, ...], replicas: Sequence[int], min_insync: int,
               controller_epoch: int, variant: Variant) -> LeaderIsr:
    """The state node to write for an accepted ISR: same leader and epoch, the new ISR (and
    the ELR it implies, KIP-966), written by this controller; conditional on ``current``'s
    version."""
    if not tracks_elr(variant):
        return dataclasses.replace(current, isr=isr, elr=(), last_known_elr=(), controller_epoch=controller_epoch)
    elr = next_elr(replicas, current.isr, current.elr, isr, min_insync)
    known = last_known_elr(replicas, current.last_known_elr, isr, elr, min_insync)
    return dataclasses.replace(current, isr=isr, elr=elr, last_known_elr=known, controller_epoch=controller_epoch)
