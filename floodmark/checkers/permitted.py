"""Which losses the run's configuration permits.

Kafka promises durability only for records acknowledged by every in-sync replica when
at least two replicas must be in sync and only in-sync replicas may lead. A run configured
outside that contract (``acks`` below ``all``, ``min_insync_replicas`` of 1, or a variant
that enables unclean leader election) may lose acknowledged records without the system
breaking its promise. The checkers still report such losses, and the run is still invalid,
but each anomaly carries ``permitted_by`` with the reason, and statistics count contract
violations and permitted losses separately.
"""

from __future__ import annotations

from typing import Any

from floodmark.node_events import NodeEvent
from floodmark.reference.protocol.variants import LOSS_PERMITTING_VARIANTS


def loss_permitted_by(config: dict[str, Any], events: dict[str, list[NodeEvent]] | None = None) -> str | None:
    """The reason the configuration permits losing acknowledged records, or None."""
    acks = config.get("acks", "all")
    if str(acks).lower() not in ("all", "-1"):
        return f"acks={acks} (only acks=all promises durability)"
    min_insync = config.get("min_insync_replicas")
    if isinstance(min_insync, int) and min_insync <= 1:
        return f"min_insync_replicas={min_insync} (an ISR of the leader alone may acknowledge)"
    variant = config.get("variant")
    if variant in LOSS_PERMITTING_VARIANTS:
        return f"variant {variant} permits unclean leader election"
    event = _unclean_election(events or {})
    if event is not None:
        return (f"unclean leader election of {event.get('topic')}/{event.get('partition')} "
                f"in epoch {event.get('leader_epoch')} (event {event.node}#{event.seq})")
    return None


_scanned: list[tuple[dict[str, list[NodeEvent]], NodeEvent | None]] = []


def _unclean_election(events: dict[str, list[NodeEvent]]) -> NodeEvent | None:
    """The first unclean election the controller recorded (remembered for the last events seen,
    since several checkers ask about the same run)."""
    if _scanned and _scanned[0][0] is events:
        return _scanned[0][1]
    found = next((e for node in sorted(events) for e in events[node]
                  if e.kind == "leader_elected" and e.fields.get("unclean")), None)
    _scanned[:] = [(events, found)]
    return found


def acks_all(config: dict[str, Any]) -> bool:
    return str(config.get("acks", "all")).lower() in ("all", "-1")
