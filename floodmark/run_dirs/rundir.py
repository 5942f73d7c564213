"""The run directory: everything one test run leaves behind, in one place.

    store/<test-name>/<timestamp>-s<seed>/
        test.yaml        the full configuration, seed included
        schedule.json    the fault schedule actually executed
        history.jsonl    the client and nemesis history
        events/<node>.jsonl   node events
        logs/<node>/     node logs (stdout/stderr, ZooKeeper log, ...)
        results.json     the checkers' verdict
        report.html      the HTML report
        digest.json      digests of the history, the node events and test.yaml, so check
                         refuses a run changed since and a replay can prove it was
                         byte-identical
        interrupted.json (a run stopped by Ctrl-C or SIGTERM) what it was doing when stopped
        .maker           (while the run is being made) the harness process making it
    store/latest -> the newest run directory
    store/<test-name>/.partial-<timestamp>-s<seed>-<n>@<owner>/
                     a run being made by an exploration or a shrink, which no reader
                     sees: renamed into place once finished (:func:`publish_run_dir`)

Everything that reads runs (check, report, serve, analyze, repro) goes through this module,
so the layout is written down once. What ``digest.json`` holds, and whether a verdict was
judged on the files a run holds now, is :mod:`floodmark.run_dirs.run_digests`'s.

A run that did not finish (interrupted, killed, still being made) keeps what it recorded,
so it can still be read and checked, unknown at best: :mod:`floodmark.run_dirs.unfinished_runs` says
why.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HISTORY = "history.jsonl"
CONFIG = "test.yaml"
SCHEDULE = "schedule.json"
RESULTS = "results.json"
REPORT = "report.html"
EVENTS = "events"
LOGS = "logs"
LATEST = "latest"
DIGEST = "digest.json"
INTERRUPTED = "interrupted.json"
MAKER = ".maker"

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# How create_run_dir names a run directory: <time>-s<seed>, or <time>.<n>-s<seed> beside another.
_RUN_NAME = re.compile(r"\d{8}T\d{6}(?:\.\d+)?-s\d+")


def repro_command(run_dir: Path | str) -> str:
    """The command that replays a run, as printed for a user to copy: the run directory's
    absolute path, quoted for the shell, so it works from any directory."""
    return f"floodmark repro {shlex.quote(str(Path(run_dir).resolve()))}"


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def history(self) -> Path:
        return self.path / HISTORY

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def schedule(self) -> Path:
        return self.path / SCHEDULE

    @property
    def results(self) -> Path:
        return self.path / RESULTS

    @property
    def report(self) -> Path:
        return self.path / REPORT

    @property
    def events(self) -> Path:
        return self.path / EVENTS

    @property
    def digest(self) -> Path:
        return self.path / DIGEST

    @property
    def interrupted(self) -> Path:
        return self.path / INTERRUPTED

    @property
    def maker(self) -> Path:
        return self.path / MAKER

    @property
    def logs(self) -> Path:
        return self.path / LOGS

    def node_logs(self, node: str) -> Path:
        return self.path / LOGS / node

    @property
    def test_name(self) -> str:
        return self.path.parent.name

    def recorded_files(self) -> list[Path]:
        """Every file the run recorded (all but the report, which is made from them): what a
        command reading the run must never write over."""
        files = [self.history, self.config, self.schedule, self.results, self.digest]
        for folder in (self.events, self.logs):
            for root, _, names in os.walk(folder):
                files += (Path(root) / name for name in names)
        return files


def safe_name(name: str) -> str:
    return _SAFE_NAME.sub("-", name).strip("-") or "test"


def store_problem(store: str | os.PathLike[str], test_name: str) -> str | None:
    """Why a run of ``test_name`` cannot be stored in ``store`` (a directory the caller made
    sure it can create things in), in one line naming the path; None when it can. What the
    store holds may be in the way: a file, or a symbolic link to nothing, where the test's
    runs go, or a directory where ``latest`` goes (a link is replaced, a directory is not)."""
    latest = Path(store) / LATEST
    if latest.is_dir() and not latest.is_symlink():
        return f"{latest}: a directory, where the store keeps its link to the newest run; move it away"
    base = Path(store) / safe_name(test_name)
    if base.is_symlink() and not base.exists():
        return f"{base}: a symbolic link to nothing, where the runs of test {test_name} go; move it away"
    if base.exists() and not base.is_dir():
        return f"{base}: not a directory, where the runs of test {test_name} go; move it away"
    return None


def create_run_dir(store: str | os.PathLike[str], test_name: str, seed: int, *, owner: str | None = None) -> RunDir:
    """Make a fresh run directory and point ``store/latest`` at it; a UsageError, with
    nothing made, when the store's contents are in the way (:func:`store_problem`).

    With ``owner`` (the making process's ``host:pid:start-time``), the run is made under a
    partial name instead (:data:`PARTIAL`, naming its owner), which no reader of the store
    sees, and ``latest`` is left alone: :func:`publish_run_dir` renames it into place once
    finished. Killed outright at any point, its owner leaves nothing a reader takes for a
    run, and whoever finds its owner gone may remove it (explore_store)."""
    from floodmark.errors import UsageError

    problem = store_problem(store, test_name)
    if problem is not None:  # (found only once made, it left a run directory and a traceback)
        raise UsageError(problem)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    base = Path(store) / safe_name(test_name)
    base.mkdir(parents=True, exist_ok=True)
    if owner is not None:
        path = _make_partial(base, f"{stamp}-s{seed}", owner)
    else:
        path = next(p for p in _run_names(base, stamp, seed) if not p.exists())
    (path / EVENTS).mkdir(parents=True)
    (path / LOGS).mkdir()
    if owner is None:
        update_latest(store, path)
    return RunDir(path)


def _run_names(base: Path, stamp: str, seed: int | str) -> Iterator[Path]:
    """A run's names in its test folder, in the order taken: ``<time>-s<seed>``, then (two
    runs of one seed in one second) ``<time>.1-s<seed>``, ``<time>.2-s<seed>``, ..."""
    yield base / f"{stamp}-s{seed}"
    for suffix in itertools.count(1):
        yield base / f"{stamp}.{suffix}-s{seed}"


# store/<test>/.partial-<time>-s<seed>-<n>@<owner>: a run being made (create_run_dir). The
# leading dot hides it from readers; the owner says when it is left over (its owner gone).
PARTIAL = ".partial-"


def _make_partial(base: Path, final: str, owner: str) -> Path:
    n = 0
    while True:  # mkdir, not exists(): two of one owner's runs may start in one second
        path = base / f"{PARTIAL}{final}-{n}@{owner}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1


def partial_owner(path: Path) -> str | None:
    """Who is making the partial run ``path`` (its owner token); None if it is no partial run."""
    if not path.name.startswith(PARTIAL):
        return None
    _, at, owner = path.name.partition("@")
    return owner if at else None


def partial_runs(store: str | os.PathLike[str]) -> list[tuple[Path, str]]:
    """Every partial run under a store (none of them a link), with its owner token."""
    return [(p, owner) for test in _entries(Path(store)) if _is_test_folder(test)
            for p in _entries(test) if (owner := partial_owner(p)) is not None and not p.is_symlink()]


def publish_run_dir(store: str | os.PathLike[str], run: RunDir,
                    before: Callable[[Path], None] = lambda final: None) -> RunDir:
    """Rename a finished partial run (``create_run_dir(..., owner=...)``) into place, under
    the name a run made at once would have had, and point ``store/latest`` at it: readers
    see it whole or not at all. ``before`` is told each name just before it is tried."""
    stem = run.path.name[len(PARTIAL):].partition("@")[0].rpartition("-")[0]  # <time>-s<seed>
    stamp, _, seed = stem.partition("-s")
    for path in _run_names(run.path.parent, stamp, seed):
        if path.exists():
            continue
        before(path)
        try:
            # Onto a name another run took meanwhile it fails (not empty), never
            # replacing it: a directory is replaced only if empty, and a run directory
            # is empty only for the instant create_run_dir makes it and its events/.
            os.rename(run.path, path)
            break
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
    update_latest(store, path)
    return RunDir(path)


def is_run_dir_name(name: str) -> bool:
    """Whether ``name`` is what :func:`create_run_dir` names a run directory, so that its
    folder's folder is the store it was made in (a copy named otherwise, anywhere, is not)."""
    return _RUN_NAME.fullmatch(name) is not None


def update_latest(store: str | os.PathLike[str], path: Path) -> None:
    """Point ``store/latest`` at ``path``, atomically. Several runs may finish at once into
    one store (``explore --jobs``): each builds its link under its own name, and the last
    rename wins."""
    latest = Path(store) / LATEST
    tmp = Path(store) / f".{LATEST}.{os.getpid()}.{threading.get_ident()}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(os.path.relpath(path, store))
    os.replace(tmp, latest)


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / HISTORY).is_file()


def repoint_latest(store: str | os.PathLike[str]) -> None:
    """After run directories were removed: point ``store/latest`` at the newest one left, or
    remove it if none is, so that it never names a directory that is gone."""
    latest = Path(store) / LATEST
    if latest.is_symlink() and not latest.exists():
        remaining = find_run_dirs(store)
        if remaining:
            update_latest(store, remaining[0].path)
        else:
            latest.unlink()


def discard(store: str | os.PathLike[str], run: RunDir) -> None:
    """Remove a run directory that never held a run (its test was refused before it began)."""
    import contextlib
    import shutil

    shutil.rmtree(run.path, ignore_errors=True)
    with contextlib.suppress(OSError):  # the test's folder, if this was its only run
        run.path.parent.rmdir()
    repoint_latest(store)


def find_run_dirs(store: str | os.PathLike[str]) -> list[RunDir]:
    """Every run directory under a store, newest first (by directory name's timestamp); not
    a partial one (:data:`PARTIAL`), being made or left half-made.

    A store is read while runs come and go: a test folder or run removed (or one that cannot
    be listed) while it is scanned is left out, not a failure of the whole scan."""
    runs = [RunDir(p) for test in _entries(Path(store)) if _is_test_folder(test)
            for p in _entries(test) if not p.name.startswith(PARTIAL) and _is_run_dir_quietly(p)]
    runs.sort(key=lambda r: r.path.name, reverse=True)
    return runs


def _entries(directory: Path) -> list[Path]:
    """A directory's entries in name order; none if it is gone or cannot be listed."""
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


def _is_test_folder(path: Path) -> bool:
    try:
        return path.is_dir() and not path.is_symlink()
    except OSError:
        return False


def _is_run_dir_quietly(path: Path) -> bool:
    try:
        return path.is_dir() and is_run_dir(path)
    except OSError:
        return False


def read_record(path: Path, limit: int, what: str, error: type[ValueError]) -> Any:
    """The JSON of a small file a run writes about itself (its digest, its interruption),
    read once and at most ``limit`` bytes of it; ``error`` naming the file when it is a FIFO
    or a device (named at once, never waited on), unreadable or no JSON."""
    from floodmark.errors import SourceError
    from floodmark.inputs.sources import special_file_problem

    problem = special_file_problem(path)
    if problem is not None:
        raise error(f"{path}: {problem}")
    try:
        return read_json_file(path, limit=limit, what=what)
    except SourceError as e:
        raise error(str(e)) from None


def read_object_record(path: Path, limit: int, what: str, error: type[ValueError],
                       expected: str = "an object") -> dict[Any, Any] | None:
    """:func:`read_record` of a record that is one JSON object (``expected`` says of what),
    or None when there is none; ``error`` naming the file when it is there but is not one."""
    if not os.path.lexists(path):
        return None
    data = read_record(path, limit, what, error)
    if not isinstance(data, dict):
        raise error(f"{path}: not {what} (expected {expected})")
    return data


def read_json_file(path: str | os.PathLike[str], *, limit: int, what: str) -> Any:
    """One of a run's small JSON files (``schedule.json``, ``digest.json``), parsed as
    :func:`~floodmark.inputs.plain_values.parse_json` does; every problem, reading or parsing, is a
    :class:`~floodmark.errors.SourceError` naming the file and saying it is not ``what``."""
    from floodmark.errors import SourceError
    from floodmark.inputs.plain_values import parse_json
    from floodmark.inputs.sources import read_source

    source = str(path)
    data = read_source(source, limit=limit)
    try:
        return parse_json(data)
    except ValueError as e:
        raise SourceError(source, 0, f"not {what}: {e}") from None
