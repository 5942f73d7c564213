"""Event coverage: whether a run's node events speak for every broker the run had.

The white-box checkers (hw, leader, invariants) judge what the brokers say they did. A
broker whose events are missing (its file lost, its collection failed, a run directory
trimmed by hand) says nothing, and a check that finds nothing wrong in what it read has not
judged what it did not read: its verdict is unknown, never valid. Violations found in the
events that are there still make the run invalid.

The run's configuration says how many brokers it had, and every broker writes a ``started``
event when its process starts, so a broker that ran has a file with at least that line. A run
that states no configuration cannot say how many brokers it had: its events are judged as
they are, but no events at all judge nothing.
"""

from __future__ import annotations

from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.results import Anomaly, Validity


def uncovered(run: CheckInput) -> str | None:
    """Why the run's node events do not cover its brokers, or None if they do."""
    speaking = sorted(node for node, events in run.events.items() if events)
    if run.config is None:
        return None if speaking else "no node events to judge"
    expected = run.config.nodes
    if len(speaking) >= expected:
        return None
    heard = ", ".join(speaking) if speaking else "none"
    return (f"node events of {len(speaking)} of the {expected} brokers the configuration states "
            f"(events from: {heard})")


def verdict(anomalies: list[Anomaly], run: CheckInput, stats: dict[str, Any]) -> Validity:
    """Invalid if anything is wrong; else valid, or unknown (why, in ``stats``) when the
    events do not cover every broker of the run."""
    if anomalies:
        return False
    missing = uncovered(run)
    if missing is None:
        return True
    stats["unjudged_because"] = missing
    return "unknown"
