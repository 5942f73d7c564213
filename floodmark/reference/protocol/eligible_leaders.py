"""Eligible leader replicas (KIP-966): who may lead cleanly when no ISR member can.

Kafka's ISR alone cannot say who is safe to elect once the ISR is empty: a replica that left
it may lack records the HW later covered. KIP-966 closes the gap with two rules that hold
together:

1. **Strict min ISR.** A leader advances its HW only while its ISR has at least
   min.insync.replicas members. So from the moment an ISR shrinks below min.insync.replicas
   the HW stands still, and a replica that left it then holds every committed record.
2. **Eligible leader replicas (ELR).** Those replicas (the ones that left an ISR smaller than
   min.insync.replicas) are kept in the partition state. When no ISR member can lead, the
   controller elects one of them, cleanly. The ELR empties as soon as the ISR is back at
   min.insync.replicas (the HW moves again), loses a member that rejoins the ISR, and loses
   one that recovered from an unclean shutdown (it may have lost what it held; it is then a
   *last known* ELR member, see ``controller/election.balanced_recovery``).

The leader applies rule 1 (``Partition.maybe_advance_high_watermark``); whoever writes an
ISR change (the leader when it shrinks or expands the ISR, the controller when it elects)
computes the new ELR with :func:`next_elr`, so ZooKeeper always holds it beside the ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from floodmark.reference.protocol.variants import Variant


def tracks_elr(variant: Variant) -> bool:
    """Before KIP-966 (the ``no-kip-966`` variant) there is no ELR and no strict min ISR."""
    return not variant.unclean_recovery_keeps_isr


def strict_min_isr(variant: Variant) -> bool:
    """Does the HW wait for min.insync.replicas in the ISR? Not before KIP-966, and not
    where min.insync.replicas is not enforced at all (the ``acks-all-isr-of-one`` flaw)."""
    return tracks_elr(variant) and not variant.acks_all_with_isr_of_one


def next_elr(replicas: Sequence[int], old_isr: Sequence[int], old_elr: Sequence[int],
             new_isr: Sequence[int], min_insync: int, *, not_eligible: Collection[int] = ()) -> tuple[int, ...]:
    """The ELR after the ISR goes from ``old_isr`` to ``new_isr``, in assignment order.

    ``not_eligible``: replicas that must not be in it whatever happened (they recovered from
    an unclean shutdown).
    """
    if len(new_isr) >= min_insync:
        return ()  # the HW moves again: a replica outside the ISR may fall behind it
    left = set(old_elr) | (set(old_isr) - set(new_isr))
    return tuple(r for r in replicas if r in left and r not in new_isr and r not in not_eligible)


def last_known_elr(replicas: Sequence[int], known: Collection[int], new_isr: Sequence[int],
                   elr: Sequence[int], min_insync: int) -> tuple[int, ...]:
    """Members that left the ISR or the ELR after an unclean shutdown (KIP-966's LastKnownELR),
    kept until the ISR is back at min.insync.replicas: if every one of the rest recovers
    uncleanly too, they are among those that may lead (``Balanced`` unclean recovery)."""
    if len(new_isr) >= min_insync:
        return ()
    return tuple(r for r in replicas if r in known and r not in new_isr and r not in elr)


def may_advance_high_watermark(isr: Sequence[int], min_insync: int) -> bool:
    """Rule 1: the HW stands still while the ISR is smaller than min.insync.replicas."""
    return len(isr) >= min_insync
