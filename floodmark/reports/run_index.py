"""The index of a store: one summary line per run, for the results browser.

A store accumulates thousands of runs. The browser lists them newest first with their
verdict, test name, seed, variant, nemeses and anomaly counts, and filters and pages that
list. Summaries are read from each run's ``results.json`` (or ``test.yaml`` for runs never
checked) and cached by file modification time, so a page of the index costs a directory
scan, not a re-read of every results file. A verdict is shown only if the run still holds the
files it judged, as ``check`` and ``report`` ask it (:mod:`floodmark.reports.judged_files`,
whose digests are cached by the files' identity): a run whose history or node events changed
since is listed unchecked, saying which files changed.

A results file is opened as the server opens what it serves
(:func:`~floodmark.reports.store_paths.open_in_store`): a FIFO, a device or a link leading out
of the store is that run's problem at once, never waited on; a ``test.yaml`` or
``interrupted.json`` that is a link leading out is not read either (the index would show what
the server refuses to serve), and a run directory that is one is not listed; a file larger than
:data:`floodmark.contracts.results.MAX_RESULTS_BYTES` is refused unread, so no run can stall or exhaust the index.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floodmark.contracts import results as results_file
from floodmark.contracts.results import shown_verdict, verdict_problem, verdict_word
from floodmark.contracts.run_config import (
    ConfigError,
    TestConfig,
    config_from_dict,
    read_test_config,
)
from floodmark.inputs.plain_values import parse_json
from floodmark.inputs.sources import describe_os_error, file_problem, other_encoding, without_bom
from floodmark.reports.judged_files import FileKey, JudgedFiles, files_key, trusted
from floodmark.reports.store_paths import NotAFile, OutsideStore, leads_out, open_in_store
from floodmark.run_dirs.rundir import RunDir, find_run_dirs
from floodmark.run_dirs.unfinished_runs import unfinished_reason

NOT_STATED = "not stated"  # the variant of a run without a configuration
_STAMP = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})")


@dataclass(frozen=True)
class RunSummary:
    relative: str  # path of the run directory inside the store, with "/"
    test: str
    name: str  # the run directory's name (<timestamp>-s<seed>)
    started: str  # human-readable timestamp from the directory name
    verdict: Any  # True | False | "unknown" | None (not checked)
    seed: Any
    variant: str
    nemesis: tuple[str, ...]
    workload: str
    anomaly_counts: tuple[tuple[str, int], ...]
    has_report: bool
    problem: str | None = None

    @property
    def anomaly_total(self) -> int:
        return sum(count for _, count in self.anomaly_counts)


@dataclass(frozen=True)
class RunFilter:
    test: str = ""
    variant: str = ""
    nemesis: str = ""
    verdict: str = ""  # valid | invalid | unknown | unchecked

    def matches(self, run: RunSummary) -> bool:
        if self.test and self.test.lower() not in run.test.lower():
            return False
        if self.variant and run.variant != self.variant:
            return False
        if self.nemesis and self.nemesis not in run.nemesis:
            return False
        return not self.verdict or verdict_word(run.verdict) == self.verdict


class RunIndex:
    """Summaries of a store's runs, cached per run by the mtimes of the files they come from."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self._cache: dict[Path, tuple[tuple[tuple[int, ...], FileKey], RunSummary]] = {}
        self._lock = threading.Lock()
        self.judged = JudgedFiles(store)

    def runs(self) -> list[RunSummary]:
        """Every run, newest first."""
        found = find_run_dirs(self.store)
        summaries = []
        with self._lock:
            live = set()
            for run in found:
                if leads_out(run.path, self.store):
                    continue  # a run directory that is a link leading out is not listed, as a listing leaves it out
                live.add(run.path)
                files = files_key(run)  # a history edited since it was judged makes another summary
                key = (_mtimes(run), files)
                cached = self._cache.get(run.path)
                # (a run naming its maker is summarized afresh: the maker may die, and the run
                # become an abandoned one, without a file of it changing)
                if cached is None or cached[0] != key or not trusted(files) or os.path.lexists(run.maker):
                    cached = (key, _summarize_or_note(run, self.store, self.judged, files))
                    self._cache[run.path] = cached
                summaries.append(cached[1])
            gone = set(self._cache) - live
            for path in gone:
                del self._cache[path]
            self.judged.forget(gone)
        return summaries


def _mtimes(run: RunDir) -> tuple[int, ...]:
    """When the files a summary reads besides the history and events last changed (to the
    nanosecond: a float's microseconds can miss a rewrite within the same instant)."""
    times = []
    for path in (run.results, run.config, run.report, run.interrupted):
        try:
            times.append(path.stat().st_mtime_ns)
        except OSError:
            times.append(-1)
    return tuple(times)


def _summarize_or_note(run: RunDir, store: Path, judged: JudgedFiles, files: FileKey) -> RunSummary:
    """:func:`summarize`, or, should it fail on a file no one foresaw, a bare line saying why.

    One malformed run must never take the whole index (and so every page) down with it.
    """
    try:
        return summarize(run, store, judged, files)
    except Exception as e:  # the run is listed with its problem; the index goes on
        return RunSummary(relative=Path(os.path.relpath(run.path, store)).as_posix(), test=run.test_name,
                          name=run.path.name, started=_started(run.path.name), verdict=None, seed=None,
                          variant=NOT_STATED, nemesis=(), workload="", anomaly_counts=(),
                          has_report=run.report.is_file(), problem=f"cannot summarize this run: {type(e).__name__}: {e}")


def summarize(run: RunDir, store: Path, judged: JudgedFiles | None = None, files: FileKey | None = None) -> RunSummary:
    """One run's summary; a damaged results or config file is noted, not fatal. A verdict
    judged on other files than the run holds now is shown unchecked, as its report shows it
    (``judged``: the digests kept so far, ``files``: the key of the run's files, if known)."""
    problem = None
    read: dict[str, Any] | None = None  # results.json's object, when it is one (even an empty one)
    if os.path.lexists(run.results):  # in any form: a FIFO is refused at once, never waited on
        try:
            # as strict as the report: no NaN, bounded depth
            loaded = parse_json(read_results_bytes(run.results, store))
            if isinstance(loaded, dict):
                read = loaded
            else:
                problem = f"results.json unreadable: expected a JSON object, got {_json_kind(loaded)}"
        except ValueError as e:  # no regular file, too large, bad JSON or UTF-8, NaN, nesting without end
            problem = f"results.json unreadable: {e}"
    results = read or {}
    # results.json carries a copy of the config; test.yaml (slower to parse) only for unchecked runs
    config: TestConfig | None = None
    copy = results.get("config")
    try:
        if isinstance(copy, dict) and copy:
            config = config_from_dict(copy, "results.json: config")
        else:
            # A FIFO or a device is said at once: read_test_config would wait for a writer,
            # with the index locked. (A file swapped in after this look waits no longer than
            # read_source's bound.)
            unreadable = file_problem(run.config) if os.path.lexists(run.config) else None
            if unreadable is None and leads_out(run.config, store):  # never read, as the server never serves it
                unreadable = "a link leading outside the store"
            if unreadable is not None:
                raise ConfigError(str(run.config), None, unreadable)
            config = read_test_config(run.config)
    except ConfigError as e:
        source = "results.json config" if isinstance(copy, dict) and copy else "test.yaml"
        problem = problem or f"{source} unreadable: {e.problem}"
    counts: dict[str, int] = {}
    checkers = results.get("checkers")
    if isinstance(checkers, dict):
        for checker in checkers.values():
            if not isinstance(checker, dict):
                continue
            reported = checker.get("anomaly_counts")
            if isinstance(reported, dict):
                for kind, n in reported.items():
                    if isinstance(n, int):
                        counts[str(kind)] = counts.get(str(kind), 0) + n
            elif isinstance(checker.get("anomalies"), list):
                for anomaly in checker["anomalies"]:
                    kind = _text(anomaly.get("type")) if isinstance(anomaly, dict) else "untyped"
                    counts[kind] = counts.get(kind, 0) + 1
    verdict = results.get("valid")
    inconsistent = verdict_problem(results) if read is not None else None  # "{}" is no verdict either
    if inconsistent is not None:  # shown unchecked, as the report shows it
        verdict = None
        problem = problem or f"results.json: {inconsistent}"
    elif read is not None:
        changed = (judged if judged is not None else JudgedFiles(store)).changed(run, results, files)
        if changed is not None:  # a verdict on other files, shown unchecked as the report shows it
            problem = problem or (f"results.json: its verdict ({verdict_word(verdict)}) is not of the files the run "
                                  f"holds now ({changed}): shown unchecked until checked again")
            verdict = None
    marked = next((f"{path.name} is a link leading outside the store: the run is marked {what}, so it cannot be "
                   "judged valid" for path, what in ((run.interrupted, "interrupted"), (run.maker, "as being made"))
                   if leads_out(path, store)), None)
    interrupted = marked or unfinished_reason(run)
    verdict = shown_verdict(verdict, interrupted)
    problem = problem or interrupted  # why its verdict is unknown at best
    seed = config.seed if config is not None else results.get("seed")
    return RunSummary(
        relative=Path(os.path.relpath(run.path, store)).as_posix(),
        test=run.test_name,
        name=run.path.name,
        started=_started(run.path.name),
        verdict=verdict,
        seed=seed if _is_scalar(seed) else _text(seed),
        variant=config.variant if config is not None else _text(results.get("variant") or NOT_STATED),
        nemesis=config.nemesis if config is not None else (),
        workload=config.workload if config is not None else "",
        anomaly_counts=tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        has_report=run.report.is_file(),
        problem=problem,
    )


def read_results_bytes(path: Path, store: Path) -> bytes:
    """The bytes of a run's results file in ``store``, without a byte order mark, read once and
    at most :data:`floodmark.contracts.results.MAX_RESULTS_BYTES` of them; ValueError saying in a few words why not (not a
    regular file, a link out of the store, unreadable, too large)."""
    limit = results_file.MAX_RESULTS_BYTES
    try:
        fd, status = open_in_store(store.resolve(), path)
    except NotAFile:
        raise ValueError(file_problem(path) or "is not a regular file") from None
    except OutsideStore:
        raise ValueError("a link leading outside the store") from None
    except OSError as e:  # gone since it was seen, not ours to read, a symlink loop, a directory
        raise ValueError(file_problem(path) or describe_os_error(e)) from None
    try:
        with open(fd, "rb") as f:  # never more than the limit, even should it grow while it is read
            data = f.read(limit + 1) if status.st_size <= limit else b""
    except OSError as e:  # a disk error mid-read
        raise ValueError(f"cannot read: {describe_os_error(e)}") from None
    if status.st_size > limit or len(data) > limit:
        # (its report, which reads to the same bound, shows the run unchecked and says so too)
        raise ValueError(f"more than the {limit:,} bytes a results file may have")
    encoding = other_encoding(data)
    if encoding is not None:
        raise ValueError(encoding)
    return without_bom(data)


def _started(name: str) -> str:
    """The human-readable start time in a run directory's name, or the name itself."""
    stamp = _STAMP.match(name)
    return f"{stamp[1]}-{stamp[2]}-{stamp[3]} {stamp[4]}:{stamp[5]}:{stamp[6]}" if stamp else name


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _text(value: Any) -> str:
    """A scalar as text; a list or mapping where a scalar belongs (a damaged file) as its kind only.

    ``str()`` of a deeply nested value recurses, and a summary is no place for one anyway.
    """
    return str(value) if _is_scalar(value) else f"<{_json_kind(value)}>"


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return "a string" if isinstance(value, str) else "a boolean" if isinstance(value, bool) else "a number"
