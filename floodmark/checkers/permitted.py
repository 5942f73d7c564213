"""Which losses the run's configuration permits.

Kafka promises durability only for records acknowledged by every in-sync replica when
at least two replicas must be in sync and only in-sync replicas may lead. A run configured
outside that contract (``acks`` below ``all``, ``min_insync_replicas`` of 1, or unclean
leader election enabled) may lose acknowledged records without the system breaking its
promise. The checkers still report such losses, and the run is still invalid, but each
anomaly carries ``permitted_by`` with the reason, and statistics count contract violations
and permitted losses separately.

All of it is read from what the run states: its configuration (the effective settings the
harness recorded) and its node events (a controller that elected an out-of-sync leader says
so). A run that states no configuration, such as a foreign Jepsen history, promised nothing
anyone can name: its losses are reported as permitted by that, never judged against an
assumed acks=all.
"""

from __future__ import annotations

from floodmark.node_events import LeaderElected, NodeEvent
from floodmark.run_config import TestConfig

NO_CONFIGURATION = "no configuration (the run states no acks, so no durability promise can be assumed)"


def loss_permitted_by(config: TestConfig | None, events: dict[str, list[NodeEvent]] | None = None) -> str | None:
    """The reason the configuration permits losing acknowledged records, or None."""
    if config is None:
        return NO_CONFIGURATION
    if not config.acks_all:
        return f"acks={config.acks} (only acks=all promises durability)"
    if config.min_insync_replicas <= 1:
        return f"min_insync_replicas={config.min_insync_replicas} (an ISR of the leader alone may acknowledge)"
    if config.unclean_leader_election:
        return f"unclean leader election is enabled (variant {config.variant})"
    election = first_unclean_election(events or {})
    if election is not None:
        event, body = election
        return (f"unclean leader election of {body.topic}/{body.partition} "
                f"in epoch {body.leader_epoch} (event {event.node}#{event.seq})")
    return None


def first_unclean_election(events: dict[str, list[NodeEvent]]) -> tuple[NodeEvent, LeaderElected] | None:
    """The first unclean election a controller recorded, in node order."""
    return next(((e, e.body) for node in sorted(events) for e in events[node]
                 if isinstance(e.body, LeaderElected) and e.body.unclean), None)


def acks_all(config: TestConfig | None) -> bool:
    """Whether an acknowledgement stated that the whole ISR had the record (unknown: no)."""
    return config is not None and config.acks_all
