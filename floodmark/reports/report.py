"""The run report: one self-contained HTML file that says what happened in a run.

It is read by an engineer whose chaos run just failed, so it is ordered by urgency: the
verdict and how to reproduce the run, then every anomaly (grouped by checker and type, with
the ops and node events around it), then the timelines that show *when* (latency and
throughput against the faults, the per-partition lane chart, the per-process op timeline),
the linearizability failure charts, the checkers' stats, and finally links to the raw
files of the run directory. Links are relative, so the report keeps working when the run
directory is copied or served by ``floodmark serve``.

The file embeds its styles, scripts and charts and loads nothing from the network.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from floodmark.checkers.fault_coverage import fault_coverage, summary_line
from floodmark.contracts.results import shown_verdict
from floodmark.inputs.output_paths import check_output, write_output
from floodmark.reports.anomaly_context import ContextTables
from floodmark.reports.anomaly_groups import AnomalyViews, checker_views, page_bounds
from floodmark.reports.faults import FAULT_COLOURS, FaultInterval, fault_colour, fault_intervals
from floodmark.reports.history_columns import paused_gc
from floodmark.reports.op_table import build_op_table
from floodmark.reports.partition_lanes import build_partition_lanes, render_partition_lanes
from floodmark.reports.process_timeline import timeline_payload
from floodmark.reports.run_data import RunData, load_run
from floodmark.reports.templating import environment, script_hash, static_text
from floodmark.reports.time_plots import Plot, latency_plot, throughput_plot
from floodmark.run_dirs.rundir import (
    CONFIG,
    HISTORY,
    RESULTS,
    SCHEDULE,
    RunDir,
    repro_command,
)
from floodmark.run_dirs.unfinished_runs import unfinished_reason

NOT_STATED = "not stated"  # what a run without a configuration shows where one would say


@dataclass(frozen=True)
class FileLink:
    label: str
    href: str
    size: int


def write_report(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                 warn: Callable[[str], None] | None = None) -> Path:
    """Render the report of a run directory to ``out`` (default: ``<run>/report.html``).

    Written as :mod:`floodmark.inputs.output_paths` says: atomically (a temporary file
    renamed into place), so a reader of the store never sees half a report, through a device
    or FIFO, and never over a file of the run (a :class:`~floodmark.errors.UsageError` naming
    ``--out``). ``warn`` is told each warning the page shows (what could not be read).
    """
    run = RunDir(Path(run_dir))
    target = Path(out) if out is not None else run.report
    flag, inputs = ("--out" if out is not None else None), run.recorded_files()
    # (the run's own report.html: a link there is replaced, not followed; see write_output)
    own = out is None
    check_output(target, flag=flag, inputs=inputs, follow_links=not own)  # before the slow part
    data = load_run(run_dir)
    with paused_gc():  # the charts build large acyclic structures too
        html = render_report(data, target.parent)
    if warn is not None:
        for warning in data.warnings:
            warn(warning)
    # (a string the run recorded that is not Unicode text is shown replaced, never fatal)
    return write_output(target, lambda f: f.write(html), flag=flag, inputs=inputs, errors="replace",
                        follow_links=not own)


def render_report(data: RunData, out_dir: Path) -> str:
    """The report's HTML. A section whose input is malformed (a damaged results.json, odd
    node events) becomes a note in its place; the rest of the report is still shown."""
    config = data.config
    concurrency = config.concurrency if config is not None else None
    if concurrency is not None and not 0 < concurrency <= MAX_LANES:
        data.warnings.append(f"concurrency {concurrency} is not plausible: lanes are packed by overlap instead")
        concurrency = None
    history = data.history
    table = build_op_table(history, data.completion_of, concurrency)
    faults = _section(data, "faults", list,
                      lambda: fault_intervals((history[i] for i in history.nemesis_indices), history.end_time))
    coverage = _section(data, "fault coverage", dict, lambda: fault_coverage(history[i] for i in history.nemesis_indices))
    tables = ContextTables()
    views: AnomalyViews = _section(data, "the checkers' verdicts", AnomalyViews, lambda: checker_views(data, tables))
    checkers = views.checkers
    vouched = data.results is None or data.verdict is not None
    if not vouched:  # results.json's verdicts are not this run's (a warning says why): no checker's is shown
        checkers = [replace(c, valid=None) for c in checkers]
    plots: list[Plot] = _section(data, "the plots", list, lambda: [latency_plot(table, faults),
                                                                 throughput_plot(table, faults)] if len(table) else [])
    partitions = _section(data, "the partition lanes", list, lambda: [
        (lanes.label, render_partition_lanes(lanes)) for lanes in build_partition_lanes(data.events)])
    lin_anomalies = [a for c in checkers for g in c.groups for a in g.detailed if a.lin_charts]
    script = static_text("report.js")
    interrupted = unfinished_reason(data.run)  # why its verdict is unknown at best
    context: dict[str, Any] = {
        "name": config.name if config is not None else data.run.test_name,
        "verdict": shown_verdict(data.verdict, interrupted),
        "seed": data.seed,
        "variant": config.variant if config is not None else _text((data.results or {}).get("variant")) or NOT_STATED,
        "nemesis": (", ".join(config.nemesis) or "none") if config is not None else NOT_STATED,
        "header_fields": _header_fields(data),
        "repro": repro_command(data.run.path),
        "warnings": data.warnings,
        "interrupted": interrupted,
        "checkers": checkers,
        "checkers_vouched": vouched,
        "anomaly_total": views.anomaly_total,
        "checkers_omitted": views.omitted,
        "bounds": page_bounds(),
        "context_tables": tables.tables(),
        "plots": plots,
        "faults": faults,
        "fault_rows": MAX_FAULT_ROWS,
        "missed_shown": MAX_MISSED_SHOWN,
        "coverage": sorted(coverage.items()),
        "coverage_line": summary_line(coverage) if coverage else "",
        "fault_kinds": _fault_legend(faults),
        "partitions": partitions,
        "timeline": _section(data, "the timeline", dict,
                             lambda: timeline_payload(table, faults, data.history, data.completion_of)),
        "lin_anomalies": lin_anomalies,
        "files": _file_links(data, out_dir),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "css": static_text("report.css"),
        "script": script,
        "csp_script": script_hash(script),
        "op_count": len(data.history),
    }
    return environment().get_template("report.html.j2").render(context)


MAX_LANES = 10_000  # a run's worker lanes in the timeline; more is a damaged configuration
# A hand-written schedule may hold 100,000 faults: the page lists the first ones, the history all.
MAX_FAULT_ROWS = 1_000
MAX_MISSED_SHOWN = 20  # per kind, the faults that did not take effect, and why


def _section(data: RunData, what: str, empty: Callable[[], Any], build: Callable[[], Any]) -> Any:
    """``build()``, or (when the run's files are malformed in a way it trips on) an empty
    section and a warning saying what could not be shown and why."""
    try:
        return build()
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError) as e:
        data.warnings.append(f"{what} could not be shown: {type(e).__name__}: {str(e)[:200]}")
        return empty()


def _text(value: Any) -> str:
    """A scalar from results.json as text; anything else (a damaged file) as nothing."""
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else ""


def _header_fields(data: RunData) -> list[tuple[str, str]]:
    c = data.config
    fields: list[tuple[str, Any]] = [] if c is None else [
        ("cluster", c.cluster),
        ("workload", c.workload),
        ("nodes", c.nodes),
        ("topics × partitions", f"{c.topics} × {c.partitions}"),
        ("replication", c.replication_factor),
        ("min ISR", c.min_insync_replicas),
        ("acks", c.acks),
        ("unclean election", "enabled" if c.unclean_leader_election else None),
        ("concurrency", c.concurrency),
    ]
    fields += [("duration", f"{data.duration_s:.1f} s"), ("ops", f"{len(data.history):,}")]
    return [(k, str(v)) for k, v in fields if v is not None]


def _fault_legend(faults: list[FaultInterval]) -> list[tuple[str, str]]:
    kinds = sorted({f.kind for f in faults}, key=lambda k: (k not in FAULT_COLOURS, k))
    return [(k, fault_colour(k)) for k in kinds]


def _file_links(data: RunData, out_dir: Path) -> list[FileLink]:
    """The run's raw files, linked relative to where the report is written."""
    run = data.run.path
    candidates = [run / HISTORY, run / RESULTS, run / CONFIG, run / SCHEDULE]
    for sub in ("events", "logs"):
        base = run / sub
        if base.is_dir():
            candidates += sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink())
    links = []
    for path in candidates:
        if path.is_file():
            # from the name's own bytes: a log copied from another machine may be named in bytes
            # that are not UTF-8, which quote() refuses as text (a traceback, no report)
            href = quote(os.fsencode(Path(os.path.relpath(path.resolve(), out_dir.resolve())).as_posix()))
            links.append(FileLink(path.relative_to(run).as_posix(), href, path.stat().st_size))
    return links
