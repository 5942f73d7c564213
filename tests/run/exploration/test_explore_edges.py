"""Exploration at its edges: a time budget too short for any run, stopping at the first
failure with seeds queued, a repro command copied into another directory, a store left as
it was found when nothing failed.

Before: ``--time-budget`` shorter than the pool's start ran no seed and exited 0 ("0 runs:
0 invalid, 0 unknown"), a pass for an exploration that tested nothing; ``--stop-on-first``
started seeds queued ahead after the failure (one more per worker); the printed repro
command named the run relative to the directory explore ran in (``floodmark repro
store/...`` fails anywhere else); and an exploration whose runs all passed left an empty
``explore-<variant>`` folder behind; and an exploration interrupted beside another on the
same seeds left its own half-written run behind and reported the other's runs as its own;
and a SIGTERM the kernel handed to one of the pool's threads waited for the next run to end;
and a worker killed outright (the OOM killer) ended the exploration: no seed started after it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from midrun_fixtures import stop_mid_run

from floodmark.cli import main
from floodmark.contracts.history import HistoryError
from floodmark.contracts.node_event_fields import NodeEventError
from floodmark.contracts.run_config import ConfigError
from floodmark.errors import SourceError
from floodmark.formats.edn import EdnError
from floodmark.owners import owner_alive, start_ticks
from floodmark.run import explore
from floodmark.run.explore import explore_local
from floodmark.run.worker_pool import MAX_BROKEN_POOLS


def test_a_time_budget_too_short_for_any_run_still_runs_the_first_seed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    code = main(["explore", "--runs", "3", "--seed", "1", "--jobs", "1", "--time-budget", "1e-9", "--no-shrink",
                 "--store", str(store)])
    err = capsys.readouterr().err
    assert "floodmark explore: 1 runs in" in err and code == 0, err
    assert "(2 of 3 seeds not run: --time-budget of 1e-09 s ran out)" in err, err
    assert not (store / "explore-default").exists()  # its run passed and was removed: its folder with it


def test_the_summary_says_what_stopped_an_exploration_early(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explore", "--variant", "truncate-to-hw", "--runs", "6", "--seed", "1000", "--jobs", "1",
                 "--stop-on-first", "--no-shrink", "--store", str(tmp_path / "store")])
    err = capsys.readouterr().err
    assert code == 1 and "1 runs in" in err, err
    assert "(5 of 6 seeds not run: --stop-on-first: an invalid run stopped it)" in err, err


def test_stop_on_first_starts_no_seed_after_the_failure_and_names_runs_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    found = explore_local(range(1000, 1006), "truncate-to-hw", "store", 1, stop_on_first=True)
    assert [f.seed for f in found] == [1000] and found[0].valid is False
    assert found[0].run_dir is not None and os.path.isabs(found[0].run_dir)
    assert found[0].repro == f"floodmark repro {tmp_path / 'store' / 'explore-truncate-to-hw'}/" \
                             f"{Path(found[0].run_dir).name}"
    monkeypatch.chdir("/")
    assert main(["repro", found[0].repro.split()[-1], "--store", str(tmp_path / "replays")]) == 1


def test_an_interrupted_exploration_settles_only_its_own_runs_beside_another_on_the_same_seeds(
        tmp_path: Path) -> None:
    """Another exploration, alive, runs the same seeds into the same store. Interrupted, this
    one must remove its own half-written run (before, it was spared, since the other claims
    its seed, and left for good) and report none of the other's runs as its own (before, the
    other's run in progress and its own half run were both printed as UNKNOWN findings)."""
    store = tmp_path / "store"
    folder = store / "explore-truncate-to-hw"
    folder.mkdir(parents=True)
    other = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        owner = f"{socket.gethostname()}:{other.pid}:{start_ticks(other.pid)}"
        assert owner_alive(owner)
        (store / f".explore-{other.pid}.json").write_text(json.dumps(
            {"owner": owner, "variant": "truncate-to-hw", "first": 1000, "stop": 1010}))
        theirs = folder / "20200101T000000-s1001"  # the other's run of seed 1001, in progress
        theirs.mkdir()
        (theirs / "test.yaml").write_text("name: explore-truncate-to-hw\n")
        explorer = subprocess.Popen([sys.executable, "-m", "floodmark", "explore", "--variant", "truncate-to-hw",
                                     "--runs", "10", "--seed", "1000", "--jobs", "1", "--no-shrink",
                                     "--store", str(store)], stderr=subprocess.PIPE, start_new_session=True)
        try:
            assert explorer.stderr is not None
            explorer.stderr.readline()  # the plan
            first = explorer.stderr.readline()  # seed 1000's finding: seed 1001 is starting now
            assert b"seed 1000 INVALID" in first, first
            later = time.time() + 60
            os.utime(theirs, (later, later))  # written to since this exploration began
            # Its worker held on its run of seed 1001 (not a fixed pause: see midrun_fixtures).
            _, ours = stop_mid_run(store, explorer, in_a_worker=True)
            assert ours.parent == folder and ours.name.startswith(".partial-") and "-s1001-" in ours.name, ours
            explorer.send_signal(signal.SIGTERM)
            _, err = explorer.communicate(timeout=60)
        finally:
            if explorer.poll() is None:
                os.killpg(explorer.pid, signal.SIGKILL)
                explorer.wait()
        assert explorer.returncode == 130, err
        assert b"UNKNOWN" not in err, err
        assert theirs.is_dir() and not ours.exists()
        runs = sorted(p.name for p in folder.iterdir())
        assert [r for r in runs if r.endswith("-s1001")] == [theirs.name], runs  # its own half run removed
        assert not list(store.glob(".explore-*-run.json"))
    finally:
        other.kill()
        other.wait()


def test_a_run_a_killed_worker_made_but_had_not_named_is_removed(tmp_path: Path) -> None:
    """A worker killed between making its run directory and naming it (CI caught a Ctrl-C
    there, right as the exploration began): its run is a partial one whose owner is gone,
    so it is removed; a partial run a live process makes is spared, and so is one made in
    place (no partial name) that no claim names: it may be another exploration's."""
    from floodmark.owners import owner_token
    from floodmark.run.explore import settle_unfinished_runs

    store = tmp_path / "store"
    folder = store / "explore-truncate-to-hw"
    gone = subprocess.Popen(["true"])
    gone.wait()
    left = folder / f".partial-20200101T000000-s1000-0@{socket.gethostname()}:{gone.pid}:1"
    running = folder / f".partial-20200101T000001-s1001-0@{owner_token()}"
    theirs = folder / "20200101T000002-s1001"
    for run in (left, running, theirs):
        run.mkdir(parents=True)
        (run / "test.yaml").write_text("name: explore-truncate-to-hw\n")
    found = settle_unfinished_runs(str(store), "truncate-to-hw", {1000, 1001}, keep_all=False,
                                   since=time.time() - 60, workers={gone.pid})
    assert found == [] and not left.exists() and running.is_dir() and theirs.is_dir()


def _slow_seed(seed: int, variant: str, store: str, keep_all: bool = False, workload: str = "queue") -> explore.Explored:
    """A seed whose run takes longer than an interrupt may wait (in a worker); it says in
    ``store`` that it has begun."""
    (Path(store) / f"began-{seed}").touch()
    time.sleep(30)
    return explore.Explored(seed, True, (), None, 0.0, 0.0)


def test_a_sigterm_taken_by_another_thread_still_stops_the_explorer_promptly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel hands a SIGTERM to whichever thread of the explorer it likes (the pool's
    own threads too: so it does when the main thread is stopped, as a loaded or frozen
    machine's may be), and Python runs the handler only in the main thread, once that runs
    again: waiting on the workers' results, it must not sleep until the next run ends."""
    monkeypatch.setattr(explore, "run_seed", _slow_seed)

    sent: list[float] = []

    def sigterm_from_another_thread() -> None:
        # Once both workers are on their seeds, the explorer waits on them (not after a
        # fixed pause: on a loaded machine they may not have begun by then).
        deadline = time.monotonic() + 180
        while not all((tmp_path / f"began-{seed}").exists() for seed in (1, 2)) and time.monotonic() < deadline:
            time.sleep(0.05)
        sent.append(time.monotonic())
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    threading.Thread(target=sigterm_from_another_thread, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        explore_local([1, 2], "default", str(tmp_path), jobs=2)
    assert all((tmp_path / f"began-{seed}").exists() for seed in (1, 2))  # signalled mid-run, not at the deadline
    assert time.monotonic() - sent[0] < 10  # not the 30 s a run takes
    assert multiprocessing.active_children() == []


def _first_to_claim(marker: Path) -> bool:
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def _seed_whose_worker_is_killed(seed: int, variant: str, store: str, keep_all: bool = False,
                                 workload: str = "queue") -> explore.Explored:
    """Seed 2's worker (or, among seeds over 1000, the first seed's) is killed outright (as
    the OOM killer kills) half-way through its run, which it had begun under a partial name;
    the other seeds pass."""
    from floodmark.owners import owner_token

    if _first_to_claim(Path(store) / "killed") if seed != 2 and seed > 1000 else seed == 2:
        partial = Path(store) / "explore-default" / f".partial-20200101T000000-s2-0@{owner_token()}"
        partial.mkdir(parents=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
    return explore.Explored(seed, True, (), None, 1.0, 1.0)


def test_a_worker_killed_on_its_own_costs_its_pools_seeds_and_the_exploration_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed outright breaks the process pool: submitting the next seed raised
    BrokenProcessPool out of the explorer (a traceback); then every seed the pool held was
    unknown and none started after them (one OOM kill ended a night's exploration). Now the
    seeds the pool held are unknown, saying why, the dead worker's partial run is gone, and
    the seeds after run in a new pool."""
    monkeypatch.setattr(explore, "run_seed", _seed_whose_worker_is_killed)
    found = explore_local(range(1, 40), "default", str(tmp_path), jobs=2)
    assert [f.seed for f in found] == list(range(1, 40))  # every seed reported, in order
    unknown = {f.seed: f.error for f in found if f.valid == "unknown"}
    assert 2 in unknown and len(unknown) <= 2, unknown  # seed 2's pool held two seeds at most
    assert set(unknown.values()) == {explore.WORKER_DIED}
    assert "no seed started after it" not in explore.WORKER_DIED
    assert all(f.valid is True for f in found if f.seed > 3)  # 3 at the latest waited in the broken pool
    assert explore.worker_died(found) and not explore.workers_kept_dying(found)
    assert not list((tmp_path / "explore-default").glob(".partial-*"))
    assert multiprocessing.active_children() == []


def test_floodmark_explore_says_a_worker_died_runs_every_seed_and_exits_unknown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(explore, "run_seed", _seed_whose_worker_is_killed)
    store = tmp_path / "store"
    assert main(["explore", "--runs", "40", "--jobs", "2", "--no-shrink", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "UNKNOWN (a worker process died outright" in err and "Traceback" not in err, err
    assert "floodmark explore: 40 runs in" in err and "seeds not run" not in err, err


def _seed_whose_worker_is_always_killed(seed: int, variant: str, store: str, keep_all: bool = False,
                                        workload: str = "queue") -> explore.Explored:
    """Every seed's worker is killed outright (a memory limit every run exceeds, say)."""
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("killed")


def test_pools_that_keep_breaking_stop_the_exploration_saying_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that die as soon as they run a seed must not make the explorer start pools
    for ever, reporting each seed unknown: it stops after MAX_BROKEN_POOLS in a row."""
    monkeypatch.setattr(explore, "run_seed", _seed_whose_worker_is_always_killed)
    started = time.monotonic()
    found = explore_local(range(1, 40), "default", str(tmp_path), jobs=1)
    assert time.monotonic() - started < 60
    # One seed in each pool (one job): the last pool's says the exploration stopped.
    assert [f.seed for f in found] == list(range(1, MAX_BROKEN_POOLS + 1))
    assert all(f.valid == "unknown" for f in found)
    assert [f.error for f in found] == [explore.WORKER_DIED] * (MAX_BROKEN_POOLS - 1) + [explore.WORKERS_KEPT_DYING]
    assert f"{MAX_BROKEN_POOLS} pools in a row broke" in explore.WORKERS_KEPT_DYING
    assert explore.worker_died(found) and explore.workers_kept_dying(found)
    assert multiprocessing.active_children() == []


def test_floodmark_explore_says_workers_kept_dying_and_exits_unknown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(explore, "run_seed", _seed_whose_worker_is_always_killed)
    assert main(["explore", "--runs", "40", "--jobs", "2", "--no-shrink", "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    # Each pool held one or two seeds (the second may find the pool already broken, and go to the next).
    runs = int(err.split("floodmark explore: ")[-1].split(" runs in")[0])
    assert MAX_BROKEN_POOLS <= runs <= 2 * MAX_BROKEN_POOLS, err
    assert (f"({40 - runs} of 40 seeds not run: worker processes kept dying outright, {MAX_BROKEN_POOLS} pools "
            "of them in a row with no seed finishing") in err, err
    assert f"{MAX_BROKEN_POOLS} pools in a row broke so with no seed finishing in between" in err, err


def _seed_whose_worker_is_killed_unless_a_multiple_of_3(seed: int, variant: str, store: str, keep_all: bool = False,
                                                         workload: str = "queue") -> explore.Explored:
    if seed % 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return explore.Explored(seed, True, (), None, 1.0, 1.0)


def test_a_seed_finishing_between_broken_pools_keeps_the_exploration_going(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only pools broken in a row, with no seed finishing in between, stop it: here two break,
    then a seed passes, and so on, MAX_BROKEN_POOLS never reached."""
    assert MAX_BROKEN_POOLS > 2
    monkeypatch.setattr(explore, "run_seed", _seed_whose_worker_is_killed_unless_a_multiple_of_3)
    found = explore_local(range(1, 13), "default", str(tmp_path), jobs=1)
    assert [f.seed for f in found] == list(range(1, 13))
    assert {f.seed: f.valid for f in found} == {seed: True if seed % 3 == 0 else "unknown" for seed in range(1, 13)}
    assert not explore.workers_kept_dying(found)
    assert multiprocessing.active_children() == []


def _seed_whose_worker_is_killed_then_slow(seed: int, variant: str, store: str, keep_all: bool = False,
                                           workload: str = "queue") -> explore.Explored:
    """Seed 1's worker is killed outright; each seed after says in ``store`` it has begun and
    takes longer than an interrupt may wait."""
    if seed == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return _slow_seed(seed, variant, store, keep_all, workload)


def test_an_interrupt_stops_the_pool_started_after_a_break(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM after a pool broke and another took its seeds stops the live pool's workers
    (not the broken one's, long gone) and reports what the broken one held."""
    monkeypatch.setattr(explore, "run_seed", _seed_whose_worker_is_killed_then_slow)
    done = threading.Event()
    sent: list[float] = []

    def sigterm_once_the_new_pool_runs() -> None:
        deadline = time.monotonic() + 180
        while not (tmp_path / "began-2").exists() and time.monotonic() < deadline and not done.is_set():
            time.sleep(0.05)
        if (tmp_path / "began-2").exists() and not done.is_set():
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGTERM)

    signaller = threading.Thread(target=sigterm_once_the_new_pool_runs, daemon=True)
    signaller.start()
    reported: list[explore.Explored] = []
    try:
        with pytest.raises(KeyboardInterrupt):
            explore_local([1, 2, 3], "default", str(tmp_path), jobs=1, on_result=reported.append)
    finally:
        done.set()
        signaller.join()
    assert sent and time.monotonic() - sent[0] < 10  # not the 30 s a run takes
    assert [(f.seed, f.error) for f in reported] == [(1, explore.WORKER_DIED)]
    assert not (tmp_path / "began-3").exists()
    assert multiprocessing.active_children() == []


class _TwoPartError(Exception):
    """An exception the pool cannot unpickle: by default the message alone is passed back to
    a constructor that needs two arguments."""

    def __init__(self, what: str, where: int) -> None:
        super().__init__(f"{what} at {where}")


def _seed_whose_run_raises(seed: int, config: object, store: str, keep_all: bool) -> explore.Explored:
    if seed == 2:
        raise NodeEventError(f"{store}/events/n3.jsonl", 491, "broker_state after the clean stop on line 490")
    if seed == 3:
        raise _TwoPartError("a bug", 7)
    return explore.Explored(seed, True, (), None, 1.0, 1.0)


@pytest.mark.parametrize("error", [SourceError("run/history.jsonl", 12, "what is wrong"),
                                   NodeEventError("run/events/n1.jsonl", 12, "what is wrong"),
                                   HistoryError("run/history.jsonl", 12, "what is wrong"),
                                   EdnError("run/history.edn", 12, "what is wrong"),
                                   ConfigError("run/test.yaml", "acks", "what is wrong"),
                                   ConfigError("run/test.yaml", None, "what is wrong")], ids=str)
def test_a_readers_error_crosses_a_process_boundary_whole(error: SourceError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert vars(again) == vars(error)


def test_a_run_that_raises_is_unknown_saying_why_and_the_exploration_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 69,386's run raised its checker's NodeEventError, which the pool could not
    unpickle: the pool broke and every seed it held was reported as a worker that "died
    outright", the real reason lost. Now the seed is unknown with its reason and the others run."""
    monkeypatch.setattr(explore, "_run_seed", _seed_whose_run_raises)
    found = explore_local(range(1, 9), "default", str(tmp_path), jobs=2)
    assert [f.seed for f in found] == list(range(1, 9))
    unknown = {f.seed: f.error for f in found if f.valid == "unknown"}
    assert set(unknown) == {2, 3}
    assert unknown[2] is not None and "NodeEventError" in unknown[2] and "n3.jsonl:491: broker_state" in unknown[2]
    assert unknown[3] == "_TwoPartError: a bug at 7"
    assert not explore.worker_died(found)
