"""The Porcupine-style linearizability failure chart."""

from __future__ import annotations

import re

from report_fixtures import run_data_from

from floodmark.contracts.history import Op
from floodmark.reports.lin_chart import lin_charts, parse_lin_failure


def _history() -> list[Op]:
    """p0 appends a (offset 0); then p1 reads offset 0 = b concurrently with p2 appending b."""
    tp = {"topic": "t0", "partition": 0}
    return [
        Op(0, 0, "invoke", 0, "append", {**tp, "value": "a"}),
        Op(1, 10, "ok", 0, "append", {**tp, "value": "a", "offset": 0}),
        Op(2, 20, "invoke", 1, "read", {**tp, "offset": 0}),
        Op(3, 30, "invoke", 2, "append", {**tp, "value": "<b>"}),
        Op(4, 40, "ok", 1, "read", {**tp, "offset": 0, "value": "<b>"}),
        Op(5, 50, "ok", 2, "append", {**tp, "value": "<b>", "offset": 1}),
    ]


def test_checker_shape_paths_of_step_dicts_and_stuck_completions_map_to_invocations() -> None:
    data = run_data_from(_history())
    anomaly = {"topic": "t0", "partition": 0, "ops": [2, 4],
               "partial_linearizations": [[{"op": 0, "state": ["a"]}], [{"op": 1, "state": ["a"]}, {"op": 5}]],
               "stuck": [4]}
    paths = parse_lin_failure(data, anomaly)
    assert [len(p.steps) for p in paths] == [2, 1]  # longest first
    assert [s.op for s in paths[0].steps] == [0, 3] and paths[0].steps[0].state == ["a"]
    assert paths[0].stuck == (2,) and paths[1].stuck == (2,)


def test_other_accepted_shapes() -> None:
    data = run_data_from(_history())
    as_pairs = parse_lin_failure(data, {"partial_linearizations": [[[0, "s0"], [3, "s1"]]], "ops": [2, 3]})
    assert [s.state for s in as_pairs[0].steps] == ["s0", "s1"] and as_pairs[0].stuck == (2,)
    as_dict = parse_lin_failure(data, {"partial_linearizations": [{"linearized": [0], "next": [2, 99]}]})
    assert as_dict[0].stuck == (2,)
    assert parse_lin_failure(data, {"partial_linearizations": [["junk", None, -4]]})[0].steps == ()


def test_chart_marks_linearized_and_stuck_ops_and_escapes_values() -> None:
    data = run_data_from(_history())
    [chart] = lin_charts(data, {"topic": "t0", "partition": 0,
                                "partial_linearizations": [[{"op": 0, "state": ["a"]}]], "stuck": [2]})
    svg = chart.svg
    assert '<g class="op linearized" data-op="0">' in svg and '<g class="op stuck" data-op="2">' in svg
    assert '<g class="op other" data-op="3">' in svg  # concurrent, neither linearized nor stuck
    assert svg.count('class="lin-point"') == 1 and "<b>" not in svg and "&lt;b&gt;" in svg
    assert len(re.findall(r'class="lane-label">process', svg)) == 3
    assert chart.shown_ops == 3 and chart.omitted_ops == 0
    assert "1 ops linearized, 1 could not be linearized next" in chart.title
