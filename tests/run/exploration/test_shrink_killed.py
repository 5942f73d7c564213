"""A shrink killed outright (SIGKILL) leaves its running candidate half-written; the next
exploration or shrink in the store removes it, as it does an exploration's.

Before, the half-written candidate stayed in the store for good: a run directory with a
history and no verdict, under the failing run's own test and seed, and nothing removed it
(an exploration's claim covers only its exploring, not the shrinking that follows it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from midrun_fixtures import stop_mid_run

from floodmark.run import runner
from floodmark.run.explore import run_seed
from floodmark.run.explore_store import is_unfinished, remove_killed_explorations
from floodmark.run.shrink import ShrinkInterrupted, shrink_run
from floodmark.run_dirs.rundir import RunDir


def unfinished(store: Path) -> list[Path]:
    return [p for p in sorted(store.glob("*/*-s*")) if p.is_dir() and is_unfinished(RunDir(p))]


def test_a_killed_shrink_leaves_a_half_run_the_next_one_removes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    found = run_seed(1000, "truncate-to-hw", str(store))
    assert found.valid is False and found.run_dir is not None
    shrink = subprocess.Popen([sys.executable, "-m", "floodmark", "shrink", "--budget", "40", found.run_dir],
                              stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert shrink.stderr is not None
        first = shrink.stderr.readline()  # the first candidate is done: the next one is starting
        assert first.startswith(b"floodmark shrink: try 1:"), first
        # Killed on its next candidate (not after a fixed pause: see midrun_fixtures).
        _, candidate = stop_mid_run(store, shrink)
        os.killpg(shrink.pid, signal.SIGKILL)
        shrink.wait(timeout=30)
    finally:
        if shrink.poll() is None:
            os.killpg(shrink.pid, signal.SIGKILL)
            shrink.wait()
    left = unfinished(store)
    assert left == [candidate], "the candidate running when the shrink was killed"
    removed = remove_killed_explorations(str(store))
    assert sorted(removed) == [p.absolute() for p in left]
    assert unfinished(store) == [] and not list(store.glob(".explore-*"))
    assert Path(found.run_dir).is_dir()  # the failure it was shrinking is kept
    assert (store / "latest").resolve().is_dir()


def test_a_claim_naming_a_directory_outside_the_store_removes_nothing(tmp_path: Path) -> None:
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere" / "t" / "20260101T000000-s1"
    store.mkdir()
    elsewhere.mkdir(parents=True)
    inside = store / "t" / "not-a-run"
    inside.mkdir(parents=True)
    (store / ".explore-1-shrink.json").write_text(json.dumps({"owner": "nohost-here:x:", "runs": [str(elsewhere)]}))
    (store / ".explore-2-shrink.json").write_text(json.dumps({"owner": f"{os.uname().nodename}:notapid:",
                                                              "runs": [str(elsewhere), str(inside), "/"]}))
    assert remove_killed_explorations(str(store)) == []
    assert elsewhere.is_dir() and inside.is_dir()


def test_a_ctrl_c_as_a_candidate_is_made_leaves_no_half_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C landing while a candidate's runner was being made (its run directory made,
    the runner not yet handed back) left that directory behind, with no verdict."""
    store = tmp_path / "store"
    found = run_seed(1000, "truncate-to-hw", str(store))
    assert found.run_dir is not None
    made = runner.Runner.__init__

    def interrupted_init(self: runner.Runner, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)

    monkeypatch.setattr(runner.Runner, "__init__", interrupted_init)
    with pytest.raises(ShrinkInterrupted):
        shrink_run(Path(found.run_dir), store, budget=5)
    assert unfinished(store) == [] and not list(store.glob(".explore-*"))
    assert [p for p in store.glob("*/*-s*") if p.is_dir()] == [Path(found.run_dir)]
