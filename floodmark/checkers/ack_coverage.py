"""Acknowledgement coverage: every acks=all acknowledgement was covered by min.insync replicas.

An ``acks=all`` acknowledgement promises that the record is on every member of the ISR, and
Kafka's durability contract holds only if that ISR had at least ``min.insync.replicas``
members when the leader acknowledged (Kafka checks it before appending and again before
answering: NOT_ENOUGH_REPLICAS_AFTER_APPEND). An acknowledgement from a leader whose ISR
was smaller is a broken promise even when no fault happened to turn it into lost data, so
it is checked on the white-box events, not left to the final drain.

Per broker, in the broker's own event order (never comparing clocks across brokers): the
leader's ISR of each partition is the one its ``became_leader`` announced, as later changed
by its ``isr_changed``; a restart forgets it. Each ``acked`` event with acks=-1 from a
partition the broker leads must find that ISR at least ``min_insync_replicas`` long
(``ack-below-min-insync``).
"""

from __future__ import annotations

from typing import Any

from floodmark.node_events import (
    Acked,
    BecameFollower,
    BecameLeader,
    IsrChanged,
    NodeEvent,
    PartitionKey,
    Started,
)
from floodmark.results import Anomaly
from floodmark.run_config import TestConfig

ACKS_ALL = -1
# Anomalies of one partition on one broker beyond this many are counted, not listed.
MAX_PER_PARTITION = 5


def acks_below_min_insync(events: dict[str, list[NodeEvent]], config: TestConfig | None,
                          details: dict[str, Any] | None = None) -> list[Anomaly]:
    """The acks=all acknowledgements a leader gave while its ISR was below min.insync.

    A run that states no configuration promised no min.insync, so nothing is checked.
    """
    if config is None or not config.acks_all:
        return []
    anomalies: list[Anomaly] = []
    for node in sorted(events):
        anomalies.extend(_node(node, events[node], config.min_insync_replicas, details or {}))
    return anomalies


def _node(node: str, events: list[NodeEvent], min_insync: int, details: dict[str, Any]) -> list[Anomaly]:
    isr: dict[PartitionKey, tuple[int, int, tuple[int, ...]]] = {}  # partition -> (epoch, seq, ISR)
    found: dict[PartitionKey, list[Anomaly]] = {}
    for event in events:
        body = event.body
        if isinstance(body, BecameLeader):
            isr[(body.topic, body.partition)] = (body.leader_epoch, event.seq, body.isr)
        elif isinstance(body, IsrChanged):
            key = (body.topic, body.partition)
            if key in isr:
                isr[key] = (body.leader_epoch, event.seq, body.isr)
        elif isinstance(body, BecameFollower):
            isr.pop((body.topic, body.partition), None)
        elif isinstance(body, Started):
            isr.clear()
        elif isinstance(body, Acked) and body.acks == ACKS_ALL:
            key = (body.topic, body.partition)
            known = isr.get(key)
            if known is None or len(known[2]) >= min_insync:
                continue
            epoch, since, members = known
            listed = found.setdefault(key, [])
            if len(listed) < MAX_PER_PARTITION:
                listed.append(Anomaly(
                    "ack-below-min-insync",
                    f"{node} acknowledged {body.topic}/{body.partition} up to offset {body.offset} with "
                    f"acks=all in epoch {epoch} while its ISR was {list(members)}, below "
                    f"min.insync.replicas={min_insync}",
                    topic=body.topic, partition=body.partition, offsets=(body.offset,),
                    events=((node, since), (node, event.seq)),
                    details={**details, "isr": list(members), "min_insync_replicas": min_insync},
                ))
            else:
                listed[-1].details["more"] = listed[-1].details.get("more", 0) + 1
    return [a for key in sorted(found) for a in found[key]]
