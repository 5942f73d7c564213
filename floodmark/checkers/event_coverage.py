"""Event coverage: whether a run's node events speak for every broker the run had.

The white-box checkers (hw, leader, invariants) judge what the brokers say they did. A
broker whose events are missing (its file lost, its collection failed, a run directory
trimmed by hand) says nothing, and a check that finds nothing wrong in what it read has not
judged what it did not read: its verdict is unknown, never valid. Violations found in the
events that are there still make the run invalid.

Files are not brokers. Each broker names its id in its ``started`` event, so coverage is
counted in brokers: the events must hold as many distinct brokers as the configuration
states, no two files may claim to be the same broker, and every broker the events
themselves name (in an ISR, as a leader, as the controller) must have a file that says it
is that broker. A stray file therefore cannot stand in for a missing one: once any file
names its broker, a file that names none is no broker's. Only when no file names one (files
written before brokers named themselves) is each counted as one broker, as well as that can
be done. A run that states no configuration cannot say how many brokers it had: its events
are judged as they are, but no events at all judge nothing.

Nor may they speak for more brokers than the configuration states: a test.yaml that says
2 nodes beside the events of 3 is not the run's own, and its settings judge nothing.

And every event must be read whole: one of a kind this version does not know, or with
fields its kind does not declare (a newer writer's, or a field renamed or damaged), is kept
by the reader but judged by no checker, so a violation written that way would pass
unseen. The run's events are then not all judged: unknown, never valid.

A file is also read whole or not at all: each node numbers its events 0, 1, 2, ... (a
restarted process goes on from where its file ends), so a number missing between two that
are there means lines were lost from the middle of the file, and what they said was not
read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from floodmark.contracts.node_events import (
    BecameFollower,
    BecameLeader,
    ControllerElected,
    IsrChanged,
    IsrWritten,
    LeaderElected,
    NodeEvent,
    Started,
    UnknownKind,
)
from floodmark.contracts.results import Anomaly, Validity
from floodmark.contracts.run_config import TestConfig


def stated_brokers(events: Mapping[str, list[NodeEvent]]) -> dict[str, int | None]:
    """Each file's broker, as its ``started`` events state it (None: they do not)."""
    stated: dict[str, int | None] = {}
    for node, node_events in events.items():
        if node_events:
            stated[node] = next((e.body.broker for e in reversed(node_events)
                                 if type(e.body) is Started and e.body.broker is not None), None)
    return stated


def claimed_twice(stated: Mapping[str, int | None]) -> dict[int, list[str]]:
    """Broker ids that more than one file claims, with the files."""
    files: dict[int, list[str]] = {}
    for node, broker in sorted(stated.items()):
        if broker is not None:
            files.setdefault(broker, []).append(node)
    return {broker: nodes for broker, nodes in files.items() if len(nodes) > 1}


def uncovered(events: Mapping[str, list[NodeEvent]], config: TestConfig | None,
              whole_file_gap: str | None = None) -> str | None:
    """Why a run's node events do not cover its brokers, or None if they do (worked out once
    per run: see ``CheckInput.coverage_problem``). ``whole_file_gap``: for events that are a
    part of each file, the lines found missing from the whole files ("" for none)."""
    stated = stated_brokers(events)
    if not stated:
        return "no node events to judge"
    twice = claimed_twice(stated)
    if twice:
        broker, nodes = next(iter(sorted(twice.items())))
        return f"the events of {' and '.join(nodes)} {'both' if len(nodes) == 2 else 'all'} say they are broker {broker}"
    gap = first_gap(events) if whole_file_gap is None else whole_file_gap
    if gap:
        return gap
    unread = unread_events(events)
    if unread:
        return unread
    known = {broker for broker in stated.values() if broker is not None}
    more = _more_than_configured(stated, known, config)
    if more:
        return more
    if not known:  # older files name no broker: one broker each, and none can be matched to a name
        if config is not None and len(stated) < config.nodes:
            return (f"node events of {len(stated)} of the {config.nodes} brokers the configuration states "
                    f"(events from: {', '.join(sorted(stated))})")
        return None
    if config is not None and len(known) < config.nodes:
        nameless = sorted(node for node, broker in stated.items() if broker is None)
        return (f"node events of {len(known)} of the {config.nodes} brokers the configuration states "
                f"(brokers {', '.join(map(str, sorted(known)))}"
                + (f"; {', '.join(nameless)} name{'s' if len(nameless) == 1 else ''} no broker)" if nameless else ")"))
    unheard = sorted(_named_brokers(events) - known)
    if unheard:
        return f"broker{'s' if len(unheard) > 1 else ''} {', '.join(map(str, unheard))} named in the events, " \
               f"but no events file says it is {'them' if len(unheard) > 1 else 'it'}"
    return None


def unread_events(events: Mapping[str, list[NodeEvent]]) -> str | None:
    """Why some events were not read whole (see the module docstring), or None."""
    count, first = 0, None
    for _, node_events in sorted(events.items()):
        for event in node_events:
            if type(event.body) is UnknownKind or event.extra:
                count += 1
                first = first or event
    if first is None:
        return None
    what = (f"of kind {first.kind!r}, which this version does not know" if type(first.body) is UnknownKind else
            f"{first.kind} with {', '.join(repr(name) for name, _ in first.extra)}, which its kind does not declare")
    return (f"{count} node event{'s' if count != 1 else ''} not read whole (the first: {first.node} seq "
            f"{first.seq}, {what}): what {'they say' if count != 1 else 'it says'} was not judged")


def _more_than_configured(stated: Mapping[str, int | None], known: set[int], config: TestConfig | None) -> str | None:
    """Why the events speak for more brokers than the configuration states, or None: a
    test.yaml that is not the run's (or events of another run added): what the events say
    is judged against settings that are not the ones they ran under."""
    if config is None:
        return None
    count, what = (len(known), f"brokers {', '.join(map(str, sorted(known)))}") if known else \
        (len(stated), f"events from {', '.join(sorted(stated))}")
    if count <= config.nodes:
        return None
    return (f"node events of {count} brokers ({what}), but the configuration states {config.nodes}: "
            "its settings are not the ones these events ran under")


def first_gap(events: Mapping[str, list[NodeEvent]]) -> str | None:
    """The first file (in node order) whose events skip a number, said as where, or None.
    ``events`` holds each node's events in number order, as the reader gives them."""
    for node in sorted(events):
        for expected, event in enumerate(events[node]):
            if event.seq != expected:
                where = f"go from seq {expected - 1} to {event.seq}" if expected else f"begin at seq {event.seq}"
                return f"the events of {node} {where}: {event.seq - expected} line(s) missing from its file"
    return None


def nodes_missing_lines(events: Mapping[str, list[NodeEvent]], whole_file_gap: str | None) -> frozenset[str]:
    """The nodes whose events miss lines, so that their story proves nothing by what it
    lacks: a gap in a node's numbering, where ``events`` hold whole files
    (``whole_file_gap`` None); every node where they hold parts of files and some file
    misses a line (``whole_file_gap`` says which, in words only)."""
    if whole_file_gap is not None:
        return frozenset(events) if whole_file_gap else frozenset()
    return frozenset(node for node, node_events in events.items()
                     if any(event.seq != expected for expected, event in enumerate(node_events)))


def _named_brokers(events: Mapping[str, list[NodeEvent]]) -> set[int]:
    """Every broker id the events name: in ISRs, as leaders, as controllers."""
    named: set[int] = set()
    for node_events in events.values():
        for event in node_events:
            body = event.body
            if type(body) is BecameLeader or type(body) is IsrChanged:
                named.update(body.isr)
            elif type(body) is BecameFollower:
                named.add(body.leader)
            elif type(body) is LeaderElected:
                named.update(body.isr)
                named.add(body.leader)
            elif type(body) is ControllerElected:
                named.add(body.broker)
            elif type(body) is IsrWritten:
                named.update(body.isr)
                named.update((body.leader, body.requester))
    return {broker for broker in named if broker >= 0}  # (-1: no leader)


def verdict(anomalies: list[Anomaly], missing: str | None, stats: dict[str, Any]) -> Validity:
    """Invalid if anything is wrong; else valid, or unknown (why, in ``stats``) when the
    events do not cover every broker of the run (``missing`` says how)."""
    if anomalies:
        return False
    if missing is None:
        return True
    stats["unjudged_because"] = missing
    return "unknown"


def exposed_beyond_recorded(where: str, top: int, recorded: str, partitions: int, judged_by: str) -> str:
    """Why a check that read the events is unknown when clients saw more committed than the
    events record (their writer left events out, or the file was cut): ``where`` is the
    first such partition, ``recorded`` what its events record, ``partitions`` how many are so."""
    more = f" (and {partitions - 1} more partition(s) so)" if partitions > 1 else ""
    return f"clients saw {where} committed up to HW {top}, but {recorded}{more}: {judged_by} are not all there"
