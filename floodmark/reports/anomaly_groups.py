"""Anomalies as the report lists them: by checker, then by type, every one accounted for.

A broken protocol can produce thousands of anomalies of one type (every send after a lost
leader is "unseen"). The report shows the first few of each type in full, with context, and
*all* the others as compact rows paged in the browser. A detailed anomaly is some twenty
kilobytes of tables, so the page details at most ``DETAILED_IN_ALL`` in all, the types shown
first taking them first: a results file naming thousands of types, one anomaly each, would
otherwise make a page of tens of megabytes. Each of the first ``CONTEXT_PER_TYPE``
anomalies of a type carries its context (ops around the witnesses, the nodes' events) as
JSON data, which the page renders when its row is clicked; past that bound the rows have no
inline context and the page says how many. Counts are always shown, and if a checker says
it found more anomalies than it listed (``anomaly_counts`` above the list), the difference
is shown too, never hidden. Checkers with anomalies come first, invalid before unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from floodmark.reports.anomaly_context import AnomalyContext, ContextBuilder, ContextTables
from floodmark.reports.lin_chart import LinChart, is_lin_failure, lin_charts
from floodmark.reports.run_data import RunData, partition_label, short_json

DETAILED_PER_TYPE = 8  # anomalies of a type rendered in full as HTML
DETAILED_IN_ALL = 200  # anomalies of the whole report rendered in full
CONTEXT_PER_TYPE = 1000  # anomalies of a type whose context the page carries (the detailed ones included)
_SHOWN_ELSEWHERE = frozenset(("type", "topic", "partition", "offsets", "ops", "events", "explanation",
                              "partial_linearizations", "stuck", "next", "unlinearizable_ops"))


@dataclass
class AnomalyView:
    number: int
    type: str
    explanation: str
    partition: str
    offsets: str
    ops: list[int]
    details: list[tuple[str, str]]
    context: AnomalyContext
    lin_charts: list[LinChart] = field(default_factory=list)


@dataclass
class AnomalyGroup:
    group_id: int
    checker: str
    type: str
    count: int
    reported: int | None  # the checker's own count, when it differs from the list
    detailed: list[AnomalyView]
    # compact rows for the paged table: [number, partition, offsets, ops, explanation, context],
    # the context a ContextTables payload, or None past CONTEXT_PER_TYPE
    rest: list[list[Any]]
    without_context: int = 0  # listed anomalies of this group with no context on the page
    context_limit: int = CONTEXT_PER_TYPE  # the bound that left them out


@dataclass
class CheckerView:
    name: str
    valid: Any
    groups: list[AnomalyGroup]
    stats: list[tuple[str, str]]
    stats_omitted: int
    problems: list[str]

    @property
    def anomaly_total(self) -> int:
        return sum(g.count for g in self.groups)


def checker_views(data: RunData, tables: ContextTables | None = None) -> list[CheckerView]:
    """The checkers' anomalies, grouped; compact rows' contexts refer into ``tables``."""
    checkers = (data.results or {}).get("checkers")
    if not isinstance(checkers, dict):
        return []
    builder = ContextBuilder(data)
    tables = tables if tables is not None else ContextTables()
    parsed = [_parse(name, result) for name, result in checkers.items()]
    rank = {False: 0, "unknown": 1}
    # In the order the page shows them (their details budget is spent in that order).
    parsed.sort(key=lambda p: (0 if p.by_type else 1, rank.get(p.valid, 2)))
    group_ids = iter(range(1, 1 << 30))
    detailed_left = DETAILED_IN_ALL
    views: list[CheckerView] = []
    for checker in parsed:
        groups = []
        for kind, items in checker.by_type:
            try:
                group = _group(next(group_ids), checker.name, kind, items, checker.reported.get(kind),
                               builder, tables, data, min(DETAILED_PER_TYPE, detailed_left))
            except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as e:
                # a malformed anomaly (a non-numeric offset, ops that are not a list) is a note in place
                checker.problems.append(f"results.json: {kind[:60]} anomalies could not be shown "
                                        f"({type(e).__name__}: {str(e)[:120]})")
                continue
            detailed_left -= len(group.detailed)
            groups.append(group)
        stats, omitted = flatten_stats(checker.stats)
        views.append(CheckerView(checker.name, checker.valid, groups, stats, omitted, checker.problems))
    views.sort(key=lambda v: (0 if v.groups else 1, rank.get(v.valid, 2)))
    return views


@dataclass
class _ParsedChecker:
    """One checker's entry of results.json, its anomalies grouped by type (most first)."""

    name: str
    valid: Any
    by_type: list[tuple[str, list[dict[str, Any]]]]
    reported: dict[str, Any]  # the checker's own counts by type
    stats: Any
    problems: list[str]


def _parse(name: Any, result: Any) -> _ParsedChecker:
    if not isinstance(result, dict):
        return _ParsedChecker(str(name), "unknown", [], {}, None, [f"results.json: checker {name!r} is not an object"])
    problems: list[str] = []
    anomalies = result.get("anomalies") or []
    if not isinstance(anomalies, list):
        problems.append("results.json: 'anomalies' is not a list")
        anomalies = []
    by_type: dict[str, list[dict[str, Any]]] = {}
    for anomaly in anomalies:
        if not isinstance(anomaly, dict):
            problems.append(f"results.json: an anomaly is not an object: {short_json(anomaly, 80)}")
            continue
        kind = anomaly.get("type", "untyped")
        by_type.setdefault(shown_text(kind, TYPE_SHOWN) if isinstance(kind, str) else short_json(kind, 40),
                           []).append(anomaly)
    counts = result.get("anomaly_counts")
    reported: dict[str, Any] = counts if isinstance(counts, dict) else {}
    for kind, count in reported.items():
        if isinstance(count, int) and count > 0:
            by_type.setdefault(shown_text(str(kind), TYPE_SHOWN), [])
    ordered = sorted(by_type.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return _ParsedChecker(str(name), result.get("valid"), ordered, reported, result.get("stats"), problems)


# What a report shows of one anomaly's words: a checker writes type names of a few words and
# explanations of a few lines; a results file with megabytes there would make every copy of
# them in the report (group headings, tables, charts) as large.
TYPE_SHOWN = 120
EXPLANATION_SHOWN = 4000


def shown_text(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and how many more results.json holds."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} characters more in results.json)"


def _group(group_id: int, checker: str, kind: str, items: list[dict[str, Any]], reported: Any,
           builder: ContextBuilder, tables: ContextTables, data: RunData, in_full: int) -> AnomalyGroup:
    """One type's anomalies: the first ``in_full`` in full, the others as compact rows."""
    detailed = []
    rest = []
    for number, anomaly in enumerate(items, start=1):
        label = partition_label(anomaly.get("topic"), anomaly.get("partition"))
        offsets = short_json(anomaly.get("offsets") or [], 80)
        ops = [i for i in anomaly.get("ops") or [] if isinstance(i, int)]
        explanation = shown_text(str(anomaly.get("explanation") or "(no explanation given)"), EXPLANATION_SHOWN)
        if number <= in_full:
            details = [(str(k), short_json(v, 400)) for k, v in anomaly.items() if k not in _SHOWN_ELSEWHERE]
            view = AnomalyView(number, kind, explanation, label, offsets, ops, details, builder.build(anomaly))
            if is_lin_failure(anomaly):
                view.lin_charts = lin_charts(data, anomaly, builder.partition_ops())
            detailed.append(view)
        else:
            context = tables.payload(builder.build(anomaly)) if number <= CONTEXT_PER_TYPE else None
            rest.append([number, label, offsets, short_json(ops, 80), explanation, context])
    reported_count = reported if isinstance(reported, int) and reported != len(items) else None
    return AnomalyGroup(group_id, checker, kind, len(items), reported_count, detailed, rest,
                        max(0, len(items) - CONTEXT_PER_TYPE), CONTEXT_PER_TYPE)


def flatten_stats(stats: Any, limit: int = 200) -> tuple[list[tuple[str, str]], int]:
    """Checker stats as (dotted name, value) rows, nested dicts unfolded three levels deep."""
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any, depth: int) -> None:
        if isinstance(value, dict) and depth < 3 and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v, depth + 1)
        else:
            rows.append((prefix or "(value)", short_json(value, 200)))

    if isinstance(stats, dict):
        walk("", stats, 0)
    return rows[:limit], max(0, len(rows) - limit)
