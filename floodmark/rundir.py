"""The run directory: everything one test run leaves behind, in one place.

    store/<test-name>/<timestamp>-s<seed>/
        test.yaml        the full configuration, seed included
        schedule.json    the fault schedule actually executed
        history.jsonl    the client and nemesis history
        events/<node>.jsonl   node events
        logs/<node>/     node logs (stdout/stderr, ZooKeeper log, ...)
        results.json     the checkers' verdict
        report.html      the HTML report
        digest.json      (simulated runs) digests of the history and the node events, so a
                         replay can prove it was byte-identical
    store/latest -> the newest run directory

Everything that reads runs (check, report, serve, analyze, repro) goes through this module,
so the layout is written down once.
"""

from __future__ import annotations

import os
import re
import threading
import time
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

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


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
    def logs(self) -> Path:
        return self.path / LOGS

    def node_logs(self, node: str) -> Path:
        return self.path / LOGS / node

    @property
    def test_name(self) -> str:
        return self.path.parent.name


def safe_name(name: str) -> str:
    return _SAFE_NAME.sub("-", name).strip("-") or "test"


def create_run_dir(store: str | os.PathLike[str], test_name: str, seed: int) -> RunDir:
    """Make a fresh run directory and point ``store/latest`` at it."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    base = Path(store) / safe_name(test_name)
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"{stamp}-s{seed}"
    suffix = 1
    while path.exists():
        path = base / f"{stamp}.{suffix}-s{seed}"
        suffix += 1
    (path / EVENTS).mkdir(parents=True)
    (path / LOGS).mkdir()
    update_latest(store, path)
    return RunDir(path)


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
    """Every run directory under a store, newest first (by directory name's timestamp)."""
    root = Path(store)
    runs = [
        RunDir(p)
        for test in sorted(root.iterdir()) if test.is_dir() and not test.is_symlink()
        for p in test.iterdir() if p.is_dir() and is_run_dir(p)
    ] if root.is_dir() else []
    runs.sort(key=lambda r: r.path.name, reverse=True)
    return runs


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
