"""A broker acting as leader in an epoch it never became leader of (``self-promoted-leader``).

Before this check the leader checker passed such a broker when no other broker acted in the
epoch and the controller's election of it was not recorded (a controller killed before its
events reached the file): ``_acting_not_elected`` needs the election. The broker's own
``became_leader`` is always there before it acts (one line per event, in its order, only a
file's tail can be lost), so its absence is the evidence. Built from a real simulated run's
events, edited to show the breach.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from checkers_fixtures import events
from runner_fixtures import valid_sim_run

from floodmark.checkers.api import CheckInput
from floodmark.checkers.white_box.leader import LeaderChecker
from floodmark.contracts.history import read_history
from floodmark.contracts.node_events import (
    Appended,
    BecameLeader,
    LeaderElected,
    NodeEvent,
    PartitionKey,
    Started,
    read_events_dir,
)
from floodmark.contracts.run_config import read_test_config


def _valid_run() -> Path:
    return valid_sim_run(seed=3, time_limit=10)


def _run_input(node_events: dict[str, list[NodeEvent]], whole_file_gap: str | None = None) -> CheckInput:
    path = _valid_run()
    return CheckInput(read_history(path / "history.jsonl"), node_events, read_test_config(path / "test.yaml"),
                      whole_file_gap=whole_file_gap)


def _leadership_acted_in(node_events: dict[str, list[NodeEvent]]) -> tuple[str, PartitionKey, int]:
    """A (node, partition, epoch) the node became leader of and appended in as leader."""
    for node in sorted(node_events):
        led = {(e.body.topic, e.body.partition, e.body.leader_epoch)
               for e in node_events[node] if type(e.body) is BecameLeader}
        for e in node_events[node]:
            body = e.body
            if type(body) is Appended and body.role == "leader" and (body.topic, body.partition, body.epoch) in led:
                return node, (body.topic, body.partition), body.epoch
    raise AssertionError("the run has no leader that appended")


def _without(node_events: list[NodeEvent], drop: Callable[[NodeEvent], bool]) -> list[NodeEvent]:
    """The node's events without those ``drop`` matches, numbered again from 0: a file the
    node wrote so, not one with lines lost from it."""
    kept = [e for e in node_events if not drop(e)]
    return [dataclasses.replace(e, seq=i) for i, e in enumerate(kept)]


def _breach() -> tuple[dict[str, list[NodeEvent]], str, PartitionKey, int]:
    """The run's events with one leader's ``became_leader`` of an epoch it acted in left out,
    and every controller's election of that epoch too (a controller killed before it wrote it)."""
    node_events = read_events_dir(_valid_run() / "events")
    node, key, epoch = _leadership_acted_in(node_events)

    def same(e: NodeEvent, kind: type) -> bool:
        b = e.body
        return type(b) is kind and (b.topic, b.partition, b.leader_epoch) == (*key, epoch)  # type: ignore[attr-defined]

    edited = {n: _without(evs, lambda e: same(e, LeaderElected) or (e.node == node and same(e, BecameLeader)))
              for n, evs in node_events.items()}
    return edited, node, key, epoch


def test_the_unedited_run_is_valid() -> None:
    result = LeaderChecker().check(_run_input(read_events_dir(_valid_run() / "events")))
    assert result.valid is True, result.anomalies


def test_acting_in_an_epoch_it_never_became_leader_of_is_invalid() -> None:
    edited, node, key, epoch = _breach()
    result = LeaderChecker().check(_run_input(edited))
    assert result.valid is False
    [anomaly] = [a for a in result.anomalies if a.type == "self-promoted-leader"]
    assert (anomaly.topic, anomaly.partition, anomaly.details["leader_epoch"]) == (*key, epoch)
    assert anomaly.details["node"] == node and anomaly.events[0][0] == node
    # Nothing else says so: no other broker acted in the epoch, no election was recorded.
    assert {a.type for a in result.anomalies} == {"self-promoted-leader"}
    # Spark's by-partition groups are judged alike when no file misses a line.
    assert LeaderChecker().check(_run_input(edited, whole_file_gap="")).valid is False


def test_lines_missing_before_the_act_make_it_unknown_not_invalid() -> None:
    """The became_leader lost from the middle of a file (a gap in its numbering) may have
    been there: not judged, and the gap makes the verdict unknown, saying why."""
    node_events = read_events_dir(_valid_run() / "events")
    node, key, epoch = _leadership_acted_in(node_events)
    lost = {n: [e for e in evs if not (n == node and type(e.body) is BecameLeader
                                       and (e.body.topic, e.body.partition, e.body.leader_epoch) == (*key, epoch))]
            for n, evs in node_events.items()}
    result = LeaderChecker().check(_run_input(lost))
    assert result.valid == "unknown", result.anomalies
    assert "line(s) missing" in str(result.stats["unjudged_because"])
    gap = "the events of n1 go from seq 3 to 5: 1 line(s) missing from its file"
    assert LeaderChecker().check(_run_input(_breach()[0], whole_file_gap=gap)).valid == "unknown"


def _leader(epoch: int) -> BecameLeader:
    return BecameLeader(topic="t0", partition=0, leader_epoch=epoch, isr=(1,), log_end=0, high_watermark=0)


def _append(epoch: int) -> Appended:
    return Appended(topic="t0", partition=0, offset=0, epoch=epoch, values=("a",), role="leader")


def test_a_restarted_process_leads_only_what_it_became_leader_of_again() -> None:
    resumed = events("n1", Started(broker=1), _leader(2), _append(2), Started(broker=1), _append(2))
    [anomaly] = LeaderChecker().check(CheckInput([], {"n1": resumed})).anomalies
    assert anomaly.type == "self-promoted-leader" and anomaly.events == (("n1", 4),)
    told_again = events("n1", Started(broker=1), _leader(2), _append(2), Started(broker=1), _leader(2), _append(2))
    assert LeaderChecker().check(CheckInput([], {"n1": told_again})).valid is True


def test_lines_missing_before_a_restart_leave_the_next_process_judged() -> None:
    """A gap in the previous process's lines hides what that process became leader of, not
    what the next one did: a process holds no leadership until it takes one, so its act in an
    epoch it never became leader of is a breach whatever lines are missing before its start
    (the verdict is invalid, not the gap's unknown)."""
    written = events("n1", Started(broker=1), _leader(2), _append(2), Started(broker=1), _append(2))
    lost = [written[0], *written[2:]]  # the first process's became_leader is missing (seq 1)
    result = LeaderChecker().check(CheckInput([], {"n1": lost}))
    assert result.valid is False
    [anomaly] = result.anomalies
    assert anomaly.type == "self-promoted-leader" and anomaly.events == (("n1", 4),)


def test_each_process_that_acts_without_leadership_is_a_finding() -> None:
    """The same unled epoch acted in by two processes in turn is two breaches, one each."""
    twice = events("n1", Started(broker=1), _append(2), Started(broker=1), _append(2))
    found = LeaderChecker().check(CheckInput([], {"n1": twice})).anomalies
    assert [(a.type, a.events) for a in found] == [("self-promoted-leader", (("n1", 1),)),
                                                    ("self-promoted-leader", (("n1", 3),))]
