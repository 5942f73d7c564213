"""Where a member's story ends: a file cut at a line's end leaves no trace in that file.

``isr-member-lacks-committed`` proves its case by what a member's events lack: the leader
counted the member toward a commit, and the member never appended the record. A node event
file that lost whole lines at its end (a copy that stopped at a line, lines removed by
hand) has no line cut short and no gap in its numbers, so nothing in that file says it is
cut; yet the appends the leader counted are exactly what such a cut removes, and a valid run
read INVALID (a run's ``n1.jsonl`` with its last 20 lines removed: 5 findings, none true).

The digest saved with every run settles it: files that match it are the run's own, and
every finding stands. Without one, the evidence is in the member's own events. A follower's
HW is never past its own log end, so a member that held offset *o* and learned of its
commit says so with an ``hw_changed`` past *o*: its last words about the partition
(:func:`last_high_watermarks`). When those words never reach past the offsets it is said to
lack, its story ends before it had to hold them, and a cut there is indistinguishable from a
flaw: the finding is no proof (unknown, saying why). A member whose own HW went past a record
it never held contradicts itself however its file ends: that finding stands.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from floodmark.contracts.node_events import HwChanged, NodeEvent, PartitionKey
from floodmark.contracts.results import Anomaly

LACKS = "isr-member-lacks-committed"


def set_aside_unproven(anomalies: list[Anomaly], cut_short: frozenset[str],
                       unrecorded: Mapping[str, list[NodeEvent]] | None = None,
                       ) -> tuple[list[Anomaly], dict[str, int]]:
    """The anomalies that prove something, and how many were left out for each node whose
    event file ends in a line cut short: that a member "never held" a record is proof only
    if its story is whole, and such a file may have lost what the node did after the cut.
    ``unrecorded``: the events, when no digest says the files are the run's own; then so is
    a finding whose member's story ends before the records (:func:`ends_before`)."""
    if not cut_short and unrecorded is None:
        return anomalies, {}
    early = ends_before(anomalies, unrecorded) if unrecorded is not None else set()
    proven: list[Anomaly] = []
    unproven: dict[str, int] = {}
    for position, anomaly in enumerate(anomalies):
        member = anomaly.details.get("member") if anomaly.type == LACKS else None
        if isinstance(member, str) and (member in cut_short or position in early):
            unproven[member] = unproven.get(member, 0) + 1
        else:
            proven.append(anomaly)
    return proven, dict(sorted(unproven.items()))


def unproven_reason(unproven: dict[str, int]) -> str:
    counted = ", ".join(f"{count} about {node}" for node, count in unproven.items())
    return (f"isr-member-lacks-committed findings ({counted}) are no proof: the event file of each member "
            "named was cut short, or its story ends before those records (no digest.json says the file is "
            "whole), so what it appended after its last line may be missing from its story")


def last_high_watermarks(events: list[NodeEvent]) -> dict[PartitionKey, int]:
    """The highest HW each partition reaches in a node's events (the last one it states
    need not be: a restart starts from a lower one)."""
    highest: dict[PartitionKey, int] = {}
    for event in events:
        body = event.body
        if type(body) is HwChanged:
            key = (body.topic, body.partition)
            if body.high_watermark > highest.get(key, -1):
                highest[key] = body.high_watermark
    return highest


def ends_before(anomalies: Collection[Anomaly], events: Mapping[str, list[NodeEvent]]) -> set[int]:
    """The positions in ``anomalies`` of the findings that a member lacks records whose
    member's own events never state an HW past the lowest of them: its story may end (its
    file cut at a line's end) before it had to hold them."""
    found: set[int] = set()
    highest: dict[str, dict[PartitionKey, int]] = {}
    for position, anomaly in enumerate(anomalies):
        member = anomaly.details.get("member") if anomaly.type == LACKS else None
        if not isinstance(member, str) or member not in events or not anomaly.offsets or anomaly.topic is None \
                or anomaly.partition is None:
            continue
        if member not in highest:
            highest[member] = last_high_watermarks(events[member])
        if highest[member].get((anomaly.topic, anomaly.partition), -1) <= min(anomaly.offsets):
            found.add(position)
    return found
