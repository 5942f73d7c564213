"""Exploration: many seeds on the simulator, each drawing its own test (swarm testing).

Each seed draws its test's shape (:mod:`floodmark.run.swarm`: brokers, replication, fault
kinds, load, protocol), driven by the workload the exploration names (``queue`` unless told
``log-lin``), and runs on the simulator, which makes the run a pure function of the seed.

Seeds run in parallel worker processes (``--jobs``), or as Spark tasks (``--master``), each
landing in the store as a run directory; valid runs are removed unless asked to keep them,
failing ones stay, each printed with the one command that replays it. What fails is then
shrunk (:mod:`floodmark.run.shrink`) unless told not to.

A run is made under a partial name that no reader of the store sees, and renamed into place
once it has its verdict (:mod:`floodmark.run.explore_store`). Interrupted (Ctrl-C, SIGTERM),
the explorer kills its workers, reports the failing runs they had finished and removes the
partial ones they had not. Killed outright (SIGKILL), it takes its workers with it (they die
with their parent), and the next exploration or shrink in the store removes the partial runs
they leave, their owners gone. A worker killed on its own (the OOM killer, a signal meant
for it) breaks the pool: the seeds it and the others were running are reported unknown,
saying so, their partial runs are removed at once, and the exploration goes on in a new
pool (:mod:`floodmark.run.worker_pool`), unless pools keep breaking with no seed finishing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import io
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Container, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from floodmark.backends.cleanup import interruptible
from floodmark.backends.interrupts import interrupts_held, interrupts_noted, signals_deferred
from floodmark.contracts.results import Validity, read_results
from floodmark.harness.config import TestConfig
from floodmark.run.explore_store import (
    claim,
    name_run,
    remove_if_empty,
    remove_killed_explorations,
    remove_left_partial_runs,
    remove_unfinished_runs,
    runs_named_by,
    runs_of,
    seed_of,
    test_folder,
)
from floodmark.run.swarm import exploration_key, swarm_config
from floodmark.run.worker_pool import MAX_BROKEN_POOLS, WorkerPool
from floodmark.run_dirs.rundir import RunDir, repoint_latest, repro_command

__all__ = ["claim", "remove_killed_explorations", "remove_unfinished_runs"]  # (their home: run.explore_store)

@dataclass(frozen=True)
class Explored:
    """One explored seed: its verdict, the anomaly types found, and where its run is kept."""

    seed: int
    valid: Validity
    anomalies: tuple[str, ...]
    run_dir: str | None  # kept (failing, or --keep-all), else None
    cpu_seconds: float
    simulated_seconds: float
    error: str | None = None

    @property
    def repro(self) -> str:
        return repro_command(self.run_dir) if self.run_dir else f"(seed {self.seed}: run not kept)"


def run_seed(seed: int, variant: str, store: str, keep_all: bool = False, workload: str = "queue") -> Explored:
    """Run one seed's swarm test, driven by ``workload``, on the simulator and judge it (in a
    worker process)."""
    # What a run says on the way (a failed fault, a warning) is in its run directory; the
    # exploration's own output is its findings and its progress.
    logger = logging.getLogger("floodmark")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        return _run_seed(seed, swarm_config(seed, variant, workload=workload), store, keep_all)
    except Exception as e:  # noqa: BLE001 - a bug of the run's; as text, for an exception may not unpickle
        # (one whose constructor the pool cannot call breaks the pool: every seed "died")
        return Explored(seed, "unknown", (), None, 0.0, 0.0, f"{type(e).__name__}: {e}")
    finally:
        logger.setLevel(level)


def _run_seed(seed: int, config: TestConfig, store: str, keep_all: bool) -> Explored:
    from floodmark.run.runner import Runner

    started = time.process_time()
    # Made where no reader sees it, and published once it has its verdict (explore_store).
    runner = Runner(config, store, out=io.StringIO(), check=True, report=False, partial=True)
    partial = runner.run_dir.path
    try:
        if _names_its_runs:  # a local worker: if it is killed, its explorer knows which run was its
            name_run(store, partial)
        outcome = runner.run()
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # the worker lives on: its partial run would stay
        raise
    valid = outcome.valid if outcome.valid is not None else "unknown"
    keep = keep_all or valid is not True
    if keep:
        runner.publish((lambda final: name_run(store, partial, final)) if _names_its_runs else lambda final: None)
        if valid is not True:
            _write_report(runner.run_dir.path)
    else:
        shutil.rmtree(partial, ignore_errors=True)
    # Its repro command names it whole: it is copied into a shell in another directory.
    kept = os.path.abspath(runner.run_dir.path) if keep else None
    return Explored(seed, valid, _anomaly_types(runner.run_dir.path), kept,
                    round(time.process_time() - started, 3), config.time_limit, outcome.error)


def _anomaly_types(path: Path) -> tuple[str, ...]:
    anomalies: set[str] = set()
    try:
        for result in read_results(RunDir(path).results).get("checkers", {}).values():
            anomalies.update(str(a.get("type")) for a in result.get("anomalies", []) if isinstance(a, dict))
    except (OSError, ValueError, AttributeError):
        pass
    return tuple(sorted(anomalies))


def _write_report(path: Path) -> None:
    from floodmark.reports.report import write_report

    with contextlib.suppress(Exception):  # a report must never cost a finding
        write_report(path)


@dataclass
class Tally:
    """What an exploration has found so far."""

    runs: int = 0
    invalid: int = 0
    unknown: int = 0
    cpu_seconds: float = 0.0
    simulated_seconds: float = 0.0

    def add(self, found: Explored) -> None:
        self.runs += 1
        self.invalid += found.valid is False
        self.unknown += found.valid not in (True, False)
        self.cpu_seconds += found.cpu_seconds
        self.simulated_seconds += found.simulated_seconds

    @property
    def exit_code(self) -> int:
        return 1 if self.invalid else 2 if self.unknown else 0

    def line(self, planned: int, elapsed: float) -> str:
        speed = self.simulated_seconds / self.cpu_seconds if self.cpu_seconds else 0.0
        return (f"[explore {elapsed:5.0f}s] {self.runs}/{planned} runs  invalid {self.invalid}  "
                f"unknown {self.unknown}  {self.runs / max(elapsed, 1e-9):.2f} runs/s  "
                f"{speed:.1f} simulated s per CPU s")


def explore_local(seeds: Sequence[int], variant: str, store: str, jobs: int, *, workload: str = "queue",
                  keep_all: bool = False, time_budget: float | None = None, stop_on_first: bool = False,
                  on_result: Callable[[Explored], None] | None = None) -> list[Explored]:
    """Run seeds across ``jobs`` worker processes until done, out of time or (optionally) a failure.

    The first seed runs whatever the time budget (an exploration that ran nothing would pass
    for one that found nothing), and no seed starts once a failure stops the exploration: a
    worker is given its next seed when it is done with one, not queued ahead (the ones
    running are let finish, and reported). Results come back in seed order of submission,
    whatever order they finish in.

    A worker that dies outright costs the seeds its pool held (unknown, :data:`WORKER_DIED`);
    the rest run in a new pool, unless :data:`MAX_BROKEN_POOLS` broke in a row with no seed
    finishing (the last one's seeds say so: :data:`WORKERS_KEPT_DYING`, and no seed starts after).
    """
    exploration = exploration_key(variant, workload)
    started, started_at = time.monotonic(), time.time()
    results: dict[int, Explored] = {}
    pending: dict[Future[Explored], int] = {}
    queue: Iterator[int] = iter(seeds)
    stopping = False
    # fork: workers inherit the imported modules, so a run starts in milliseconds.
    import multiprocessing

    # A forking pool starts every worker at once: never more than there are seeds to run.
    workers = max(1, min(jobs, len(seeds)))
    with interruptible(), WorkerPool(workers, multiprocessing.get_context("fork"), _worker_setup,
                                     (os.getpid(),)) as pool:
        def submit() -> bool:
            out_of_time = time_budget is not None and time.monotonic() - started >= time_budget
            if stopping or pool.gave_up or (out_of_time and (pending or results)):
                return False
            seed = next(queue, None)
            if seed is None:
                return False
            try:
                pending[pool.submit(run_seed, seed, variant, store, keep_all, workload)] = seed
            except BrokenProcessPool:  # it found its pool broken once too often, here: the seed is not run
                return False
            return True

        def fill() -> None:
            # Each free worker is given a seed: one per seed handed back, a whole pool's
            # worth once a broken pool's seeds are.
            while len(pending) < workers and submit():
                pass

        try:
            with signals_deferred():  # the first submit forks every worker
                fill()
            # An interrupt is raised between two waits, never inside one (see interrupts_noted:
            # it left as a RuntimeError, exit 1, workers and half-written runs behind); the
            # wait's timeout bounds how late.
            with interrupts_noted() as interrupts:
                while pending and not interrupts:
                    done, _ = wait(pending, timeout=INTERRUPT_POLL, return_when=FIRST_COMPLETED)
                    broken = [f for f in done if not f.cancelled() and isinstance(f.exception(), BrokenProcessPool)]
                    if broken:  # a worker died outright: the pool ends every seed it held
                        for future in broken:  # its workers gone, every seed it held is done: all told at once
                            pool.broke(future)
                        done = {f for f in pending if f.done()}
                        remove_left_partial_runs(store)  # the dead workers' half-made runs: nobody will finish them
                    for future in sorted(done, key=pending.__getitem__):
                        seed = pending.pop(future)
                        try:
                            found = future.result()
                        except BrokenProcessPool:
                            found = Explored(seed, "unknown", (), None, 0.0, 0.0,
                                             WORKERS_KEPT_DYING if pool.gave_up else WORKER_DIED)
                        except (Exception, asyncio.CancelledError) as e:  # a crashed worker is an unknown run
                            found = Explored(seed, "unknown", (), None, 0.0, 0.0, f"{type(e).__name__}: {e}")
                        results[seed] = found
                        if on_result is not None:
                            on_result(found)
                        if stop_on_first and found.valid is False:
                            stopping = True
                    fill()
            if interrupts:
                raise KeyboardInterrupt(f"signal {interrupts[0]}")
            remove_if_empty(test_folder(store, exploration))  # every run passed and none was kept
        except KeyboardInterrupt:
            # A SIGTERM reaches only this process (a Ctrl-C, the whole group, but workers
            # ignore it): stop the workers, so that none outlives the exploration, report
            # what they had finished and take away what they had not; a second interrupt
            # must not cut that short (workers left running, a store half-cleaned).
            with interrupts_held():
                children = multiprocessing.active_children()
                for child in children:
                    child.kill()
                for child in children:
                    child.join()
                # Its threads end at once, the workers gone; waited for, so none is left to
                # race the interpreter's exit (which wakes a pool's thread through a pipe
                # that thread may be closing: 'Bad file descriptor', with a traceback).
                pool.shutdown(cancel_futures=True)  # the live pool's (a broken one's were waited for as it broke)
                for found in settle_unfinished_runs(store, exploration, set(pending.values()), keep_all, started_at,
                                                    workers={child.pid for child in children if child.pid}):
                    if on_result is not None:
                        on_result(found)
            raise
    remove_killed_explorations(store)  # the workers' claims on the runs they were on (all finished)
    return [results[s] for s in sorted(results)]  # seeds run in order: submission order is seed order


# Which seed's worker died the pool cannot tell: every seed it held is unknown, saying so.
WORKER_DIED = ("a worker process died outright (killed by a signal or the OOM killer) while this seed ran "
               "or waited in its pool, so it did not finish (the pool cannot tell whose worker died: "
               "every seed it held is unknown)")
# The seeds of the last pool, when pools kept breaking (worker_pool.MAX_BROKEN_POOLS).
WORKERS_KEPT_DYING = (f"{WORKER_DIED}; {MAX_BROKEN_POOLS} pools in a row broke so with no seed finishing "
                      "in between: the exploration stopped, no seed started after it")


def worker_died(found: Sequence[Explored]) -> bool:
    """Whether a worker died outright during the exploration that ``found`` these."""
    return any(f.error in (WORKER_DIED, WORKERS_KEPT_DYING) for f in found)


def workers_kept_dying(found: Sequence[Explored]) -> bool:
    """Whether worker pools broke too often in a row for the exploration that ``found``
    these to go on (the seeds after were not run)."""
    return any(f.error == WORKERS_KEPT_DYING for f in found)


_PR_SET_PDEATHSIG = 1  # prctl(2)
# How long the explorer's main thread waits for a result before it looks again. A SIGTERM
# may be handed by the kernel to any of its threads (the pool's own, too: it prefers the
# main thread, not when that one is stopped or has a signal pending), and its handler runs
# only once the main thread runs Python again: without a timeout, when the next run ends,
# which on a loaded machine can be minutes away.
INTERRUPT_POLL = 0.5
_names_its_runs = False  # True in a local worker (see explore_store.name_run)


def _worker_setup(explorer: int) -> None:
    """In each worker: die with the explorer, even killed outright (a worker left behind
    would go on writing runs into the store), and leave interrupts to it: a Ctrl-C reaches
    the whole process group, and the explorer stops its workers itself."""
    global _names_its_runs
    _names_its_runs = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):  # Linux only
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != explorer:  # the explorer died before the line above
        os._exit(1)


def settle_unfinished_runs(store: str, exploration: str, seeds: Container[int], keep_all: bool,
                           since: float, workers: Container[int] | None = None) -> list[Explored]:
    """After the workers running ``seeds`` were killed: remove what they left half-written,
    and the valid runs they had not yet removed (unless keeping all); the rest had their
    verdict, which is returned, so that a failure found just before an interrupt is reported.

    What they left half-made are partial runs whose owner is gone (explore_store.remove_left_partial_runs).
    Which finished runs were theirs: those the local worker processes ``workers`` named (see
    explore_store.name_run), and no other (another exploration may be running the same
    seeds into the same store); without ``workers`` (Spark tasks, on other hosts), the runs
    of ``seeds`` written since ``since``."""
    if workers is not None:
        named, claims = runs_named_by(store, workers)  # before their partial runs go: see there
        remove_left_partial_runs(store)
        runs = [run for run in named if seed_of(run) in seeds and run.is_dir()]  # each published whole
        for path in claims:
            path.unlink(missing_ok=True)
    else:
        remove_left_partial_runs(store)
        remove_unfinished_runs(store, exploration, seeds)
        runs = [path for path in runs_of(store, exploration, seeds) if path.stat().st_mtime >= since]
    finished = []
    for path in runs:
        try:
            valid = read_results(RunDir(path).results).get("valid", "unknown")
        except (OSError, ValueError, AttributeError):
            valid = "unknown"
        if valid is True and not keep_all:
            shutil.rmtree(path, ignore_errors=True)
            continue
        seed = seed_of(path)
        assert seed is not None  # runs_of matched it
        finished.append(Explored(seed, valid if valid in (True, False) else "unknown", _anomaly_types(path),
                                 str(path), 0.0, 0.0))
    remove_if_empty(test_folder(store, exploration))
    repoint_latest(store)
    return finished


def explore_spark(seeds: Sequence[int], variant: str, store: str, master: str, *, workload: str = "queue",
                  keep_all: bool = True, on_result: Callable[[Explored], None] | None = None) -> list[Explored]:
    """Run seeds as Spark tasks, one per seed; every run lands in ``store`` (shared by the
    executors) for ``floodmark analyze`` to ingest.

    Interrupted, it cancels the tasks, stops the session (and a local master's JVM), removes
    the runs left half-written and passes the finished ones to ``on_result`` (as it does
    every run once all are done). The tasks are collected on another thread, so an
    interrupt lands here and not inside a Py4J call (which would log it with a traceback)."""
    from floodmark.pipeline.session import get_session

    session = get_session(master, app_name="floodmark-explore")
    context = session.sparkContext
    absolute, started_at = os.path.abspath(store), time.time()
    rdd = context.parallelize(seeds, numSlices=max(1, min(len(seeds), context.defaultParallelism * 4)))
    collected: list[list[Explored]] = []
    failed: list[BaseException] = []

    def collect() -> None:
        try:
            collected.append(rdd.map(lambda seed: _spark_task(seed, variant, absolute, keep_all, workload)).collect())
        except Exception as e:  # noqa: BLE001 - raised again on the main thread
            failed.append(e)

    collector = threading.Thread(target=collect, name="floodmark-explore-collect", daemon=True)
    try:
        with interruptible():
            collector.start()
            with interrupts_noted() as interrupts:  # raised between two joins, as in explore_local
                while collector.is_alive() and not interrupts:
                    collector.join(INTERRUPT_POLL)
            if interrupts:
                raise KeyboardInterrupt(f"signal {interrupts[0]}")
    except KeyboardInterrupt:
        with interrupts_held():  # a second interrupt must not cut the cleanup short
            with contextlib.suppress(Exception):
                context.cancelAllJobs()
            collector.join(30)
            with contextlib.suppress(Exception):
                session.stop()
            for found in settle_unfinished_runs(absolute, exploration_key(variant, workload), seeds, keep_all,
                                                started_at):
                if on_result is not None:
                    on_result(found)
        raise
    if failed:
        raise failed[0]
    results = sorted(collected[0], key=lambda f: f.seed)
    if on_result is not None:
        for found in results:
            on_result(found)
    return results


_cleaned_stores: set[str] = set()  # the stores this Spark worker has rid of its host's dead workers' partial runs


def _spark_task(seed: int, variant: str, store: str, keep_all: bool, workload: str) -> Explored:
    """A seed as a Spark task: a Ctrl-C reaches the Python workers too, but the driver
    cancels the tasks itself (a worker dying of it only makes the executor log a crash).

    A worker killed outright leaves its run half-made, under a partial name naming it; only
    a process of the same host can tell that its maker is gone (the driver's cleanup leaves
    other hosts' alone), so each worker, at its first task, removes what dead workers of its
    host left in the store."""
    with contextlib.suppress(ValueError):  # not the main thread: nothing to change
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if store not in _cleaned_stores:
        _cleaned_stores.add(store)
        remove_left_partial_runs(store)
    return run_seed(seed, variant, store, keep_all, workload)


def print_finding(found: Explored, out: TextIO) -> None:
    if found.valid is True:
        return
    word = "INVALID" if found.valid is False else "UNKNOWN"
    what = ", ".join(found.anomalies) or found.error or "no verdict"
    print(f"floodmark explore: seed {found.seed} {word} ({what}): {found.repro}", file=out, flush=True)


MAX_SEED = 2**63 - 1  # as for floodmark run: a seed fits the history's 64-bit integers


def seeds_from(first: int, runs: int) -> range:
    """Seeds ``first``, ``first + 1``, ...: ``runs`` of them, worked out as they are run (a
    night's exploration may ask for more seeds than there is memory to list), each within
    the range a run accepts (ValueError naming the bound otherwise)."""
    if not 0 <= first <= MAX_SEED:
        raise ValueError(f"--seed must be between 0 and {MAX_SEED}, got {first}")
    if first + runs - 1 > MAX_SEED:
        raise ValueError(f"--seed {first} with --runs {runs} goes past the largest seed, {MAX_SEED}")
    return range(first, first + runs)


def summary(tally: Tally, elapsed: float) -> str:
    return (f"{tally.runs} runs in {elapsed:.0f} s: {tally.invalid} invalid, {tally.unknown} unknown; "
            f"{tally.simulated_seconds:.0f} simulated s in {tally.cpu_seconds:.0f} CPU s")


def progress_printer(planned: int, out: TextIO, every: float = 10.0) -> tuple[Tally, Callable[[Explored], None]]:
    """A tally, and the callback that updates it and prints findings and a progress line."""
    tally = Tally()
    started = time.monotonic()
    last = [0.0]
    tty = out.isatty()

    def on_result(found: Explored) -> None:
        tally.add(found)
        if found.valid is not True:
            if tty:
                out.write("\r\x1b[K")
            print_finding(found, out)
        now = time.monotonic() - started
        if tty:
            out.write("\r\x1b[K" + tally.line(planned, now))
            out.flush()
        elif now - last[0] >= every or tally.runs == planned:
            last[0] = now
            print(tally.line(planned, now), file=out, flush=True)

    return tally, on_result


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
