"""Protocol variants: named configurations that bring back one historical flaw each.

The reference implements Kafka's replication design with every later fix on. A variant
switches one fix off, in the code path that fix changed, so that the harness can prove it
catches the flaw the fix removed. ``default`` has every fix on and must pass every checker
under every nemesis.

Each switch changes one decision in the protocol code and is named after it; the
decision is made in one function (``unclean_leader_election``, for instance, is handed to
``controller_election.elect_leader`` by each controller path that elects a leader).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    # Before KIP-101: a broker becoming follower truncates its log to its own HW, then
    # fetches; a leader change right after can lose or diverge committed records.
    truncate_to_high_watermark: bool = False
    # KIP-101 without KIP-279: the OffsetsForLeaderEpoch answer uses the requested epoch
    # only, not the largest common epoch, so logs with several epoch gaps can diverge.
    epoch_lookup_without_kip279: bool = False
    # Before KIP-320: fetches do not carry the current leader epoch, so a stale leader's or
    # a zombie follower's fetch is served instead of fenced.
    unfenced_fetch: bool = False
    # KAFKA-7128 and the literal V3 ISR-expansion rule: a follower rejoins the ISR once it
    # reaches the HW, even if it has not reached the start offset of the leader's epoch.
    isr_admission_below_epoch_start: bool = False
    # ISR changes written to ZooKeeper without a version check: a stale leader can
    # overwrite the controller's newer leader and ISR.
    unconditional_isr_write: bool = False
    # KAFKA-6082: the controller writes partition state without checking the controller
    # epoch, so a zombie controller can overwrite its successor's decisions.
    controller_writes_without_epoch_check: bool = False
    # Unclean leader election: an out-of-sync replica may become leader when no ISR member
    # is alive, losing whatever it had not replicated.
    unclean_leader_election: bool = False
    # Jepsen 2013: acks=all is satisfied by the current ISR even when the ISR is just the
    # leader (min.insync.replicas is not enforced).
    acks_all_with_isr_of_one: bool = False
    # Before KIP-966 (ZooKeeper-era Kafka): a broker that recovered from an unclean shutdown
    # (a power loss took its unsynced records) keeps its place in the ISR, so a controller
    # that finds it registered and in the ISR may let it lead what it no longer has. The
    # rest of KIP-966 goes with it: no eligible leader replicas, no strict min ISR.
    unclean_recovery_keeps_isr: bool = False
    # KIP-343's ISR change requests without their checks: the controller accepts an ISR
    # proposed by a stale incarnation or in a stale leader epoch, and writes it over the
    # current leader's state (only brokers at the ``kip-343`` inter-broker protocol send them).
    isr_change_without_leader_check: bool = False


_ALL = (
    Variant("default", "every fix on"),
    Variant("truncate-to-hw", "followers truncate to their HW on becoming follower (before KIP-101)",
            truncate_to_high_watermark=True),
    Variant("no-kip-279", "epoch lookup answers for the requested epoch only (KIP-101 without KIP-279)",
            epoch_lookup_without_kip279=True),
    Variant("unfenced-fetch", "fetches are not fenced by the current leader epoch (before KIP-320)",
            unfenced_fetch=True),
    Variant("isr-admission-below-epoch", "ISR admits followers below the leader's epoch start (KAFKA-7128)",
            isr_admission_below_epoch_start=True),
    Variant("unconditional-isr-write", "ISR writes to ZooKeeper without a version check",
            unconditional_isr_write=True),
    Variant("no-controller-epoch-check", "controller writes without the controller epoch check (KAFKA-6082)",
            controller_writes_without_epoch_check=True),
    Variant("unclean-election", "out-of-sync replicas may be elected leader",
            unclean_leader_election=True),
    Variant("acks-all-isr-of-one", "acks=all accepted with ISR = {leader} (Jepsen 2013)",
            acks_all_with_isr_of_one=True),
    Variant("no-kip-966", "a broker that recovered from an unclean shutdown stays in the ISR (before KIP-966)",
            unclean_recovery_keeps_isr=True),
    Variant("stale-isr-change-accepted",
            "the controller accepts an ISR change from a stale incarnation or leader epoch (KIP-343)",
            isr_change_without_leader_check=True),
)

VARIANTS: dict[str, Variant] = {v.name: v for v in _ALL}

SWITCHES: tuple[str, ...] = tuple(f.name for f in fields(Variant) if f.name not in ("name", "description"))


def get_variant(name: str) -> Variant:
    """Look a variant up by name; the error lists the valid names."""
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown variant {name!r}; choose one of: {', '.join(VARIANTS)}") from None
