"""Exploration and shrinking on the simulator: findings kept, minimised (what each seed draws: test_swarm)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from midrun_fixtures import parent_of

from floodmark.cli import main
from floodmark.harness.schedule import Fault, Schedule
from floodmark.run import explore, worker_pool
from floodmark.run.explore import (
    Tally,
    explore_local,
    explore_spark,
    remove_unfinished_runs,
    run_seed,
    seeds_from,
)
from floodmark.run.explore_store import run_claim_of
from floodmark.run.shrink import Shrinker, load_failure, renumbered, shrink_run, split, without
from floodmark.run.swarm import swarm_config
from floodmark.run_dirs.rundir import create_run_dir


def test_a_tally_exits_like_a_run() -> None:
    tally = Tally()
    assert tally.exit_code == 0
    tally.unknown = 1
    assert tally.exit_code == 2
    tally.invalid = 1
    assert tally.exit_code == 1


def test_valid_runs_are_removed_and_failing_ones_kept_with_their_repro(tmp_path: Path) -> None:
    found = explore_local([1002, 1003], "truncate-to-hw", str(tmp_path), jobs=2)
    assert [f.seed for f in found] == [1002, 1003]
    for f in found:
        assert f.cpu_seconds > 0 and f.simulated_seconds == swarm_config(f.seed).time_limit
        if f.valid is True:
            assert f.run_dir is None
        else:
            assert f.run_dir is not None and Path(f.run_dir, "report.html").is_file()
            assert f.repro == f"floodmark repro {f.run_dir}"
    kept = list(tmp_path.glob("explore-*/*"))
    assert len(kept) == sum(f.valid is not True for f in found)


def test_the_explore_command_finds_a_flaw_and_exits_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explore", "--runs", "1", "--seed", "1002", "--variant", "truncate-to-hw", "--jobs", "1",
                 "--stop-on-first", "--no-shrink", "--store", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "INVALID" in err and "floodmark repro" in err
    assert main(["explore", "--runs", "0", "--store", str(tmp_path)]) == 254


def _explore_processes(store: Path) -> list[int]:
    """Processes (the explorer and its workers) whose command line names ``store``."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(store).encode() in cmdline and b"explore" in cmdline:
            found.append(int(pid))
    return found


def _workers_of(explorer: int, store: Path) -> list[int]:
    """The explorer's worker processes: its children that name ``store``. Not every process
    naming it: a worker's own child (its first run asks git for the code version) bears the
    worker's command line until it execs, which a loaded machine can make last."""
    return [pid for pid in _explore_processes(store) if pid != explorer and parent_of(pid) == explorer]


def _runs_in_progress(store: Path, workers: list[int]) -> dict[int, Path]:
    """The run directory each of ``workers`` has named (explore_store.name_run) and not yet
    finished: those it is mid-way through."""
    named = {}
    for pid in workers:
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
            run = Path(json.loads(run_claim_of(store, pid).read_text())["runs"][0])
            if (run / "history.jsonl").exists() and not (run / "results.json").exists():
                named[pid] = run
    return named


def test_sigterm_stops_the_explorer_and_every_worker(tmp_path: Path) -> None:
    """SIGTERM reaches only the explorer, not its forked workers: none may outlive it, nor
    any run they were half-way through. Stopped once each worker is mid-run (not after a
    fixed pause: on a loaded machine the workers may not have begun a run by then, and the
    test would prove nothing about half-written runs)."""
    store = tmp_path / "store"
    explorer = subprocess.Popen(
        [sys.executable, "-m", "floodmark", "explore", "--runs", "50", "--seed", "1", "--jobs", "2",
         "--no-shrink", "--store", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while len(workers := _workers_of(explorer.pid, store)) < 2 or len(_runs_in_progress(store, workers)) < 2:
            assert time.monotonic() < deadline and explorer.poll() is None, (workers, explorer.poll())
            time.sleep(0.05)
        assert len(workers) == 2  # --jobs 2
        half_runs = list(_runs_in_progress(store, workers).values())
        explorer.send_signal(signal.SIGTERM)
        _, err = explorer.communicate(timeout=60)
        assert explorer.returncode == 130 and b"interrupted" in err, err
        assert _gone(workers) == [] and _gone(_explore_processes(store)) == []
        # Nor any run directory its killed workers were half-way through (one may have
        # finished meanwhile: then it has its verdict), nor their folder, if that left it empty.
        assert [run for run in half_runs if run.exists() and not (run / "results.json").exists()] == []
        folder = store / "explore-default"
        assert [p for p in (folder.iterdir() if folder.exists() else []) if not (p / "results.json").exists()] == []
        assert not (store / "latest").is_symlink() or (store / "latest").exists()
    finally:
        if explorer.poll() is None:
            os.killpg(explorer.pid, signal.SIGKILL)
        for pid in _explore_processes(store):
            os.kill(pid, signal.SIGKILL)


def test_an_interrupted_exploration_removes_only_its_unfinished_runs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    other_seed = create_run_dir(store, "explore-default", 8)  # not among the interrupted seeds
    finished = create_run_dir(store, "explore-default", 7)  # an earlier exploration's kept failure
    for kept in (other_seed, finished):
        kept.history.write_text("")
    (finished.path / "results.json").write_text("{}")
    unfinished = create_run_dir(store, "explore-default", 7)  # store/latest names it
    assert remove_unfinished_runs(str(store), "default", [7]) == [unfinished.path]
    assert finished.path.is_dir() and other_seed.path.is_dir() and not unfinished.path.exists()
    assert (store / "latest").resolve() in (finished.path, other_seed.path)  # it named the removed run


def test_ddmin_helpers_split_and_renumber() -> None:
    faults = [Fault(i, "kill", "random", float(i), 1.0, i) for i in range(5)]
    assert [len(c) for c in split(faults, 2)] == [3, 2]
    assert [f.number for f in without(faults, faults[1:3])] == [0, 3, 4]
    assert [f.number for f in renumbered([faults[4], faults[2]], 9.0).faults] == [0, 1]


def test_a_shrunk_failure_still_fails_the_same_way_with_fewer_faults(tmp_path: Path) -> None:
    found = run_seed(1002, "truncate-to-hw", str(tmp_path / "store"))
    assert found.valid is False and found.run_dir is not None
    config, schedule, anomalies = load_failure(Path(found.run_dir))
    minimal, runs = shrink_run(Path(found.run_dir), tmp_path / "store", budget=5, out=io.StringIO())
    assert 1 <= runs <= 5
    shrunk_config, shrunk_schedule, shrunk_anomalies = load_failure(minimal)
    assert shrunk_anomalies & anomalies
    assert (len(shrunk_schedule.faults), shrunk_config.time_limit) <= (len(schedule.faults), config.time_limit)
    assert json.loads((minimal / "results.json").read_text())["valid"] is False


def test_a_shrinker_stops_at_its_budget(tmp_path: Path) -> None:
    shrinker = Shrinker(tmp_path, frozenset({"lost-write"}), budget=0)
    config = swarm_config(5)
    assert shrinker.still_fails(config, Schedule((), config.time_limit)) is None
    assert shrinker.attempts == []


@pytest.mark.spark
def test_seeds_run_as_spark_tasks_land_in_the_store(tmp_path: Path) -> None:
    found = explore_spark([11, 12], "default", str(tmp_path), "local[2]")
    assert [f.seed for f in found] == [11, 12]
    assert all(f.valid is True and f.run_dir is not None for f in found)
    assert len(list(tmp_path.glob("explore-default/*/history.jsonl"))) == 2


def test_explore_refuses_seeds_jobs_and_stores_it_cannot_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each refused before any worker starts, in one line, exit 254: a seed past what a run
    accepts (also once --runs carries it there), a worker process per --jobs beyond reason,
    a store that is a file."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = {
        ("--seed", str(2**70)): "--seed must be between 0 and 9223372036854775807, got 1180591620717411303424",
        ("--seed", "-1"): "--seed must be between 0 and 9223372036854775807, got -1",
        ("--seed", str(2**63 - 1), "--runs", "2"): "goes past the largest seed, 9223372036854775807",
        ("--jobs", "100000"): "--jobs must be between 1 and 1024 (a worker process each), got 100000",
        ("--store", str(a_file)): f"--store {a_file}: is a file, not a directory",
    }
    for extra, said in cases.items():
        code = main(["explore", "--runs", "1", "--no-shrink", *extra] + ([] if "--store" in extra else
                                                                         ["--store", str(tmp_path / "s")]))
        err = capsys.readouterr().err
        assert code == 254, (extra, err)
        assert said in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())


def test_seeds_are_worked_out_as_they_run_and_workers_never_outnumber_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = seeds_from(5, 10**12)  # a night's worth, in no memory to speak of
    assert len(seeds) == 10**12 and seeds[0] == 5 and seeds[-1] == 5 + 10**12 - 1
    pools: list[int] = []
    real_pool = worker_pool.ProcessPoolExecutor

    def recording_pool(max_workers: int, **options: object) -> object:
        pools.append(max_workers)
        return real_pool(max_workers=max_workers, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(worker_pool, "ProcessPoolExecutor", recording_pool)
    found = explore_local(seeds_from(1002, 1), "truncate-to-hw", str(tmp_path), jobs=64)
    assert [f.seed for f in found] == [1002]
    assert pools == [1]  # a forking pool starts all its workers at once: one seed, one worker


def test_sigterm_stops_a_shrink_leaving_no_half_run(tmp_path: Path) -> None:
    """As Ctrl-C: the candidate running is torn down and removed, the command says it was
    interrupted (130), and store/latest names a whole run."""
    store = tmp_path / "store"
    found = run_seed(1002, "truncate-to-hw", str(store))
    assert found.valid is False and found.run_dir is not None
    shrink = subprocess.Popen([sys.executable, "-m", "floodmark", "shrink", "--budget", "60", found.run_dir],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert shrink.stderr is not None
        first = shrink.stderr.readline()  # the first candidate is done: the next one is running
        assert first.startswith(b"floodmark shrink: try 1:"), first
        shrink.send_signal(signal.SIGTERM)
        _, err = shrink.communicate(timeout=60)
    finally:
        if shrink.poll() is None:
            os.killpg(shrink.pid, signal.SIGKILL)
    assert shrink.returncode == 130, err
    assert err.splitlines()[-1].startswith(b"floodmark shrink: interrupted; "), err  # and what it kept
    halves = [p for p in store.glob("*/*") if p.parent.name != "latest" and not (p / "results.json").exists()]
    assert halves == []
    assert (store / "latest" / "results.json").exists()


class Explorer:
    """``floodmark explore`` in a session of its own, its stderr read line by line as it comes."""

    def __init__(self, store: Path, *options: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "floodmark", "explore", "--jobs", "2", "--store", str(store), *options],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert self.process.poll() is None and time.monotonic() < deadline, f"no {text!r} in {self.lines}"
            time.sleep(0.1)

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        code = self.process.wait(timeout)
        self.reader.join(timeout)
        return code, "".join(self.lines)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)


def _gone(pids: list[int], timeout: float = 20) -> list[int]:
    """Those of ``pids`` still alive after ``timeout`` (none, once they have all exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()
                 and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
        if not alive:
            return []
        time.sleep(0.2)
    return alive


@pytest.mark.parametrize("moment", ["store ", "INVALID", "shrinking"])
def test_ctrl_c_stops_the_explorer_saying_what_it_kept(tmp_path: Path, moment: str) -> None:
    """Ctrl-C (SIGINT to the process group) early, mid-run or while shrinking: 130, no worker
    left, no traceback, one line saying what was interrupted and kept, every failure kept
    named and whole (it has its verdict), and nothing half-written left."""
    store = tmp_path / "store"
    explorer = Explorer(store, "--variant", "truncate-to-hw", "--runs", "4" if moment == "shrinking" else "40",
                        "--seed", "1000", "--shrink-budget", "40")
    try:
        explorer.wait_for(moment)
        workers = _workers_of(explorer.process.pid, store)
        os.killpg(explorer.process.pid, signal.SIGINT)
        code, err = explorer.finish()
    finally:
        explorer.kill()
    assert code == 130, (code, err)
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("floodmark explore: interrupted "), err
    assert ("shrinking" in last) == (moment == "shrinking") and ("kept" in last)
    assert _gone(workers) == []
    runs = list(store.glob("explore-*/*"))
    assert all((p / "results.json").exists() for p in runs), runs
    if moment == "shrinking":  # the smallest failing candidate so far, if any, is named and whole
        assert "floodmark repro " not in last or Path(last.rsplit(" ", 1)[1], "results.json").exists()
    else:
        failed = {p.name for p in runs if '"valid": false' in (p / "results.json").read_text()}
        reported = {line.rsplit("/", 1)[1].strip() for line in err.splitlines() if " INVALID " in line}
        assert failed <= reported, err
    assert not list(store.glob(".explore-*"))


def test_a_killed_explorer_takes_its_workers_and_the_next_removes_what_it_left(tmp_path: Path) -> None:
    """SIGKILL (to the explorer only): its workers die with it rather than run on into the
    store, and the next exploration removes the runs they left half-written, saying so."""
    store = tmp_path / "store"
    explorer = Explorer(store, "--runs", "40", "--seed", "1", "--no-shrink")
    try:
        deadline = time.monotonic() + 120
        while len(list(store.glob("explore-*/*/history.jsonl"))) < 2:  # both workers are mid-run
            assert time.monotonic() < deadline and explorer.process.poll() is None, explorer.lines
            time.sleep(0.1)
        workers = _workers_of(explorer.process.pid, store)
        explorer.process.kill()
        explorer.finish()
        assert _gone(workers, timeout=10) == []
    finally:
        explorer.kill()
        for pid in _explore_processes(store):
            os.kill(pid, signal.SIGKILL)
    half = [p for p in store.glob("explore-*/*") if not (p / "results.json").exists()]
    assert half
    code, err = Explorer(store, "--runs", "1", "--seed", "900", "--no-shrink").finish(timeout=180)
    assert code in (0, 1, 2), err
    assert f"removed {len(half)} unfinished run(s) that a killed exploration or shrink left" in err
    assert not any(p.exists() for p in half)
    assert not list(store.glob(".explore-*"))
    assert not (store / "latest").is_symlink() or (store / "latest").exists()


def test_runs_finished_but_not_yet_collected_are_reported_or_removed(tmp_path: Path) -> None:
    """When workers are killed, a run that had its verdict is reported if it failed and
    removed if it passed; a half-written one is removed; an earlier exploration's is left."""
    store = tmp_path / "store"
    earlier = create_run_dir(store, "explore-default", 5)
    (earlier.path / "results.json").write_text('{"valid": false}')
    os.utime(earlier.path, (1, 1))
    since = time.time() - 1
    failed, passed, half = (create_run_dir(store, "explore-default", seed) for seed in (5, 6, 7))
    (failed.path / "results.json").write_text('{"valid": false, "checkers": {"q": {"anomalies": [{"type": "lost"}]}}}')
    (passed.path / "results.json").write_text('{"valid": true}')
    found = explore.settle_unfinished_runs(str(store), "default", {5, 6, 7}, False, since)
    assert [(f.seed, f.valid, f.anomalies, f.run_dir) for f in found] == [(5, False, ("lost",), str(failed.path))]
    assert earlier.path.is_dir() and failed.path.is_dir() and not passed.path.exists() and not half.path.exists()


def test_explore_shrinks_its_own_failures_not_an_earlier_exploration_s(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    earlier = run_seed(1002, "truncate-to-hw", str(tmp_path))
    assert earlier.valid is False
    code = main(["explore", "--variant", "truncate-to-hw", "--runs", "1", "--seed", "1000", "--jobs", "1",
                 "--shrink-budget", "1", "--store", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1, err
    shrunk = [line for line in err.splitlines() if line.startswith("floodmark explore: shrinking ")]
    assert len(shrunk) == 1 and shrunk[0].endswith("-s1000"), err


def test_a_shrink_interrupted_before_its_runner_took_the_interrupt_leaves_no_half_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt can come before the runner handles them (as it plans) or after (as it
    checks): the candidate's half-written run directory goes too."""
    from floodmark.run.runner import Runner

    def interrupted_early(self: Runner) -> None:
        self.run_dir.config.write_text("half\n")
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as it raises here
        time.sleep(5)

    monkeypatch.setattr(Runner, "run", interrupted_early)
    shrinker = Shrinker(tmp_path, frozenset({"lost"}))
    with pytest.raises(KeyboardInterrupt):
        shrinker.still_fails(swarm_config(1), Schedule((), 30.0))
    assert list(tmp_path.glob("*/*")) == []


def _in_session(session: int) -> list[int]:
    """The processes of a session (a JVM and its Python workers too, whatever their names)."""
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            if os.getsid(pid) == session:
                found.append(pid)
    return found


def test_ctrl_c_stops_spark_tasks_and_its_jvm_reporting_what_they_found(tmp_path: Path) -> None:
    store = tmp_path / "store"
    explorer = Explorer(store, "--master", "local[2]", "--variant", "truncate-to-hw", "--runs", "12",
                        "--seed", "1000", "--no-shrink")
    try:
        deadline = time.monotonic() + 240
        while not list(store.glob("explore-*/*/results.json")):  # a task has finished a run
            assert time.monotonic() < deadline and explorer.process.poll() is None, explorer.lines
            time.sleep(0.2)
        os.killpg(explorer.process.pid, signal.SIGINT)
        code, err = explorer.finish(timeout=180)
        assert _gone(_in_session(explorer.process.pid), timeout=60) == []
    finally:
        explorer.kill()
    assert code == 130, err
    assert "Traceback" not in err
    assert err.splitlines()[-1].rsplit("\r", 1)[-1].startswith("floodmark explore: interrupted after "), err
    runs = list(store.glob("explore-*/*"))
    assert all((p / "results.json").exists() for p in runs), runs
    failed = {p.name for p in runs if '"valid": false' in (p / "results.json").read_text()}
    assert failed and all(name in err for name in failed), err


def test_an_interrupt_is_raised_between_waits_on_the_pool_never_inside_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Raised inside the pool's wait(), a SIGTERM can land while the wait's lock is released
    and not yet taken back: it then leaves as "RuntimeError: release unlocked lock" (seen once
    under load: the explorer exited 1, its workers and half-written runs left behind). The
    explorer notes it there and raises it between two waits, then cleans up as ever."""
    from concurrent import futures

    raised_inside: list[str] = []
    real_wait = futures.wait

    def wait_with_a_signal(fs: Any, timeout: float | None = None, return_when: str = futures.ALL_COMPLETED) -> Any:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # handled on this thread, inside the wait
            time.sleep(0.05)
            return real_wait(fs, timeout=timeout, return_when=return_when)
        except KeyboardInterrupt:
            raised_inside.append("wait")
            raise

    monkeypatch.setattr(explore, "wait", wait_with_a_signal)
    with pytest.raises(KeyboardInterrupt):
        explore_local(seeds_from(1, 4), "default", str(tmp_path), jobs=1)
    assert raised_inside == []
    assert [p for p in tmp_path.rglob("*") if p.is_dir() and p.name.startswith(".partial-")] == []
