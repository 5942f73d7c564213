"""A run as the report sees it: everything in one run directory, loaded once.

A report is drawn from four records that a run leaves behind (``floodmark.run_dirs.rundir``): the
configuration (``test.yaml``, or the copy inside ``results.json``), the client and nemesis
history, each node's events and the checkers' results. Runs are reported even when they
are incomplete: a run that crashed before checking has no results, a killed node leaves a
torn event file. What could not be read becomes a *warning* shown at the top of the report
rather than a crash, except the history itself, without which there is nothing to show. Node
events are read as ``floodmark check`` reads them (a file it refuses is left out, a last line
cut short is said, in the same words).

The verdict shown is results.json's only when it can be trusted as this run's
(:func:`floodmark.contracts.results.verdict_problem`): a file that contradicts itself (an overall "valid" over an
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

from floodmark.checkers.run_partitions import partition_bounds
from floodmark.contracts.history import Op
from floodmark.contracts.node_events import NodeEvent, NodeEventError, read_events_dir
from floodmark.contracts.results import read_results, results_run_id
from floodmark.contracts.results import verdict_problem as results_problem
from floodmark.contracts.run_config import (
    ConfigError,
    TestConfig,
    config_from_dict,
    read_test_config,
)
from floodmark.contracts.run_ids import StatedRun
from floodmark.inputs.sources import describe_os_error, file_problem
from floodmark.reports.history_columns import HistoryColumns, load_history, paused_gc
from floodmark.run_dirs.run_digests import another_run, changed_since_judged
from floodmark.run_dirs.rundir import RunDir

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
    if not os.path.lexists(run.history):
        raise FileNotFoundError(f"{run.path}: not a run directory (no {run.history.name})")
    unreadable = file_problem(run.history)  # a FIFO or a device is named at once, never waited on or read
    if unreadable is not None:
        raise FileNotFoundError(f"{run.history}: {unreadable}")
    warnings: list[str] = []
    results: dict[str, Any] | None = None
    if os.path.lexists(run.results):  # there, in any form: a directory or a FIFO is no verdict either
        # (a FIFO or a device is named at once, never waited on or read without end)
        problem = file_problem(run.results)
        try:
            if problem is not None:
                raise ValueError(f"{run.results}: {problem}")
            results = read_results(run.results)  # (refuses, unread, one larger than it may be)
        except (ValueError, OSError) as e:
            warnings.append(f"{e}: the run is shown unchecked")
    config, config_source = _load_config(run, results, warnings)
    history = load_history(run.history)
    completion_of = history.pairs()
    events = _load_events(run, config, config_source, history, warnings)
    if history.torn_tail is not None:  # as ``floodmark check`` says it
        warnings.append(str(history.torn_tail))
    problem = _verdict_problem(run, results, history)
    if problem is not None:
        warnings.append(f"{problem}: the run is shown unchecked")
    return RunData(run, config, results, history, completion_of,
                   {c: i for i, c in completion_of.items()}, events, warnings, problem)


def _verdict_problem(run: RunDir, results: dict[str, Any] | None, history: HistoryColumns) -> str | None:
    """Why results.json's verdict is not to be shown as this run's, naming the file; None if it is."""
    if results is None:
        return None
    problem = results_problem(results)
    if problem is not None:
        return f"{run.results}: {problem}"
    judged, results_run = results.get("judged_files"), results_run_id(results)
    if history.torn_tail is not None:
        # The history was not wholly read: results.json's verdict is this history's only if it
        # was judged on these very bytes, which results.json's own record of what it judged
        # shows (or, for an older one, the run's digest); a history cut or changed since has
        # no verdict yet.
        changed = changed_since_judged(run, judged, results_run=results_run)
        if changed is not None:
            return (f"{run.results}: its verdict may not be this history's, which is not wholly read "
                    f"({changed})")
    elif judged is not None or os.path.lexists(run.digest):
        # Something says which files were judged: a verdict on other files is not this run's
        # (node events cut at a line's end read whole, and as another run).
        changed = changed_since_judged(run, judged, results_run=results_run)
        if changed is not None:
            return f"{run.results}: its verdict is not of the files shown ({changed})"
    else:  # (a run with no digest: only the run id tells whose verdict it is)
        other = another_run(run, results_run)
        if other is not None:
            return f"{run.results}: its verdict is not this run's ({other})"
    return None


def _load_config(run: RunDir, results: dict[str, Any] | None,
                 warnings: list[str]) -> tuple[TestConfig | None, str]:
    """``test.yaml``, else the copy in ``results.json``, and which it is (for messages); what
    cannot be read is a warning (a FIFO or a device said at once, as the results browser
    says it, not waited on)."""
    unreadable = file_problem(run.config) if os.path.lexists(run.config) else None
    try:
        if unreadable is not None:
            raise ConfigError(str(run.config), None, unreadable)
        config = read_test_config(run.config)
        if config is not None:
            return config, str(run.config)
    except ConfigError as e:
        warnings.append(f"{e} (the configuration shown, if any, is the copy in results.json)")
    copy = (results or {}).get("config")
    source = f"{run.results}: config"
    if not isinstance(copy, dict) or not copy:
        return None, source
    try:
        return config_from_dict(copy, source), source
    except ConfigError as e:
        warnings.append(str(e))
        return None, source


def _load_events(run: RunDir, config: TestConfig | None, config_source: str, history: HistoryColumns,
                 warnings: list[str]) -> dict[str, list[NodeEvent]]:
    """Each node's events, in its own seq order, read as ``floodmark check`` reads them (held
    to the run ``config``, read from ``config_source``, states): a file that cannot be read
    so is a warning, not fatal, and so is a last line cut short."""
    torn: list[str] = []
    refused: list[NodeEventError] = []
    if os.path.lexists(run.events) and not _is_directory(run.events):  # (read as none at all, unsaid)
        problem = file_problem(run.events) or "is a file, not a directory"
        warnings.append(f"node events not shown: {run.events}: {problem}")
        return {}
    try:
        with paused_gc():  # (acyclic, and read after a history of as many objects as it has lines)
            events = read_events_dir(run.events, torn, topics=None if config is None else config.topic_names,
                                     partitions=partition_bounds(config, (history[i] for i in history.nemesis_indices)),
                                     refused=refused,
                                     run=None if config is None else StatedRun(config.run_id, config_source))
    except OSError as e:
        warnings.append(f"node events not shown: {run.events}: {describe_os_error(e)}")
        return {}
    warnings.extend(f"node events not shown: {e}" for e in refused)
    warnings.extend(torn)  # (as ``floodmark check`` notes it)
    return events


def _is_directory(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # (a name too long; a loop is False)
        return False


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
