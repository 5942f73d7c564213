"""A run as the report sees it: everything in one run directory, loaded once.

A report is drawn from four records that a run leaves behind (``floodmark.rundir``): the
configuration (``test.yaml``, or the copy inside ``results.json``), the client and nemesis
history, each node's events and the checkers' results. Runs are reported even when they
are incomplete: a run that crashed before checking has no results, a killed node leaves a
torn event file. What could not be read becomes a *warning* shown at the top of the report
rather than a crash, except the history itself, without which there is nothing to show.

The verdict shown is results.json's only when it can be trusted as this run's
(:func:`results_problem`): a file that contradicts itself (an overall "valid" over an
invalid checker) or whose checkers' entries are not judgements, and a history not wholly
read (a torn last line) that results.json (or ``digest.json``) does not show to be the one judged, make the
run shown unchecked, with a warning saying why.

Ops are paired here (each invocation with its completion, per process) because every view
needs the pairs: latency, the process timeline, the context of witness ops.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from floodmark.history import Op
from floodmark.inputs.sources import file_problem
from floodmark.node_events import NodeEvent, NodeEventError, iter_events
from floodmark.reports.history_columns import HistoryColumns, load_history
from floodmark.results import judgement_problem, merge_validity, read_results, verdict_word
from floodmark.run_config import ConfigError, TestConfig, config_from_dict, read_test_config
from floodmark.rundir import RunDir, changed_since_judged

PartitionKey = tuple[str, int]


@dataclass
class RunData:
    run: RunDir
    config: TestConfig | None  # None: the run states no (readable) configuration
    results: dict[str, Any] | None
    history: HistoryColumns
    completion_of: dict[int, int]  # invoke index -> completion index
    invocation_of: dict[int, int]  # completion index -> invoke index
    events: dict[str, list[NodeEvent]]
    warnings: list[str] = field(default_factory=list)
    # why results.json's verdict is not this run's to show (said in ``warnings`` too), if it is not
    verdict_problem: str | None = None

    @property
    def seed(self) -> Any:
        if self.config is not None and self.config.seed is not None:
            return self.config.seed
        return (self.results or {}).get("seed")

    @property
    def verdict(self) -> Any:
        """True, False, "unknown", or None when the run was never checked, or when results.json's
        verdict cannot be shown as this run's (:func:`results_problem`, ``verdict_problem``)."""
        if self.results is None or self.verdict_problem is not None or results_problem(self.results):
            return None
        return self.results.get("valid")

    @property
    def duration_s(self) -> float:
        if not self.history:
            return 0.0
        return (self.history.end_time - min(self.history.time[0], 0)) / 1e9

    def pair(self, index: int) -> tuple[int, int | None]:
        """The (invoke, completion) indices of the op that ``index`` belongs to."""
        if index in self.invocation_of:
            return self.invocation_of[index], index
        return index, self.completion_of.get(index)


def load_run(path: str | os.PathLike[str]) -> RunData:
    """Load a run directory; raises FileNotFoundError or HistoryError if the history is unusable."""
    run = RunDir(Path(path))
    if not run.history.is_file():
        raise FileNotFoundError(f"{run.path}: not a run directory (no {run.history.name})")
    warnings: list[str] = []
    results: dict[str, Any] | None = None
    if os.path.lexists(run.results):  # there, in any form: a directory or a FIFO is no verdict either
        problem = file_problem(run.results)
        try:
            if problem is not None:
                raise ValueError(f"{run.results}: {problem}")
            results = read_results(run.results)
        except (ValueError, OSError) as e:
            warnings.append(f"{e}: the run is shown unchecked")
    config = _load_config(run, results, warnings)
    history = load_history(run.history)
    completion_of = history.pairs()
    events = _load_events(run, warnings)
    if history.torn_tail is not None:  # as ``floodmark check`` says it
        warnings.append(str(history.torn_tail))
    problem = _verdict_problem(run, results, history)
    if problem is not None:
        warnings.append(f"{problem}: the run is shown unchecked")
    return RunData(run, config, results, history, completion_of,
                   {c: i for i, c in completion_of.items()}, events, warnings, problem)


def results_problem(results: dict[str, Any]) -> str | None:
    """Why a results file's overall verdict is not one to show, in a phrase; None when it is:
    a verdict (true, false or "unknown") that is the merge of its checkers' verdicts, each
    checker's entry a judgement as the checkers write it (:func:`judgement_problem`). A file
    that contradicts itself, or whose checkers are not judgements, is no verdict, whatever
    its top line says; and no checker at all is none either."""
    valid = results.get("valid")
    if not (valid is True or valid is False or valid == "unknown"):
        return f"not a results file ('valid' is {short_json(valid, 40)}, not true, false or \"unknown\")"
    checkers = results.get("checkers")
    if checkers is not None and not isinstance(checkers, dict):
        return f"not a results file ('checkers' is {short_json(checkers, 40)}, not an object)"
    if not checkers:
        if valid == "unknown" and isinstance(results.get("error"), str):
            return None  # a run that failed before it could be checked: unknown, and its error says why
        return "no checker's verdict in it"
    for name, result in checkers.items():
        shape = judgement_problem(result)
        if shape is not None:
            return f"not a results file (checker {str(name)[:40]!r}: {shape})"
    merged = merge_validity(c.get("valid", "unknown") for c in checkers.values())
    if merged != valid:
        disagree = [f"{str(name)[:40]} {verdict_word(c.get('valid', 'unknown'))}" for name, c in checkers.items()
                    if c.get("valid", "unknown") == merged]
        return (f"inconsistent: its verdict is {verdict_word(valid)}, but its checkers' is "
                f"{verdict_word(merged)} ({', '.join(disagree[:4])})")
    return None


def _verdict_problem(run: RunDir, results: dict[str, Any] | None, history: HistoryColumns) -> str | None:
    """Why results.json's verdict is not to be shown as this run's, naming the file; None if it is."""
    if results is None:
        return None
    problem = results_problem(results)
    if problem is not None:
        return f"{run.results}: {problem}"
    judged = results.get("judged_files")
    if history.torn_tail is not None:
        # The history was not wholly read: results.json's verdict is this history's only if it
        # was judged on these very bytes, which results.json's own record of what it judged
        # shows (or, for an older one, the run's digest); a history cut or changed since has
        # no verdict yet.
        changed = changed_since_judged(run, judged)
        if changed is not None:
            return (f"{run.results}: its verdict may not be this history's, which is not wholly read "
                    f"({changed})")
    elif judged is not None or os.path.lexists(run.digest):
        # Something says which files were judged: a verdict on other files is not this run's
        # (node events cut at a line's end read whole, and as another run).
        changed = changed_since_judged(run, judged)
        if changed is not None:
            return f"{run.results}: its verdict is not of the files shown ({changed})"
    return None


def _load_config(run: RunDir, results: dict[str, Any] | None, warnings: list[str]) -> TestConfig | None:
    """``test.yaml``, else the copy in ``results.json``; what cannot be read is a warning."""
    try:
        config = read_test_config(run.config)
        if config is not None:
            return config
    except ConfigError as e:
        warnings.append(f"{e} (the configuration shown, if any, is the copy in results.json)")
    copy = (results or {}).get("config")
    if not isinstance(copy, dict) or not copy:
        return None
    try:
        return config_from_dict(copy, f"{run.results}: config")
    except ConfigError as e:
        warnings.append(str(e))
        return None


def _load_events(run: RunDir, warnings: list[str]) -> dict[str, list[NodeEvent]]:
    """Each node's events, in its own seq order; a malformed file is reported, not fatal."""
    events: dict[str, list[NodeEvent]] = {}
    if not run.events.is_dir():
        return events
    for path in sorted(run.events.glob("*.jsonl")):
        try:
            events[path.stem] = sorted(iter_events(path), key=lambda e: e.seq)
        except (NodeEventError, OSError, UnicodeDecodeError) as e:
            warnings.append(f"node events not shown: {e}")
    return events


def op_partitions(op: Op) -> list[PartitionKey]:
    """The partitions an op touches, from the workload value shapes (COMMON.md)."""
    return value_partitions(op.value)


def value_partitions(value: Any) -> list[PartitionKey]:
    items = value if type(value) is list else [value]
    keys: list[PartitionKey] = []
    for item in items:
        if type(item) is dict:
            topic, partition = item.get("topic"), item.get("partition")
            if type(topic) is str and type(partition) is int:
                key = (topic, partition)
                if key not in keys:
                    keys.append(key)
    return keys


def partition_index(history: HistoryColumns) -> dict[PartitionKey, list[int]]:
    """For each partition, the indices of the client ops that touch it, in history order."""
    index: dict[PartitionKey, list[int]] = {}
    nemesis = set(history.nemesis_indices)
    for position, d in enumerate(history.raw):
        if position in nemesis:
            continue
        value = d.get("value")
        if type(value) is dict:  # the common case, kept short: one partition
            key = (value.get("topic"), value.get("partition"))
            ops = index.get(key)  # type: ignore[arg-type]
            if ops is None:
                if type(key[0]) is not str or type(key[1]) is not int:
                    continue
                ops = index[key] = []  # type: ignore[index]
            ops.append(position)
        elif value is not None:
            for key in value_partitions(value):
                index.setdefault(key, []).append(position)
    return index


def short_json(value: Any, limit: int = 240) -> str:
    """A compact one-line rendering of an op value, cut at ``limit`` characters."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def partition_label(topic: Any, partition: Any) -> str:
    if topic is None and partition is None:
        return "—"
    return f"{topic}/{partition}"
