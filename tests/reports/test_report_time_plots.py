"""Latency and throughput plots: inline SVG, fault shading, honest captions."""

from __future__ import annotations

from report_fixtures import run_data_from

from floodmark.contracts.history import Op
from floodmark.reports import time_plots
from floodmark.reports.faults import FaultInterval
from floodmark.reports.op_table import OpTable, build_op_table


def _table(n: int, outcome: str = "ok") -> object:
    ops: list[Op] = []
    for k in range(n):
        ops.append(Op(len(ops), k * 10_000_000, "invoke", k % 4, "send", {"value": f"<{k}>"}))
        ops.append(Op(len(ops), k * 10_000_000 + 5_000_000, outcome, k % 4, "send", None))  # type: ignore[arg-type]
    data = run_data_from(ops)
    return build_op_table(data.history, data.completion_of, 4)


def test_plots_are_inline_svg_with_fault_legend() -> None:
    table = _table(400)
    faults = [FaultInterval("partition", 1.0, 2.0, 0, False)]
    for plot in (time_plots.latency_plot(table, faults), time_plots.throughput_plot(table, faults)):  # type: ignore[arg-type]
        assert plot.svg.startswith('<svg class="plot"') and plot.svg.rstrip().endswith("</svg>")
        assert "<?xml" not in plot.svg and 'width="' not in plot.svg.split(">", 1)[0]
        assert "fault: partition" in plot.svg
    caption = time_plots.latency_plot(table, []).caption  # type: ignore[arg-type]
    assert "400 client ops" in caption and "thinned" not in caption
    assert "0.2 s bin" in caption  # 400 ops -> 20 bins over 4 s


def test_many_failures_are_thinned_and_the_caption_says_so(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(time_plots, "MAX_POINTS_PER_OUTCOME", 50)
    caption = time_plots.latency_plot(_table(200, "fail"), []).caption  # type: ignore[arg-type]
    assert "fail: 50 of 200" in caption


def test_an_f_or_fault_kind_with_dollar_signs_is_drawn_as_written_not_as_tex() -> None:
    # Matplotlib reads a label with two "$" as TeX: "$x^2$" was drawn as a formula, and
    # "$\frac{x}$" (no TeX at all) failed the plots of an otherwise readable history.
    table = _ok_ops_table(["$\\frac{x}$", "$x^2$"] * 20, workers=2)
    faults = [FaultInterval("$\\sqrt$", 0.1, 0.2, 0, False)]
    latency, throughput = time_plots.latency_plot(table, faults), time_plots.throughput_plot(table, faults)
    for svg in (latency.svg, throughput.svg):
        assert "$x^2$ ok" in svg and "$\\frac{x}$ ok" in svg and "fault: $\\sqrt$" in svg


def test_an_f_or_fault_kind_starting_with_an_underscore_is_in_the_legend() -> None:
    # Matplotlib leaves a label starting with "_" out of the legend (its mark for a hidden
    # artist): an f named "_send" was drawn, but nothing said which line it was.
    table = _ok_ops_table(["_send", "poll"] * 20, workers=2)
    faults = [FaultInterval("_cut", 0.1, 0.2, 0, False)]
    for plot in (time_plots.latency_plot(table, faults), time_plots.throughput_plot(table, faults)):
        assert "_send ok" in plot.svg and "poll ok" in plot.svg and "fault: _cut" in plot.svg


def test_a_history_of_many_f_draws_the_most_frequent_on_their_own_and_the_rest_together() -> None:
    # Each f was a line and a legend entry of its own: 3,000 distinct f (a hostile or foreign
    # history may name any) took the report two minutes, in lines no colour told apart.
    table = _ok_ops_table([f"common{k}" for k in range(7)] * 10 + [f"rare{k}" for k in range(40)], workers=4)
    latency, throughput = time_plots.latency_plot(table, []), time_plots.throughput_plot(table, [])  # type: ignore[arg-type]
    for svg in (latency.svg, throughput.svg):
        assert all(f"common{k} ok" in svg for k in range(7))
        assert "40 other f ok" in svg and "rare0" not in svg


def test_ops_recorded_before_the_start_are_binned_from_the_earliest() -> None:
    # A time below zero is a time the history's reader accepts: binned from zero, such an op
    # fell into bin -1 and numpy refused it, so the page lost both plots.
    table = _ok_ops_table(["send"] * 40, workers=2, first=-10)
    for plot in (time_plots.latency_plot(table, []), time_plots.throughput_plot(table, [])):  # type: ignore[arg-type]
        assert plot.svg.startswith('<svg class="plot"') and "send ok" in plot.svg


def _ok_ops_table(fs: list[str], workers: int, first: int = 0) -> OpTable:
    """The table of one ok op per ``f`` of ``fs``, 10 ms apart from ``first`` × 10 ms, each
    taking 5 ms, by ``workers`` processes in turn."""
    ops: list[Op] = []
    for k, f in enumerate(fs):
        at = (first + k) * 10_000_000
        ops.append(Op(len(ops), at, "invoke", k % workers, f, None))
        ops.append(Op(len(ops), at + 5_000_000, "ok", k % workers, f, None))
    data = run_data_from(ops)
    return build_op_table(data.history, data.completion_of, workers)
