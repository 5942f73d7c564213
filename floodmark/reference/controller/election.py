"""Leader selection: how the controller picks a partition's leader and ISR.

Every rule here is a pure function from the partition's replica assignment, its current
leader-and-ISR state and the set of replicas that may lead right now ("eligible": registered
in ZooKeeper, heartbeating to the controller (KIP-343), not shutting down, its log directory
online (KIP-112)) to the new state, or ``None`` when nothing has to change.

The rules follow Kafka's ZooKeeper-era controller:

* **offline election** (the leader died or was fenced): the first replica in assignment order
  that is still in the ISR and eligible becomes leader and the ISR shrinks to eligible
  members. With no such replica, an eligible member of the ELR leads (KIP-966: it left an
  ISR below min.insync.replicas, so it holds every committed record; see
  ``protocol/eligible_leaders``). With neither the partition goes offline (leader -1, ISR
  kept, so the last ISR member can lead again when it returns), unless *unclean* election is allowed, in which
  case the first eligible out-of-sync replica leads with an ISR of itself and whatever it had
  not replicated is lost (the Kafka HA overview's availability/durability trade-off).
* **follower removal**: an ineligible follower leaves the ISR so the HW can advance.
* **unclean recovery** (KIP-966): a replica whose broker recovered from an unclean shutdown
  may lack records the ISR counted on (a power loss took what it had not fsynced). It
  leaves the ISR: it must not lead again until it has caught up as a follower. When every
  member of the ISR and the ELR recovered uncleanly, no replica is safer than they and the
  ones remembered from before are: once all of them are back, the one whose log goes
  furthest leads in a new epoch (KIP-966's ``Balanced`` unclean recovery, recorded as
  unclean).
* **reassignment** (V3 design): the leader must be in the target replicas and the ISR.
* **preferred**: the first assigned replica leads again when it is eligible and in sync.
* **controlled shutdown**: leadership moves to another in-sync replica before the broker stops.

Every controller-made change bumps the leader epoch, so brokers can tell a newer decision
from an older one; the ZooKeeper version in the returned state is still the one that was
read, because the write is conditional on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from floodmark.reference.protocol.variants import Variant
from floodmark.reference.protocol.zk_layout import NO_LEADER, BrokerRegistration, LeaderIsr

Eligible = Callable[[int], bool]


@dataclass(frozen=True)
class Decision:
    """A new leader-and-ISR state for one partition, whether it was an unclean choice, and
    whether that choice was a balanced recovery (every in-sync replica recovered uncleanly)."""

    state: LeaderIsr
    unclean: bool = False
    recovery: bool = False


def leaves_isr(registration: BrokerRegistration, variant: Variant) -> bool:
    """Must this registration's broker leave every ISR (and the ELR) before it may lead again?

    Yes when its logs were recovered from an unclean shutdown: they may lack records the
    ISR counted on. Before KIP-966 (``unclean_recovery_keeps_isr``) it kept its place.
    """
    return registration.unclean_shutdown and not variant.unclean_recovery_keeps_isr


def _bump(old: LeaderIsr, leader: int, isr: Sequence[int], controller_epoch: int) -> LeaderIsr:
    return LeaderIsr(leader, old.leader_epoch + 1, tuple(isr), controller_epoch, old.zk_version)


def initial_state(replicas: Sequence[int], eligible: Eligible, controller_epoch: int) -> LeaderIsr:
    """A new partition: the first eligible replica leads, every eligible replica is in sync."""
    live = [r for r in replicas if eligible(r)]
    if not live:
        return LeaderIsr(NO_LEADER, 0, tuple(replicas), controller_epoch)
    return LeaderIsr(live[0], 0, tuple(live), controller_epoch)


def elect_leader(
    replicas: Sequence[int], state: LeaderIsr, eligible: Eligible, controller_epoch: int,
    *, allow_unclean: bool = False,
) -> Decision | None:
    """The general rule: keep an eligible leader, else elect from the eligible ISR.

    Also removes ineligible followers from the ISR (never the last member).
    """
    live_isr = [r for r in state.isr if eligible(r)]
    if state.leader != NO_LEADER and eligible(state.leader):
        if len(live_isr) == len(state.isr):
            return None
        return Decision(_bump(state, state.leader, live_isr, controller_epoch))
    candidates = [r for r in replicas if r in live_isr]
    if candidates:
        return Decision(_bump(state, candidates[0], live_isr, controller_epoch))
    eligible_elr = [r for r in replicas if r in state.elr and eligible(r)]
    if eligible_elr:  # KIP-966: it left an ISR below min.insync, so it has every committed record
        return Decision(_bump(state, eligible_elr[0], eligible_elr[:1], controller_epoch))
    if allow_unclean:
        out_of_sync = [r for r in replicas if eligible(r)]
        if out_of_sync:
            return Decision(_bump(state, out_of_sync[0], [out_of_sync[0]], controller_epoch), unclean=True)
    if state.leader == NO_LEADER:
        return None  # already offline: writing again would only churn epochs
    # Offline: keep the ISR (minus nothing) so that a returning in-sync replica can lead.
    return Decision(_bump(state, NO_LEADER, state.isr, controller_epoch))


def remove_from_isr(
    state: LeaderIsr, removed: Collection[int], eligible: Eligible, controller_epoch: int,
    replicas: Sequence[int], *, allow_unclean: bool = False,
) -> Decision | None:
    """Take ``removed`` out of the partition (stopping, failed or offline replicas)."""
    def still_eligible(r: int) -> bool:
        return r not in removed and eligible(r)
    return elect_leader(replicas, state, still_eligible, controller_epoch, allow_unclean=allow_unclean)


def remove_recovered_replicas(
    replicas: Sequence[int], state: LeaderIsr, recovered: Collection[int], eligible: Eligible,
    controller_epoch: int, *, allow_unclean: bool = False, min_insync: int = 2,
    log_ends: Mapping[int, tuple[int, int]] | None = None,
) -> Decision | None:
    """Take replicas that recovered from an unclean shutdown out of the ISR (KIP-966).
    ``log_ends``: what the candidates of a balanced recovery said their logs hold.

    Unlike a failed broker, which keeps its place as the last ISR member so that it can lead
    again when it returns, a recovered replica leaves even then: the ISR may become empty.
    """
    members = (*state.isr, *state.elr)
    if state.leader not in recovered and not any(r in recovered for r in members):
        return None
    if needs_balanced_recovery(state, recovered, allow_unclean=allow_unclean):
        return balanced_recovery(replicas, state, recovered, eligible, controller_epoch, log_ends)
    removed = tuple(r for r in members if r in recovered)
    rest = dataclasses.replace(
        state, leader=NO_LEADER if state.leader in recovered else state.leader,
        isr=tuple(r for r in state.isr if r not in recovered),
        elr=tuple(r for r in state.elr if r not in recovered), last_known_elr=())
    decision = elect_leader(replicas, rest, eligible, controller_epoch, allow_unclean=allow_unclean)
    decision = decision or Decision(_bump(state, rest.leader, rest.isr, controller_epoch))
    if decision.unclean or len(decision.state.isr) >= min_insync:
        return decision
    # Remember who left, in case the rest recovers uncleanly too (then any of them may hold
    # the most); forgotten once the ISR is back at min.insync.replicas (controller/partitions).
    return Decision(_remember(decision.state, replicas, (*state.last_known_elr, *removed)))


def needs_balanced_recovery(state: LeaderIsr, recovered: Collection[int], *, allow_unclean: bool) -> bool:
    """Did every member of the ISR and the ELR recover uncleanly, with unclean election not
    allowed? Then one of them, or of those remembered from before, leads by
    ``balanced_recovery``.

    Whatever the ISR's size: below min.insync.replicas the HW stood still (KIP-966's strict
    min ISR), and every replica that left since it fell is in the ELR or, if it recovered
    uncleanly, remembered; an ISR of one with neither (the leader a previous unclean choice
    left alone) holds the reference log itself (explore seed 4727 stayed offline for ever
    when that leader recovered uncleanly again)."""
    members = (*state.isr, *state.elr)
    return (not allow_unclean and all(r in recovered for r in members)
            and (state.leader in recovered or bool(members)))


def recovery_candidates(replicas: Sequence[int], state: LeaderIsr, recovered: Collection[int],
                        eligible: Eligible) -> list[int]:
    """Who may lead by a balanced recovery, who left last first: the last leader, the rest of
    its ISR, its ELR, then the replicas remembered from before; only those back."""
    return [r for r in _possible_leaders(replicas, state, recovered) if eligible(r)]


def _possible_leaders(replicas: Sequence[int], state: LeaderIsr, recovered: Collection[int]) -> list[int]:
    """Every replica that may hold the most when all of the ISR recovered uncleanly, back or
    not, who left last first."""
    members = (*state.isr, *state.elr)
    newest_first = dict.fromkeys((state.leader, *state.isr, *state.elr,
                                  *(r for r in replicas if r in state.last_known_elr)))
    return [r for r in newest_first if r in state.last_known_elr or (r in members and r in recovered)]


def waiting_recovery(replicas: Sequence[int], state: LeaderIsr, eligible: Eligible) -> list[int]:
    """A balanced recovery that waited (see :func:`balanced_recovery`): the partition is
    offline with neither ISR nor ELR, remembering the replicas that may hold the most.
    Returns them once every one is back (else nothing): one of them leads."""
    if state.leader != NO_LEADER or state.isr or state.elr:
        return []
    possible = [r for r in replicas if r in state.last_known_elr]
    return possible if possible and all(eligible(r) for r in possible) else []


def resume_balanced_recovery(
    replicas: Sequence[int], state: LeaderIsr, eligible: Eligible, controller_epoch: int, *,
    log_ends: Mapping[int, tuple[int, int]] | None = None,
) -> Decision | None:
    """Elect the one furthest along of a waiting balanced recovery whose possible leaders are
    all back (:func:`waiting_recovery`); until then nothing changes."""
    possible = waiting_recovery(replicas, state, eligible)
    if not possible or not _all_answered(possible, log_ends):
        return None
    chosen = _furthest(possible, log_ends)
    return Decision(_bump(state, chosen, (chosen,), controller_epoch), unclean=True, recovery=True)


def _all_answered(candidates: Sequence[int], log_ends: Mapping[int, tuple[int, int]] | None) -> bool:
    """Did every candidate say how far its log goes? ``None``: nobody was asked (one
    candidate, or a caller that chooses by who left last alone)."""
    return log_ends is None or len(candidates) == 1 or all(r in log_ends for r in candidates)


def _furthest(candidates: Sequence[int], log_ends: Mapping[int, tuple[int, int]] | None) -> int:
    """The candidate whose log goes furthest (last epoch, then end); among equals, and when
    nobody was asked, the first."""
    if not log_ends:
        return candidates[0]
    return sorted(candidates, key=lambda r: log_ends.get(r, (-1, -1)), reverse=True)[0]


def _remember(state: LeaderIsr, replicas: Sequence[int], elr: Collection[int]) -> LeaderIsr:
    return dataclasses.replace(state, last_known_elr=tuple(r for r in replicas if r in elr))


def balanced_recovery(
    replicas: Sequence[int], state: LeaderIsr, recovered: Collection[int], eligible: Eligible,
    controller_epoch: int, log_ends: Mapping[int, tuple[int, int]] | None = None,
) -> Decision:
    """Every ISR member recovered from an unclean shutdown: lead with one of them (KIP-966's
    ``Balanced`` unclean recovery), in a new epoch, rather than stay offline for ever.

    Every acknowledged record went to every member of the ISR at the time, and a replica
    that left since was either counted on no more (the ISR was still at min.insync.replicas)
    or is in the ELR or remembered (it was not: the HW stood still), so electing one of the
    possible leaders loses only what the crash itself took (nothing after a SIGKILL, the
    unsynced tail after a power loss). The choice is recorded as unclean, because it may
    lose acknowledged records.

    As Kafka's strategy does, the controller asks the candidates how far their logs go
    (``log_ends``: last leader epoch, log end) and elects the one furthest along, by epoch
    first, then by end offset. A crash may have taken an unsynced tail (a power loss) or
    nothing (a SIGKILL, which also registers as unclean), and the contract allows the former
    on fewer than min.insync.replicas replicas at once; what was acknowledged went to every
    ISR member at the time, so one of them that lost nothing holds it all and is furthest
    along. Guessing instead (who left last) once elected a replica a power loss had emptied
    over one a SIGKILL had left whole (explore seed 13089).

    It waits, offline, until every replica that may hold the most is back and has said how
    far its log goes (KIP-966's ``Balanced`` strategy waits for all of them too): one whose
    broker is down, or whose log directory is offline, may be the one furthest along (explore
    seed 10806 elected the only replica that answered, which a power loss had emptied, over
    one whose directory was unusable for a moment). ``log_ends`` is ``None`` where nobody
    was asked; then the choice falls back on who left last: the last leader (it
    acknowledged everything; a follower may hold less), then the members of the last ISR,
    then its ELR, and only then the replicas remembered from before (they left earlier: a
    power loss may have emptied them when they left, which is why they were remembered
    rather than kept).
    """
    possible = _possible_leaders(replicas, state, recovered)
    candidates = [r for r in possible if eligible(r)]
    if not candidates or len(candidates) < len(possible) or not _all_answered(candidates, log_ends):
        # Wait, offline, for every one of them: the one not back, or that could not say, may
        # hold the most. ``resume_balanced_recovery`` elects once all are back.
        return Decision(_remember(_bump(state, NO_LEADER, (), controller_epoch), replicas, possible))
    chosen = _furthest(candidates, log_ends)
    return Decision(_bump(state, chosen, (chosen,), controller_epoch), unclean=True, recovery=True)


def reassignment_leader(
    target: Sequence[int], state: LeaderIsr, eligible: Eligible, controller_epoch: int,
) -> Decision:
    """The V3 reassignment step: a leader from the target replicas; ISR limited to the target."""
    isr = [r for r in state.isr if r in target and eligible(r)]
    if state.leader in isr:
        return Decision(_bump(state, state.leader, isr, controller_epoch))
    candidates = [r for r in target if r in isr]
    if candidates:
        return Decision(_bump(state, candidates[0], isr, controller_epoch))
    return Decision(_bump(state, NO_LEADER, isr or [r for r in state.isr if r in target] or state.isr,
                          controller_epoch))


def preferred_leader(
    replicas: Sequence[int], state: LeaderIsr, eligible: Eligible, controller_epoch: int,
) -> Decision | None:
    """Move leadership back to the first assigned replica if it is eligible and in sync."""
    preferred = replicas[0]
    if state.leader == preferred or preferred not in state.isr or not eligible(preferred):
        return None
    return Decision(_bump(state, preferred, state.isr, controller_epoch))
