"""Which side of schedule.json changed (its plan or its record), as the history decides it:
the pure rules of :mod:`floodmark.run.schedule_sides`, on faults written out by hand."""

from __future__ import annotations

from floodmark.run.schedule_sides import changed_sides, plan_departures

# Fault 0 as the history's start invocation says it ran: its kind and shape (no start time).
STARTS = {0: {"kind": "partition", "shape": "halves", "duration": 5.0}}
RAN = {"kind": "partition", "shape": "halves", "duration": 5.0, "start": 3.0}


def test_a_record_changed_only_in_keys_the_history_holds_is_a_changed_record() -> None:
    record = {**RAN, "shape": "ring"}
    assert changed_sides(STARTS, {0: (RAN, record)}) == {0: "record"}


def test_a_disagreement_the_history_cannot_decide_is_not_guessed() -> None:
    # Plan and record also disagree on the start, which no history records: the plan's start
    # may be the edit as well as the record's, so which side changed is not known.
    record = {**RAN, "shape": "ring", "start": 4.0}
    assert changed_sides(STARTS, {0: (RAN, record)}) == {0: None}
    assert changed_sides(None, {0: (RAN, {**RAN, "shape": "ring"})}) == {0: None}  # no digest vouches


def test_a_plan_the_history_did_not_start_is_an_edited_plan() -> None:
    assert changed_sides(STARTS, {0: ({**RAN, "shape": "ring"}, RAN)}) == {0: "plan"}


def test_a_started_fault_only_the_record_still_holds_is_told_once() -> None:
    # Taken out of the plan: changed_sides says so ("plan"); plan_departures names only what
    # neither plan nor record holds any more, so the fault is not told twice.
    assert changed_sides(STARTS, {0: (None, RAN)}) == {0: "plan"}
    assert plan_departures(STARTS, {}, recorded=[0]) == []
    assert plan_departures(STARTS, {}, recorded=[]) == [0]
    assert plan_departures(STARTS, {0: {**RAN, "duration": 9.0}}, recorded=[0]) == [0]
    assert plan_departures(None, {0: {**RAN, "duration": 9.0}}, recorded=[0]) == []
