"""Fault intervals from nemesis ops."""

from __future__ import annotations

from floodmark.contracts.history import Op
from floodmark.reports.faults import (
    FAULT_COLOURS,
    OTHER_FAULT_COLOUR,
    FaultInterval,
    bands,
    fault_intervals,
)


def nemesis(index: int, seconds: float, type: str, f: str) -> Op:
    return Op(index, int(seconds * 1e9), type, "nemesis", f, {"targets": ["n1"]})  # type: ignore[arg-type]


def test_interval_runs_from_start_completion_to_stop_completion() -> None:
    ops = [nemesis(0, 1.0, "invoke", "start-partition"), nemesis(1, 1.5, "info", "start-partition"),
           nemesis(2, 4.0, "invoke", "stop-partition"), nemesis(3, 4.2, "info", "stop-partition")]
    [interval] = fault_intervals(ops, int(10e9))
    assert (interval.kind, interval.start_s, interval.end_s, interval.start_index) == ("partition", 1.5, 4.2, 0)
    assert not interval.open_ended and interval.colour == FAULT_COLOURS["partition"]


def test_heal_all_ends_every_fault_and_unstopped_faults_last_to_the_end() -> None:
    ops = [nemesis(0, 1.0, "info", "start-kill"), nemesis(1, 2.0, "info", "start-clock"),
           nemesis(2, 3.0, "info", "heal-all"), nemesis(3, 5.0, "info", "start-disk"),
           nemesis(4, 6.0, "invoke", "stop-disk")]  # the stop never completed
    intervals = fault_intervals(ops, int(9e9))
    assert [(i.kind, i.start_s, i.end_s, i.open_ended) for i in intervals] == [
        ("kill", 1.0, 3.0, False), ("clock", 2.0, 3.0, False), ("disk", 5.0, 9.0, True)]


def test_restarting_a_fault_in_force_extends_it_and_unknown_kinds_get_grey() -> None:
    ops = [nemesis(0, 1.0, "info", "start-flood"), nemesis(1, 2.0, "info", "start-flood"),
           nemesis(2, 3.0, "info", "stop-flood"), nemesis(3, 4.0, "info", "stop-flood")]
    [interval] = fault_intervals(ops, int(5e9))
    assert (interval.start_s, interval.end_s) == (1.0, 3.0) and interval.colour == OTHER_FAULT_COLOUR


def test_client_ops_are_ignored() -> None:
    client = Op(0, 0, "invoke", 3, "start-partition", None)
    assert fault_intervals([client], 10) == []


def test_bands_merge_a_kinds_intervals_closer_than_the_resolution_and_keep_the_rest() -> None:
    faults = [FaultInterval("kill", 1.0, 1.1, 0, False), FaultInterval("kill", 1.15, 1.3, 4, False),
              FaultInterval("partition", 1.2, 2.0, 6, False), FaultInterval("kill", 1.5, 1.6, 8, False),
              FaultInterval("kill", 1.65, 3.0, 12, True)]
    assert bands(faults, 0.1) == [FaultInterval("kill", 1.0, 1.3, 0, False),
                                  FaultInterval("partition", 1.2, 2.0, 6, False),
                                  FaultInterval("kill", 1.5, 3.0, 8, True)]
    assert bands(faults, 0.01) == faults  # nothing closer than that: drawn as they are
    # Another kind in between never joins two of a kind into one, nor is joined.
    assert [b.kind for b in bands(faults, 10.0)] == ["kill", "partition"]
