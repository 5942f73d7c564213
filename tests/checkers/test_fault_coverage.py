"""Fault coverage: planned, applied, and took effect, read from the evidence in the history."""

from __future__ import annotations

from typing import Any

from floodmark.checkers.fault_coverage import fault_coverage, summary_line, verdict_lines
from floodmark.contracts.history import NEMESIS, Op


def nemesis(*steps: tuple[str, str, Any]) -> list[Op]:
    """Ops of the nemesis: (f, type, value) each, invoked then completed, one second apart."""
    ops: list[Op] = []
    for second, (f, outcome, value) in enumerate(steps):
        ops.append(Op(len(ops), second * 10**9, "invoke", NEMESIS, f, None))
        ops.append(Op(len(ops), second * 10**9 + 1, outcome, NEMESIS, f, value))  # type: ignore[arg-type]
    return ops


def test_faults_that_demonstrably_took_effect_are_counted() -> None:
    coverage = fault_coverage(nemesis(
        ("start-partition", "ok", {"shape": "halves", "links_down": 8, "links": 8}),
        ("start-kill", "ok", {"shape": "leader", "pid": 7, "running": False}),
        ("stop-partition", "ok", {"links_up": 8, "links": 8}),
        ("start-pause", "ok", {"shape": "leader-long", "stopped": True, "longer_than_session": True,
                               "session_timeout": 6.0}),
        ("stop-pause", "ok", {"resumed": {"node": "n1", "paused_for": 12.0, "session_expired": True}}),
        ("start-message", "ok", {"shape": "drop-fetch-response", "rule": "in force"}),
        ("stop-message", "ok", {"rule": {"action": "drop", "matched": 40, "dropped": 20}}),
        ("heal-all", "ok", {}),
    ))
    assert {k: (c.planned, c.applied, c.took_effect, c.missed) for k, c in coverage.items()} == {
        "kill": (1, 1, 1, []), "message": (1, 1, 1, []), "partition": (1, 1, 1, []), "pause": (1, 1, 1, [])}
    assert summary_line(coverage) == "faults that took effect: kill 1/1, message 1/1, partition 1/1, pause 1/1"


def test_faults_that_did_nothing_are_named_with_why() -> None:
    coverage = fault_coverage(nemesis(
        ("start-message", "ok", {"shape": "reorder-epoch-response", "rule": "in force"}),
        ("stop-message", "ok", {"rule": {"action": "reorder", "matched": 0}}),
        ("start-pause", "ok", {"shape": "controller-long", "stopped": True, "longer_than_session": True,
                               "session_timeout": 6.0}),
        ("stop-pause", "ok", {"resumed": {"node": "n1", "paused_for": 5.4}}),
        ("start-kill", "ok", {"shape": "leader", "skipped": "n2 is not running"}),
        ("start-disk", "fail", "the node refused"),
        ("start-clock", "ok", {"shape": "strobe"}),
        ("start-partition", "ok", {"shape": "halves", "rules": {"n1": ["-s", "x"]},
                                   "probe": {"cut": {"from": "n2", "to": "n1", "result": "open"}, "verified": False}}),
    ))
    missed = {kind: c.missed for kind, c in coverage.items()}
    assert missed == {
        "clock": ["strobe at 6.0 s: no clock was moved"],
        "disk": ["start-disk at 5.0 s: not applied (fail)"],
        "kill": ["leader at 4.0 s: skipped (n2 is not running)"],
        "message": ["reorder-epoch-response at 0.0 s: no message matched its rule"],
        "pause": ["controller-long at 2.0 s: a long pause lasted 5.4 s, not past the session timeout"],
        "partition": ["halves at 7.0 s: the probe saw cut open, kept not probed"],
    }
    assert coverage["disk"].applied == 0 and coverage["kill"].applied == 1
    assert summary_line(coverage).endswith("(6 did not)")


def test_a_long_pause_must_show_the_session_expired() -> None:
    def long_pause(resumed: dict[str, object]) -> list[str]:
        return fault_coverage(nemesis(
            ("start-pause", "ok", {"shape": "leader-long", "stopped": True, "longer_than_session": True,
                                   "session_timeout": 6.0}),
            ("stop-pause", "ok", {"resumed": {"node": "n1", "paused_for": 12.0, **resumed}}),
        ))["pause"].missed

    assert long_pause({"session_expired": True}) == []
    assert long_pause({"session_expired": False}) == [
        "leader-long at 0.0 s: a long pause ended with the broker still registered: its session did not expire"]
    assert long_pause({}) == [
        "leader-long at 0.0 s: a long pause's session expiry was not confirmed (ZooKeeper did not answer)"]
    assert summary_line({}) == "no faults were planned"


def test_a_real_clock_fault_took_effect_only_when_the_brokers_events_showed_it() -> None:
    def real_clock(start: dict[str, object], stop: dict[str, object] | None) -> list[str]:
        steps: list[tuple[str, str, Any]] = [("start-clock", "ok", {"shape": "bump-forward", **start})]
        if stop is not None:
            steps.append(("stop-clock", "ok", stop))
        return fault_coverage(nemesis(*steps))["clock"].missed

    written = {"written": {"n1": "+40.000 x1"}}
    shown = {"n1": {"expected": 40.0, "verified": True, "events": 3, "skew_between": [39.9, 40.1]}}
    not_shown = {"n1": {"expected": 40.0, "verified": False, "events": 12, "skew_between": [-0.1, 0.05]}}
    assert real_clock(written, {"reset": {}, "clock_seen": shown}) == []
    assert real_clock(written, {"reset": {}, "clock_seen": not_shown}) == [
        "bump-forward at 0.0 s: no event showed the moved clock "
        "(n1: expected 40.0 s, 12 events, last skew [-0.1, 0.05])"]
    assert real_clock(written, None) == [
        "bump-forward at 0.0 s: no event was watched for the moved clock (healed with the run's end)"]
    # A real strobe is judged the same way; the simulator's clocks are exact and need no watch.
    assert real_clock({"strobing": ["n1"], "via": "libfaketime"}, {"reset": {}, "clock_seen": shown}) == []
    assert real_clock({"strobing": ["n1"], "via": "libfaketime"}, {"reset": {}}) != []
    assert real_clock({"skew": {"n1": 40.0}}, None) == []


def test_overlapping_faults_of_one_kind_are_told_apart_by_their_numbers() -> None:
    # A hand-written schedule may run two message rules at once: each stop is its own fault's.
    ops: list[Op] = []
    for f, number, value in (
            ("start-message", 0, {"shape": "drop-fetch-request", "rule": "in force"}),
            ("start-message", 1, {"shape": "drop-fetch-response", "rule": "in force"}),
            ("stop-message", 1, {"rule": {"action": "drop", "matched": 0}}),
            ("stop-message", 0, {"rule": {"action": "drop", "matched": 6, "dropped": 6}})):
        ops.append(Op(len(ops), len(ops) * 10**9, "invoke", NEMESIS, f, {"fault": number}))
        ops.append(Op(len(ops), len(ops) * 10**9, "ok", NEMESIS, f, value))
    coverage = fault_coverage(ops)["message"]
    assert (coverage.planned, coverage.applied, coverage.took_effect) == (2, 2, 1)
    assert coverage.missed == ["drop-fetch-response at 3.0 s: no message matched its rule"]


def test_a_failover_step_took_effect_as_the_kind_it_acted_as() -> None:
    coverage = fault_coverage(nemesis(
        ("start-failover", "ok", {"shape": "kill-leader", "acts_as": "kill", "running": False}),
        ("start-failover", "ok", {"shape": "lag-third", "acts_as": "message", "rule": "in force"}),
        ("stop-failover", "ok", {"rule": {"action": "drop", "matched": 0}}),
        ("start-failover", "ok", {"shape": "expire-leader", "running": False}),  # its kind not recorded
    ))
    failover = coverage["failover"]
    assert (failover.planned, failover.applied, failover.took_effect) == (3, 3, 1)
    assert any("no message matched" in why for why in failover.missed)
    assert any("kind was not recorded" in why for why in failover.missed)


def test_beside_the_verdict_a_few_faults_that_did_nothing_are_named_and_the_rest_counted() -> None:
    ops = []
    for fault in range(40):
        ops += [Op(len(ops), fault, "invoke", "nemesis", "start-kill", {"fault": fault, "shape": "leader"}),
                Op(len(ops) + 1, fault, "ok", "nemesis", "start-kill", {"shape": "leader", "skipped": "n2 is not running"})]
    lines = verdict_lines(fault_coverage(ops), shown=3)
    assert lines[0] == "faults that took effect: kill 0/40 (40 did not)"
    assert lines[1:] == ["  kill did not take effect: leader at 0.0 s: skipped (n2 is not running)"] * 3 + [
        "  ... and 37 more kill faults that did not take effect (the report names each)"]
