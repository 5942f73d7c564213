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

What a results file can make the page carry is bounded as a whole, not only per type: a
checker's anomaly types, the compact rows and the contexts are each spent from a budget for
the whole page, in the order the page shows them (see the bounds below for why those
numbers). What is left out is never silent: a checker's section names the types it does not
show, with their counts; a group says which of its anomalies it does not list; the section
says how many checkers it leaves out. results.json holds them all.
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
# The page-wide bounds. A real run names a few anomaly types: floodmark's checkers know about
# forty in all, a dozen per checker at most, and Elle's taxonomy is some twenty-five; a run with
# hundreds of types is a checker naming each anomaly differently or a hostile file, and a reader
# cannot take in more than a screenful of type headings anyway. So a checker shows its 50 most
# frequent types as groups, and the page 100 in all; the rest are named with their counts.
# Rows: a type's first few thousand anomalies show its pattern (the partitions, the offsets, when
# it began) as well as all of them do; 5,000 per type and 10,000 in all are 100 to 200 pages of
# the pager and one to a few megabytes. Contexts (the ops and node events around an anomaly,
# kept as JSON until a row is clicked) are the heaviest part: 2,000 of them cost about ten
# megabytes and most of a minute on a real run. (200 types of 500 anomalies each made a 50 MB
# page in 159 s before these bounds.)
TYPES_PER_CHECKER = 50  # anomaly types a checker shows as groups
TYPES_IN_ALL = 100  # anomaly types the whole page shows as groups
TYPES_NAMED = 100  # types beyond those that a checker still names with their counts
ROWS_PER_TYPE = 5_000  # anomalies of a type the page lists (the detailed ones included)
ROWS_IN_ALL = 10_000  # compact rows of the whole page
CONTEXT_IN_ALL = 2_000  # compact rows of the whole page that carry their context
CHECKERS_SHOWN = 100  # checkers the page shows (floodmark has a dozen); the others are counted
ROW_EXPLANATION_SHOWN = 200  # characters of an explanation in a compact row (a detailed one shows more)
DETAILS_SHOWN = 30  # fields of a detailed anomaly shown beyond the usual ones (a checker writes a few)
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
    context_limit: int = CONTEXT_PER_TYPE  # the anomalies #1 to #context_limit carry their context
    listed: int = 0  # the anomalies #1 to #listed are on the page, in detail or as rows

    @property
    def unlisted(self) -> int:
        """This group's anomalies the page does not list (results.json does)."""
        return self.count - self.listed


@dataclass
class CheckerView:
    name: str
    valid: Any
    groups: list[AnomalyGroup]
    stats: list[tuple[str, str]]
    stats_omitted: int
    problems: list[str]
    # the types this checker reports but does not show as groups, most frequent first, as
    # (type, count); at most TYPES_NAMED of them, the others counted in the two fields after
    types_not_shown: list[tuple[str, int]] = field(default_factory=list)
    types_not_named: int = 0
    anomalies_not_named: int = 0

    @property
    def anomaly_total(self) -> int:
        return (sum(g.count for g in self.groups) + sum(n for _, n in self.types_not_shown)
                + self.anomalies_not_named)

    @property
    def types_omitted(self) -> int:
        return len(self.types_not_shown) + self.types_not_named


@dataclass(frozen=True)
class OmittedCheckers:
    """The checkers past :data:`CHECKERS_SHOWN`, counted: how many, by verdict, and their anomalies."""

    count: int = 0
    invalid: int = 0
    unknown: int = 0
    anomalies: int = 0


@dataclass
class AnomalyViews:
    """What the page shows of the checkers' results, and what it leaves to results.json."""

    checkers: list[CheckerView] = field(default_factory=list)
    omitted: OmittedCheckers = OmittedCheckers()

    @property
    def anomaly_total(self) -> int:
        return sum(c.anomaly_total for c in self.checkers) + self.omitted.anomalies


def page_bounds() -> dict[str, int]:
    """The bounds as they stand (a test may lower them), for the page to say what it leaves out."""
    return {"types": TYPES_PER_CHECKER, "types_in_all": TYPES_IN_ALL, "rows": ROWS_PER_TYPE,
            "rows_in_all": ROWS_IN_ALL, "contexts": CONTEXT_PER_TYPE, "contexts_in_all": CONTEXT_IN_ALL,
            "checkers": CHECKERS_SHOWN}


@dataclass
class _Budget:
    """What is left of the page-wide bounds, spent in the order the page shows things."""

    detailed: int
    types: int
    rows: int
    contexts: int


def checker_views(data: RunData, tables: ContextTables | None = None) -> AnomalyViews:
    """The checkers' anomalies, grouped; compact rows' contexts refer into ``tables``."""
    checkers = (data.results or {}).get("checkers")
    if not isinstance(checkers, dict):
        return AnomalyViews()
    builder = ContextBuilder(data)
    tables = tables if tables is not None else ContextTables()
    parsed = [_parse(name, result) for name, result in checkers.items()]
    rank = {False: 0, "unknown": 1}
    # In the order the page shows them (their budgets are spent in that order).
    parsed.sort(key=lambda p: (0 if p.by_type else 1, rank.get(p.valid, 2)))
    shown, omitted = parsed[:CHECKERS_SHOWN], parsed[CHECKERS_SHOWN:]
    group_ids = iter(range(1, 1 << 30))
    budget = _Budget(DETAILED_IN_ALL, TYPES_IN_ALL, ROWS_IN_ALL, CONTEXT_IN_ALL)
    views: list[CheckerView] = []
    for checker in shown:
        groups = []
        types_shown = min(TYPES_PER_CHECKER, budget.types, len(checker.by_type))
        for kind, items in checker.by_type[:types_shown]:
            try:
                group = _group(next(group_ids), checker.name, kind, items, checker.reported.get(kind),
                               builder, tables, data, budget)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as e:
                # a malformed anomaly (a non-numeric offset, ops that are not a list) is a note in place
                checker.problems.append(f"results.json: {kind[:60]} anomalies could not be shown "
                                        f"({type(e).__name__}: {str(e)[:120]})")
                continue
            groups.append(group)
        budget.types -= types_shown
        rest = [(kind, len(items)) for kind, items in checker.by_type[types_shown:]]  # as a group counts them
        stats, stats_omitted = flatten_stats(checker.stats)
        views.append(CheckerView(checker.name, checker.valid, groups, stats, stats_omitted, checker.problems,
                                 rest[:TYPES_NAMED], len(rest[TYPES_NAMED:]), sum(n for _, n in rest[TYPES_NAMED:])))
    views.sort(key=lambda v: (0 if v.groups or v.types_omitted else 1, rank.get(v.valid, 2)))
    return AnomalyViews(views, OmittedCheckers(
        len(omitted), sum(1 for c in omitted if c.valid is False), sum(1 for c in omitted if c.valid == "unknown"),
        sum(len(items) for c in omitted for _, items in c.by_type)))


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
           builder: ContextBuilder, tables: ContextTables, data: RunData, budget: _Budget) -> AnomalyGroup:
    """One type's anomalies: the first few in full, the others (to the bounds) as compact rows."""
    in_full = min(DETAILED_PER_TYPE, budget.detailed)
    listed = min(len(items), max(in_full, min(ROWS_PER_TYPE, in_full + budget.rows)))
    with_context = min(listed, CONTEXT_PER_TYPE, in_full + budget.contexts)
    detailed = []
    rest = []
    for number, anomaly in enumerate(items[:listed], start=1):
        label = partition_label(anomaly.get("topic"), anomaly.get("partition"))
        offsets = short_json(anomaly.get("offsets") or [], 80)
        ops = [i for i in anomaly.get("ops") or [] if isinstance(i, int)]
        explanation = str(anomaly.get("explanation") or "(no explanation given)")
        if number <= in_full:
            details = [(str(k)[:TYPE_SHOWN], short_json(v, 400)) for k, v in anomaly.items() if k not in _SHOWN_ELSEWHERE]
            if len(details) > DETAILS_SHOWN:
                details[DETAILS_SHOWN:] = [("…", f"{len(details) - DETAILS_SHOWN:,} more fields in results.json")]
            view = AnomalyView(number, kind, shown_text(explanation, EXPLANATION_SHOWN), label, offsets, ops, details,
                               builder.build(anomaly))
            if is_lin_failure(anomaly):
                view.lin_charts = lin_charts(data, anomaly, builder.partition_ops())
            detailed.append(view)
        else:
            context = tables.payload(builder.build(anomaly)) if number <= with_context else None
            rest.append([number, label, offsets, short_json(ops, 80), shown_text(explanation, ROW_EXPLANATION_SHOWN),
                         context])
    budget.detailed -= len(detailed)
    budget.rows -= len(rest)
    budget.contexts -= max(0, with_context - len(detailed))
    reported_count = reported if isinstance(reported, int) and reported != len(items) else None
    return AnomalyGroup(group_id, checker, kind, len(items), reported_count, detailed, rest,
                        max(0, listed - with_context), with_context, listed)


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
