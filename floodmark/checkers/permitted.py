"""Which losses the run's configuration permits, and where.

Kafka promises durability only for records acknowledged by every in-sync replica when at
least two replicas must be in sync and only in-sync replicas may lead. A run configured
outside that contract may lose records without the system breaking its promise. The
checkers still report such losses, and the run is still invalid, but each anomaly carries
``permitted_by`` with the reason, and statistics count contract violations and permitted
losses apart. What is permitted is read from what the run states, never from knowledge of
the implementation, and only as far as the permission reaches:

* ``min_insync_replicas`` of 1 or unclean leader election enabled: any loss, anywhere (a
  leader alone may have held what it acknowledged, or an out-of-sync replica may lead);
* ``acks`` below ``all``: the loss of what only an acknowledgement vouched for. A record a
  consumer read was below the HW, committed by the whole ISR whatever the producer asked
  for, so losing *that* is still a violation;
* a partition whose in-sync replicas all lost unsynced writes at once (a power loss of every
  one of them): what that power loss took. Kafka's contract cannot keep what no replica
  kept. The controller says so when it elects the furthest of them (KIP-966's balanced
  recovery: an unclean election made because every in-sync replica recovered from an
  unclean shutdown), and the history's fault ops say that a power loss took unsynced
  writes from a replica of that partition before the final reads; both must be there, and
  the permission covers that partition only. A recovery
  after crashes that lost nothing (SIGKILL leaves the page cache) permits nothing.

A run that states no configuration, such as a foreign Jepsen history, promised nothing
anyone can name: its losses are reported as permitted by that, never judged against an
assumed acks=all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from floodmark.contracts.history import DRAIN, FINAL_READ, NEMESIS, Op
from floodmark.contracts.node_events import (
    Appended,
    BecameFollower,
    BecameLeader,
    LeaderElected,
    NodeEvent,
    PartitionKey,
)
from floodmark.contracts.run_config import TestConfig

NO_CONFIGURATION = "no configuration (the run states no acks, so no durability promise can be assumed)"


def loss_permitted_by(config: TestConfig | None) -> str | None:
    """The reason the configuration permits losing acknowledged records, or None. With
    ``acks`` below all, what consumers read is still promised (see the module docstring)."""
    if config is None:
        return NO_CONFIGURATION
    if config.min_insync_replicas <= 1:
        return f"min_insync_replicas={config.min_insync_replicas} (an ISR of the leader alone may acknowledge)"
    if config.unclean_leader_election:
        return f"unclean leader election is enabled (variant {config.variant})"
    if not config.acks_all:
        return acks_reason(config)
    return None


def acks_reason(config: TestConfig) -> str:
    return f"acks={config.acks} (only acks=all promises durability)"


@dataclass(frozen=True)
class LossPermissions:
    """Every permission a run states, and which loss each reaches."""

    everywhere: str | None  # no configuration, min.insync.replicas of 1, unclean elections enabled
    acknowledged_only: str | None  # acks below all: losses of records no consumer read
    partitions: Mapping[PartitionKey, str]  # recoveries after a power loss took every replica's tail

    def reason(self, topic: str, partition: int, *, committed: bool) -> str | None:
        """Why a loss in this partition is permitted, or None. ``committed``: a consumer read
        what was lost (the whole ISR had it), so acks below all do not excuse it."""
        return (self.everywhere or (None if committed else self.acknowledged_only)
                or self.partitions.get((topic, partition)))

    def details(self, topic: str, partition: int, *, committed: bool) -> dict[str, Any]:
        """What a loss anomaly's details carry: ``permitted_by`` when it is permitted."""
        reason = self.reason(topic, partition, committed=committed)
        return {"permitted_by": reason} if reason else {}


def loss_permissions(config: TestConfig | None, history: list[Op],
                     events: Mapping[str, list[NodeEvent]]) -> LossPermissions:
    everywhere = loss_permitted_by(config)
    acknowledged_only = None
    if config is not None and not config.acks_all:
        everywhere = None if everywhere == acks_reason(config) else everywhere
        acknowledged_only = acks_reason(config)
    partitions = power_loss_recoveries(history, events) if everywhere is None else {}
    return LossPermissions(everywhere, acknowledged_only, partitions)


def power_loss_recoveries(history: list[Op], events: Mapping[str, list[NodeEvent]]) -> dict[PartitionKey, str]:
    """The partitions a controller recovered by electing the furthest of replicas that had
    all recovered from an unclean shutdown, where a power loss before the final reads took
    unsynced writes from a replica of that partition; each with the reason (the first such
    election of the partition, in node order)."""
    powered_off = _power_losses_before_drain(history)
    if not powered_off:
        return {}
    found: dict[PartitionKey, str] = {}
    held: dict[str, set[PartitionKey]] = {}  # node -> the partitions it holds a replica of
    for node in sorted(events):
        mine = held.setdefault(node, set())
        for event in events[node]:
            body = event.body
            if type(body) is Appended or type(body) is BecameFollower or type(body) is BecameLeader:
                mine.add((body.topic, body.partition))
            # Only an election that says it was a recovery permits: one that does not say
            # (an older event file, another writer) is an unclean election, never excused.
            elif type(body) is LeaderElected and body.unclean and body.recovery is True:
                found.setdefault((body.topic, body.partition), (
                    f"every in-sync replica of {body.topic}/{body.partition} lost unsynced writes: recovered "
                    f"by electing the furthest in epoch {body.leader_epoch} (event {event.node}#{event.seq})"))
    return {key: reason for key, reason in found.items()
            if any(key in held.get(node, ()) for node in powered_off)}


def _power_losses_before_drain(history: list[Op]) -> set[str]:
    """The nodes whose power loss, recorded by a fault op before the final reads began, took
    unsynced writes (data, or file-system changes such as a new segment), alone or as part
    of a group of faults."""
    nodes: set[str] = set()
    for op in history:
        if op.f in (DRAIN, FINAL_READ) and op.type == "invoke":
            break  # what the final reads read was lost before them, if at all
        if op.process == NEMESIS and op.type == "ok":
            _collect_power_losses(op.value, nodes, 0)
    return nodes


def _collect_power_losses(value: object, nodes: set[str], depth: int) -> None:
    if depth > 8:  # evidence is a few levels deep at most; a hostile history is not walked for ever
        return
    if isinstance(value, dict):
        node = value.get("node")
        if (value.get("mode") == "power-loss" and isinstance(node, str)
                and (_positive(value.get("lost_unsynced_bytes")) or _positive(value.get("lost_metadata_changes")))):
            nodes.add(node)
        for v in value.values():
            if isinstance(v, dict | list):
                _collect_power_losses(v, nodes, depth + 1)
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, dict | list):
                _collect_power_losses(v, nodes, depth + 1)


def _positive(value: object) -> bool:
    return type(value) is int and value > 0


def acks_all(config: TestConfig | None) -> bool:
    """Whether an acknowledgement stated that the whole ISR had the record (unknown: no)."""
    return config is not None and config.acks_all
