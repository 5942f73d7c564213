"""Latency and throughput over time, with the faults that were in force shaded behind.

These are Jepsen's two performance plots. A million ops do not fit one point each into a
page, so time is cut into bins (a few hundred across the run): latency shows, per ``f``, the
median and 99th percentile of ok ops in each bin, plus the failed and indeterminate ops as
points (evenly thinned past a cap, which the caption says); throughput shows completions
per second per bin. Shaded bands are the nemesis' fault intervals, one colour per kind, drawn
as one collection per kind and merged where closer than the chart can show (:func:`bands`).

Plots are drawn with matplotlib's object API on the Agg/SVG canvases (never pyplot, which
keeps global state) and inlined as SVG, so the report stays one self-contained file.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

import numpy as np
from matplotlib import rc_context
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from floodmark.reports.faults import FaultInterval, bands, fault_colour
from floodmark.reports.op_table import OUTCOME_CODE, OUTCOME_COLOURS, OpTable

MAX_BINS = 300
MIN_BINS = 20
OPS_PER_BIN = 20  # fewer bins for sparse histories, so a bin's median means something
MAX_POINTS_PER_OUTCOME = 4000
SHADE_RESOLUTION = 2000  # fault bands closer than 1/2000 of the run are one (a chart is ~1000 px wide)
F_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#bcbd22", "#e377c2")


@dataclass(frozen=True)
class Plot:
    svg: str
    caption: str


def _bins(table: OpTable) -> tuple[np.ndarray, float, int]:
    """The bins' edges, width and count: from the test's start, or from the earliest op when
    the history records one before it (a time below zero, which its reader accepts), to the
    end of the history."""
    count = int(min(MAX_BINS, max(MIN_BINS, len(table) // OPS_PER_BIN)))
    first = min(0.0, float(table.start_s.min()), float(table.end_s.min())) if len(table) else 0.0
    horizon = max(table.end_of_history_s, first + 1e-9)
    return np.linspace(first, horizon, count + 1), (horizon - first) / count, count


def _bin_of(times: np.ndarray, edges: np.ndarray, width: float, bins: int) -> np.ndarray:
    """The bin of each time (the last bin closed at the end)."""
    return np.minimum(((times - edges[0]) / width).astype(np.int64), bins - 1)


def literal(text: str) -> str:
    """``text`` (an op's ``f``, a fault kind: whatever the history says) as matplotlib shows it
    letter for letter: it reads a label with two ``$`` as TeX, so ``$x^2$`` would be drawn as
    a formula and ``$\\frac{x}$`` would fail the whole plot; and it leaves out of the legend a
    label that starts with ``_`` (its mark for a hidden one), so such a text starts with a zero
    width space instead."""
    text = text.replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


def _ok_series(table: OpTable) -> list[tuple[str, str, np.ndarray]]:
    """The lines of ok ops to draw, as (label, colour, mask of the table's rows): one per
    ``f`` while there are no more than there are colours; beyond that, the most frequent on
    their own and every other ``f`` together in the last colour. A history may name any
    number of ``f``, and each line and legend entry costs matplotlib milliseconds (thousands
    of them took minutes), while lines that share a colour cannot be told apart anyway."""
    ok = table.outcome == OUTCOME_CODE["ok"]
    counts = np.bincount(table.f_code[ok].astype(np.int64), minlength=len(table.f_names))
    present = [code for code in range(len(table.f_names)) if counts[code]]
    if len(present) <= len(F_COLOURS):
        return [(literal(table.f_names[code]), F_COLOURS[code % len(F_COLOURS)], ok & (table.f_code == code))
                for code in present]
    ranked = sorted(present, key=lambda code: (-counts[code], code))
    own = sorted(ranked[:len(F_COLOURS) - 1])
    series = [(literal(table.f_names[code]), F_COLOURS[k], ok & (table.f_code == code)) for k, code in enumerate(own)]
    others = ok & ~np.isin(table.f_code, own)
    series.append((f"{len(present) - len(own):,} other f", F_COLOURS[-1], others))
    return series


def _shade_faults(ax, faults: list[FaultInterval], span_s: float) -> list[Patch]:
    """Shade each fault band over the whole height; one legend entry per kind."""
    spans: dict[str, list[list[tuple[float, float]]]] = {}
    for fault in bands(faults, span_s / SHADE_RESOLUTION):
        x0, x1 = fault.start_s, fault.end_s
        spans.setdefault(fault.kind, []).append([(x0, 0.0), (x0, 1.0), (x1, 1.0), (x1, 0.0)])
    # x in data, y in the axes' own 0..1: what axvspan draws, as one artist per kind.
    across = blended_transform_factory(ax.transData, ax.transAxes)
    for kind, rectangles in spans.items():
        ax.add_collection(PolyCollection(rectangles, transform=across, facecolors=fault_colour(kind), alpha=0.14,
                                         linewidths=0, zorder=0), autolim=False)
    return [Patch(color=fault_colour(kind), alpha=0.35, label=literal(f"fault: {kind}")) for kind in spans]


def _figure_to_svg(fig: Figure) -> str:
    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "floodmark"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    # Let the page size the chart: drop the fixed width/height, keep the viewBox.
    head_end = text.index(">")
    head = re.sub(r'\s(width|height)="[^"]*"', "", text[:head_end])
    return '<svg class="plot"' + head[len("<svg"):] + text[head_end:]


def _binned_quantile(bin_of: np.ndarray, values: np.ndarray, q: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """For each non-empty bin, the q-quantile (nearest rank) of its values."""
    order = np.lexsort((values, bin_of))
    sorted_bins, sorted_values = bin_of[order], values[order]
    counts = np.bincount(sorted_bins, minlength=bins)
    firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    filled = np.nonzero(counts)[0]
    picks = firsts[filled] + np.floor(q * (counts[filled] - 1)).astype(np.int64)
    return filled, sorted_values[picks]


def latency_plot(table: OpTable, faults: list[FaultInterval]) -> Plot:
    edges, width, bins = _bins(table)
    centres = edges[:-1] + width / 2
    fig = Figure(figsize=(11, 3.0), dpi=96)
    ax = fig.subplots()
    latency_ms = (table.end_s - table.start_s) * 1e3
    bin_of = _bin_of(table.start_s, edges, width, bins)
    for name, colour, mask in _ok_series(table):
        for q, style, alpha, label in ((0.5, "-", 1.0, "median"), (0.99, "--", 0.7, "p99")):
            filled, values = _binned_quantile(bin_of[mask], latency_ms[mask], q, bins)
            ax.plot(centres[filled], np.maximum(values, 1e-3), style, color=colour, alpha=alpha,
                    linewidth=1.1, label=f"{name} ok {label}")
    thinned = []
    for outcome in ("fail", "info"):
        idx = np.nonzero(table.outcome == OUTCOME_CODE[outcome])[0]
        if idx.size == 0:
            continue
        if idx.size > MAX_POINTS_PER_OUTCOME:
            thinned.append(f"{outcome}: {MAX_POINTS_PER_OUTCOME:,} of {idx.size:,}")
            idx = idx[:: int(np.ceil(idx.size / MAX_POINTS_PER_OUTCOME))]
        ax.scatter(table.start_s[idx], np.maximum(latency_ms[idx], 1e-3), s=7, marker="x" if outcome == "fail" else "^",
                   color=OUTCOME_COLOURS[outcome], label=f"{outcome} (any f)", linewidths=0.8, zorder=3)
    handles = _shade_faults(ax, faults, edges[-1] - edges[0])
    ax.set_yscale("log")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("time since test start (s)")
    ax.set_ylabel("latency (ms)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(handles=ax.get_legend_handles_labels()[0] + handles, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    caption = (f"Latency of {len(table):,} client ops by invocation time; lines are the median and "
               f"p99 of ok ops per {width:.3g} s bin.")
    if thinned:
        caption += " Points evenly thinned (" + "; ".join(thinned) + ")."
    return Plot(_figure_to_svg(fig), caption)


def throughput_plot(table: OpTable, faults: list[FaultInterval]) -> Plot:
    edges, width, bins = _bins(table)
    centres = edges[:-1] + width / 2
    fig = Figure(figsize=(11, 2.6), dpi=96)
    ax = fig.subplots()
    bin_of = _bin_of(table.end_s, edges, width, bins)
    for name, colour, mask in _ok_series(table):
        rate = np.bincount(bin_of[mask], minlength=bins) / width
        ax.plot(centres, rate, "-", color=colour, linewidth=1.1, label=f"{name} ok")
    for outcome in ("fail", "info"):
        mask = table.outcome == OUTCOME_CODE[outcome]
        if mask.any():
            rate = np.bincount(bin_of[mask], minlength=bins) / width
            ax.plot(centres, rate, "-", color=OUTCOME_COLOURS[outcome], linewidth=1.0, label=f"{outcome} (any f)")
    handles = _shade_faults(ax, faults, edges[-1] - edges[0])
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time since test start (s)")
    ax.set_ylabel("completions / s")
    ax.grid(True, alpha=0.3)
    ax.legend(handles=ax.get_legend_handles_labels()[0] + handles, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return Plot(_figure_to_svg(fig), f"Completed client ops per second in {width:.3g} s bins, by f and outcome.")
