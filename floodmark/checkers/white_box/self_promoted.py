"""Self-promoted leaders: a broker acting as leader in a leader epoch it never became leader of.

A broker leads a partition in a leader epoch only after it took that leadership (the
controller's LeaderAndIsr, recorded by the broker as ``became_leader``). Acting as leader
(appending as leader, acknowledging a produce, advancing the HW as leader, changing the ISR)
in an epoch it did not take is a breach on its own, whoever else acted in that epoch: a
leader that stamps an epoch it was never given, or a restarted process that resumes a
leadership from before its restart without being told (both unfenced).

The evidence is the broker's own, so it does not depend on the controller's events (a
controller killed before it recorded its election leaves none): each node writes its
events in its own order, one whole line per event, and a broker records ``became_leader``
before it can act in that epoch. So, reading a node's events in order, within one process
(from a ``started`` to the next), an act in an epoch needs an earlier ``became_leader`` of
that partition and epoch. Only the tail of a file can be lost (a kill, a torn last line),
which never removes an earlier line. Lines missing from the middle or the head (a gap in the
node's numbering) may have held the ``became_leader``: acts after such a gap are not judged
until the next ``started``, and the gap itself makes the white-box verdicts unknown
(:mod:`floodmark.checkers.event_coverage`), never valid. An ``acked`` that states no epoch
(older writers) is not judged here: the epoch it acted in is not recorded.
"""

from __future__ import annotations

from collections.abc import Mapping

from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameLeader,
    HwChanged,
    IsrChanged,
    NodeEvent,
    PartitionKey,
    Started,
)
from floodmark.contracts.results import Anomaly

ANOMALY = "self-promoted-leader"


def acts_without_leadership(events: Mapping[str, list[NodeEvent]], whole_files: bool) -> list[Anomaly]:
    """Each broker process's first act as leader in a (partition, epoch) it recorded no
    ``became_leader`` for. ``whole_files``: ``events`` hold each node's whole file, so a gap
    in its numbering shows where lines are missing; False when they hold a part of each file
    (one partition's events and every ``started``), judged only if no file misses a line."""
    anomalies: list[Anomaly] = []
    for node in sorted(events):
        anomalies.extend(_node_acts(node, events[node], whole_files))
    return anomalies


def _node_acts(node: str, node_events: list[NodeEvent], whole_files: bool) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    led: set[tuple[PartitionKey, int]] = set()  # what this process became leader of
    flagged: set[tuple[PartitionKey, int]] = set()
    expected = 0
    complete = True  # no line of this process is missing before the event at hand
    for event in node_events:
        if whole_files and event.seq != expected:
            complete = False  # what the missing lines said (a became_leader?) is not known
        expected = event.seq + 1
        body = event.body
        act: tuple[PartitionKey, int] | None = None
        if type(body) is Appended:
            if body.role == "leader":
                act = ((body.topic, body.partition), body.epoch)
        elif type(body) is HwChanged:
            if body.role == "leader":
                act = ((body.topic, body.partition), body.leader_epoch)
        elif type(body) is Acked:
            if body.leader_epoch is not None:
                act = ((body.topic, body.partition), body.leader_epoch)
        elif type(body) is IsrChanged:  # only a partition's leader changes its ISR
            act = ((body.topic, body.partition), body.leader_epoch)
        elif type(body) is BecameLeader:
            led.add(((body.topic, body.partition), body.leader_epoch))
        elif type(body) is Started:  # a new process: it holds no leadership until it takes one
            led.clear()
            flagged.clear()
            complete = True
        if act is None or act in led or act in flagged or not complete:
            continue
        flagged.add(act)
        (topic, partition), epoch = act
        anomalies.append(Anomaly(
            ANOMALY,
            f"Broker {node} acted as leader of {topic}/{partition} in leader epoch {epoch} ({event.kind}, "
            f"seq {event.seq}) but never became its leader in that epoch (no became_leader before it "
            "since the process started).",
            topic, partition, events=((node, event.seq),),
            details={"node": node, "leader_epoch": epoch, "act": event.kind}))
    return anomalies
