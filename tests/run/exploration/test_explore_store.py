"""What an interrupted exploration leaves in the store (floodmark.run.explore_store): nothing
half-written, no empty test folder, and a cleanup a second interrupt cannot cut short."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from floodmark.backends.interrupts import interrupts_held, signals_deferred
from floodmark.run import explore
from floodmark.run.explore_store import (
    CLAIM_PREFIX,
    name_run,
    remove_killed_explorations,
    remove_unfinished_runs,
    run_claim_of,
)
from floodmark.run_dirs import rundir, unfinished_runs


def test_removing_the_only_unfinished_run_removes_its_empty_test_folder(tmp_path: Path) -> None:
    store = tmp_path / "store"
    unfinished = rundir.create_run_dir(store, "explore-default", 7)
    unfinished.history.write_text("")
    assert remove_unfinished_runs(str(store), "default", [7]) == [unfinished.path]
    assert sorted(p.name for p in store.iterdir()) == []  # no explore-default/, no dangling latest


def test_a_run_its_runner_marked_interrupted_is_unfinished_though_it_has_results(tmp_path: Path) -> None:
    store = tmp_path / "store"
    interrupted = rundir.create_run_dir(store, "explore-default", 7)
    interrupted.history.write_text("")
    interrupted.results.write_text('{"valid": "unknown", "interrupted": "interrupted (SIGINT) during x"}')
    unfinished_runs.write_interruption(interrupted, unfinished_runs.Interruption("the fault phase", 3.0, 2.0, 20.0, "SIGINT"))
    finished = rundir.create_run_dir(store, "explore-default", 8)
    finished.history.write_text("")
    finished.results.write_text('{"valid": false}')
    assert remove_unfinished_runs(str(store), "default", [7, 8]) == [interrupted.path]
    assert finished.path.is_dir()


def test_interrupts_held_during_a_block_do_not_cut_it_short() -> None:
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    finished = False
    with interrupts_held() as held:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # (a signal is handled between two bytecodes of the main thread)
        finished = True
    assert finished and held == [signal.SIGINT, signal.SIGTERM]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def _explore(store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "floodmark", "explore", "--runs", "6", "--jobs", "2", "--seed", "1",
         "--no-shrink", "--store", str(store)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )


def test_an_early_interrupt_of_explore_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    # It left an empty explore-default/ behind: its workers' unfinished runs were removed,
    # not the folder they had made for them.
    store = tmp_path / "store"
    process = _explore(store)
    deadline = time.monotonic() + 60
    while not list(store.glob("explore-default/*")):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err, err
    kept = list(store.glob("explore-default/*"))
    # (a seed that failed just before the interrupt is kept, and its folder with it)
    assert (store / "explore-default").exists() == bool(kept), sorted(p.name for p in store.iterdir())
    assert all(rundir.RunDir(p).results.is_file() for p in kept)


def _claim_file(store: Path, name: str, owner: str, seeds: range) -> None:
    (store / f"{CLAIM_PREFIX}{name}.json").write_text(json.dumps(
        {"owner": owner, "variant": "default", "first": seeds.start, "stop": seeds.stop}))


def test_a_run_in_progress_of_another_live_exploration_is_spared(tmp_path: Path) -> None:
    """Two explorations of overlapping seeds in one store: the cleanup after a killed one (or
    one's own, after an interrupt) removed the other's runs in progress, which have no
    verdict yet either."""
    store = tmp_path / "store"
    in_progress = rundir.create_run_dir(store, "explore-default", 5)  # the live one's, no verdict yet
    left = rundir.create_run_dir(store, "explore-default", 9)  # only the killed one's
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _claim_file(store, "dead", f"{socket.gethostname()}:{dead.stdout.strip()}:1", range(1, 10))
    _claim_file(store, "live", f"{socket.gethostname()}-elsewhere:123:456", range(5, 7))  # another host: alive
    assert remove_killed_explorations(str(store)) == [left.path]
    assert in_progress.path.is_dir() and not (store / f"{CLAIM_PREFIX}dead.json").exists()
    assert remove_unfinished_runs(str(store), "default", [5]) == []  # an interrupted one's own cleanup too
    (store / f"{CLAIM_PREFIX}live.json").unlink()
    assert remove_unfinished_runs(str(store), "default", [5]) == [in_progress.path]


def test_an_interrupt_during_a_deferring_block_lands_when_it_ends() -> None:
    reached_the_end = False
    with pytest.raises(KeyboardInterrupt), signals_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # (a signal not blocked would have landed by now)
        reached_the_end = True
    assert reached_the_end


def test_naming_a_run_is_never_cut_in_half(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C between writing the claim's temporary file and moving it into place left the
    temporary file behind for good (seen when a shrink was interrupted): now it waits."""
    real_replace = Path.replace

    def interrupted_replace(self: Path, target: Path) -> Path:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", interrupted_replace)
    run = tmp_path / "explore-default" / "20260101T000000-s7"
    with pytest.raises(KeyboardInterrupt):
        name_run(tmp_path, run)
    monkeypatch.undo()
    assert json.loads(run_claim_of(tmp_path, os.getpid()).read_text())["runs"] == [str(run)]
    assert [p.name for p in tmp_path.iterdir()] == [run_claim_of(tmp_path, os.getpid()).name]


def test_an_interrupted_exploration_leaves_no_pool_thread_behind(tmp_path: Path) -> None:
    """The pool's thread is waited for: left running, it raced the interpreter's exit, which
    wakes it through a pipe it may be closing ('Bad file descriptor', with a traceback)."""
    def interrupt(found: explore.Explored) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        explore.explore_local(explore.seeds_from(1000, 6), "truncate-to-hw", str(tmp_path), jobs=2,
                              on_result=interrupt)
    assert [t.name for t in threading.enumerate() if type(t).__name__ == "_ExecutorManagerThread"] == []


@pytest.mark.parametrize("name", [f"{CLAIM_PREFIX}1.json", f"{CLAIM_PREFIX}1-run.json"])
def test_a_fifo_named_as_a_claim_is_passed_over_not_waited_on(tmp_path: Path, name: str) -> None:
    """Reading claims opened a FIFO of a claim's name and waited for a writer: every
    exploration and shrink in the store hung before its first run, for ever."""
    store = tmp_path / "store"
    store.mkdir()
    fifo = store / name
    os.mkfifo(fifo)
    removed: list[list[Path]] = []
    reader = threading.Thread(target=lambda: removed.append(remove_killed_explorations(str(store))), daemon=True)
    reader.start()
    reader.join(10)
    hung = reader.is_alive()
    if hung:  # let the hung reader go
        with open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "w") as writer:
            writer.write("{}")
    assert not hung and removed == [[]]
    assert fifo.exists()  # not ours: left as it is
