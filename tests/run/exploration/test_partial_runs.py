"""A run directory is made under a partial name that no reader sees, and renamed into place
only once its run is finished: a process killed outright at any point leaves either nothing
a reader sees or a whole run, and the next exploration or shrink in the store removes the
partial one whose owner is gone (however live explorations claim its seed).

Before: an exploration's worker killed between making its run directory and naming it
(explore_store.name_run), while another exploration alive claimed the same seed in the same
store, left a half-written run directory that no later exploration removed (spared for the
other's sake, then forgotten), and that analyze, serve and report read as a run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from floodmark.owners import start_ticks
from floodmark.pipeline.records import find_runs
from floodmark.run.explore import settle_unfinished_runs
from floodmark.run.explore_store import remove_killed_explorations
from floodmark.run_dirs.rundir import find_run_dirs

# A worker, as explore_local's are, killed outright right after its runner made its run
# directory and before it could name it.
_KILLED_BEFORE_NAMING = """
import os, signal, sys
from floodmark.run import explore
explore._names_its_runs = True
explore.name_run = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
explore.run_seed(1001, "truncate-to-hw", sys.argv[1])
"""
# One killed later, its history recorded, before its verdict.
_KILLED_BEFORE_ITS_VERDICT = """
import os, signal, sys
from floodmark.run import digest, explore
explore._names_its_runs = True
digest.save = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
explore.run_seed(1001, "truncate-to-hw", sys.argv[1])
"""


@pytest.fixture
def other_exploration(tmp_path: Path) -> Iterator[Path]:
    """Another exploration, alive, claiming seeds 1000-1009 of truncate-to-hw in the store."""
    store = tmp_path / "store"
    store.mkdir()
    other = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        owner = f"{socket.gethostname()}:{other.pid}:{start_ticks(other.pid)}"
        (store / f".explore-{other.pid}.json").write_text(json.dumps(
            {"owner": owner, "variant": "truncate-to-hw", "first": 1000, "stop": 1010}))
        yield store
    finally:
        other.kill()
        other.wait()


def killed_worker(store: Path, script: str = _KILLED_BEFORE_NAMING) -> int:
    worker = subprocess.Popen([sys.executable, "-c", script, str(store)],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert worker.wait(timeout=120) == -signal.SIGKILL
    assert [p for p in store.rglob("*") if p.is_dir()], "the worker made its run directory"
    return worker.pid


def test_no_reader_sees_the_run_a_killed_worker_left(other_exploration: Path) -> None:
    store = other_exploration
    killed_worker(store, _KILLED_BEFORE_ITS_VERDICT)
    assert list(store.rglob("history.jsonl"))
    assert find_run_dirs(store) == []  # serve, report
    assert list(find_runs(store)) == []  # analyze's ingest


def test_the_next_exploration_removes_it_though_another_live_one_claims_its_seed(other_exploration: Path) -> None:
    store = other_exploration
    killed_worker(store)
    assert remove_killed_explorations(str(store)) != []
    assert not (store / "explore-truncate-to-hw").exists()


def test_its_interrupted_explorer_removes_it_though_another_live_one_claims_its_seed(
        other_exploration: Path) -> None:
    store = other_exploration
    since = time.time() - 1
    pid = killed_worker(store)
    assert settle_unfinished_runs(str(store), "truncate-to-hw", {1001}, False, since, workers={pid}) == []
    assert not (store / "explore-truncate-to-hw").exists()


def test_a_spark_worker_removes_what_a_killed_worker_of_its_host_left(tmp_path: Path) -> None:
    """On Spark the driver cannot tell whether another host's worker lives, so each worker,
    at its first task, removes the partial runs of its own host's dead workers."""
    from floodmark.run import explore
    from floodmark.run_dirs.rundir import partial_runs

    store = tmp_path / "store"
    store.mkdir()
    killed_worker(store)
    assert partial_runs(store)  # left by a worker of this host, killed outright
    explore._cleaned_stores.discard(str(store))
    sigint = signal.getsignal(signal.SIGINT)
    try:
        found = explore._spark_task(7, "default", str(store), True, "queue")
    finally:  # (a task ignores SIGINT, as a Spark worker: not this test process's later tests)
        signal.signal(signal.SIGINT, sigint)
    assert found.valid is True and partial_runs(store) == []
    assert [str(run.path) for run in find_run_dirs(store)] == [found.run_dir]  # (kept: keep_all)


def _dead_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


def _finished(run: Path, valid: bool) -> Path:
    (run / "events").mkdir(parents=True)
    (run / "history.jsonl").write_text("")
    (run / "results.json").write_text(json.dumps({"valid": valid, "checkers": {}}))
    return run


def test_a_worker_killed_as_it_published_its_run_is_reported_once_the_rename_happened(tmp_path: Path) -> None:
    """The worker names the partial run and the name it is becoming, then renames: killed
    after the rename, the run is its own (reported); killed before, the name may be
    another's run, which it must not report (nor remove, had it passed)."""
    store = tmp_path / "store"
    folder = store / "explore-truncate-to-hw"
    folder.mkdir(parents=True)
    renamed, not_yet = _dead_pid(), _dead_pid()
    owner = f"{socket.gethostname()}:{{}}:1"
    published = _finished(folder / "20200101T000000-s1000", False)
    partial = _finished(folder / f".partial-20200101T000001-s1001-0@{owner.format(not_yet)}", False)
    anothers = _finished(folder / "20200101T000001-s1001", True)  # took the name meanwhile
    for pid, runs in ((renamed, [folder / f".partial-20200101T000000-s1000-0@{owner.format(renamed)}", published]),
                      (not_yet, [partial, anothers])):
        (store / f".explore-{pid}-run.json").write_text(json.dumps(
            {"owner": owner.format(pid), "runs": [str(run) for run in runs]}))
    found = settle_unfinished_runs(str(store), "truncate-to-hw", {1000, 1001}, False, time.time() - 60,
                                   workers={renamed, not_yet})
    assert [(f.seed, f.valid, f.run_dir) for f in found] == [(1000, False, str(published))]
    assert not partial.exists() and anothers.is_dir() and published.is_dir()
    assert not list(store.glob(".explore-*"))


# A shrink killed outright right after making a candidate's run directory, before naming it
# (explore_store.candidate_claim), or later, its history recorded, before its verdict.
_SHRINK_KILLED = """
import contextlib, os, signal, sys
from pathlib import Path
from floodmark.run import digest, shrink

def kill(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

@contextlib.contextmanager
def claim(store):
    yield lambda run: kill() if run is not None and sys.argv[3] == "before naming" else None

shrink.candidate_claim = claim
digest.save = kill
shrink.shrink_run(Path(sys.argv[1]), Path(sys.argv[2]), budget=5)
"""


@pytest.mark.parametrize("when", ["before naming", "before its verdict"])
def test_a_killed_shrink_leaves_no_candidate_a_reader_sees_and_the_next_start_removes_it(
        tmp_path: Path, when: str) -> None:
    from floodmark.run.explore import run_seed

    store = tmp_path / "store"
    found = run_seed(1000, "truncate-to-hw", str(store))
    assert found.valid is False and found.run_dir is not None
    shrink = subprocess.Popen([sys.executable, "-c", _SHRINK_KILLED, found.run_dir, str(store), when],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert shrink.wait(timeout=120) == -signal.SIGKILL
    folder = Path(found.run_dir).parent
    assert len(list(folder.iterdir())) == 2, "the candidate's run directory, beside the failure"
    assert [r.path for r in find_run_dirs(store)] == [Path(found.run_dir)]
    assert list(find_runs(store)) == [Path(found.run_dir)]
    assert remove_killed_explorations(str(store)) != []
    assert list(folder.iterdir()) == [Path(found.run_dir)]
