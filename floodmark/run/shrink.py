"""Shrinking: the smallest test that still fails the same way.

A failing simulated run is a pure function of its configuration and fault schedule, so a
smaller one can be searched for by running candidates: fewer faults (delta debugging,
Zeller's ddmin, over the schedule's faults), then a shorter test (ending soon after the last
fault), shorter faults, fewer brokers, a lighter load. A candidate is kept when it is still
invalid with at least one of the original anomaly types; a different bug is not the same
failure. Every change of the schedule changes the whole interleaving, so a smaller schedule
may stop failing where a larger one did: ddmin is built for exactly that. The reductions are
applied again and again until a whole round of them finds nothing smaller (each one opens the
way for another: halved faults end sooner, so the test can end sooner), so the result is
minimal with respect to them, and shrinking it again finds nothing (unless the budget ran out).
A candidate already tried is not run again.

The result is a run directory like any other (``test.yaml``, ``schedule.json``, history,
report), so ``floodmark repro`` replays the minimal failure, and its configuration and
schedule are what the regression corpus keeps.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from floodmark.backends.interrupts import signals_deferred
from floodmark.contracts.results import read_results, results_run_id, verdict_problem, verdict_word
from floodmark.errors import UsageError
from floodmark.harness.config import TestConfig
from floodmark.harness.schedule import Fault, Schedule
from floodmark.inputs.sources import file_problem
from floodmark.run.argument_checks import store_of_run
from floodmark.run.assemble import make_nemeses
from floodmark.run.explore_store import candidate_claim, remove_killed_explorations
from floodmark.run.replayed_test import replayed_test
from floodmark.run_dirs import run_digests, rundir

SETTLE = 5.0  # seconds of workload kept after the last fault ends


@dataclass
class Attempt:
    """One candidate run: what it was, whether it still failed the same way, where it is."""

    config: TestConfig
    schedule: Schedule
    failed: bool
    anomalies: frozenset[str]
    run_dir: Path


Candidate = tuple[TestConfig, tuple[Fault, ...], float]


def candidate(config: TestConfig, schedule: Schedule) -> Candidate:
    """What makes a candidate run what it is (not where its schedule was read from)."""
    return config, schedule.faults, schedule.time_limit


@dataclass
class Shrinker:
    """Searches for a smaller failing test, running at most ``budget`` candidates."""

    store: Path
    target: frozenset[str]  # the anomaly types of the original failure
    budget: int = 60
    out: TextIO | None = None
    attempts: list[Attempt] = field(default_factory=list)
    tried: set[Candidate] = field(default_factory=set)  # candidates run: never run twice
    # Told the run directory of each candidate as it starts, and None once it has its verdict
    # (explore_store.candidate_claim). A candidate is made as a partial run, published only
    # if kept: a shrink killed outright leaves nothing a reader sees, and the next
    # exploration or shrink removes what it left (explore_store.remove_left_partial_runs).
    running: Callable[[Path | None], None] = lambda run: None

    def still_fails(self, config: TestConfig, schedule: Schedule) -> Attempt | None:
        if len(self.attempts) >= self.budget:
            return None
        key = candidate(config, schedule)
        if key in self.tried:  # its answer is known: it passed, or it is the best so far
            return None
        self.tried.add(key)
        from floodmark.run.runner import Runner

        runner: Runner | None = None
        try:
            with signals_deferred():  # a run directory made is always known here, so removed
                # Made where no reader sees it; published only if kept (see explore_store).
                runner = Runner(config, self.store, schedule=schedule, out=io.StringIO(), check=True, report=False,
                                partial=True)
            self.running(runner.run_dir.path)
            outcome = runner.run()
            if outcome.interrupted:  # the runner tore its cluster down: the shrink stops here
                raise KeyboardInterrupt
        except KeyboardInterrupt:  # (or one came before the runner took them, or as it checked)
            if runner is not None:
                rundir.discard(self.store, runner.run_dir)  # leaving no half run
            raise
        anomalies = anomaly_types(runner.run_dir.path)
        failed = outcome.valid is False and bool(anomalies & self.target)
        if failed:
            runner.publish()
        self.running(None)
        attempt = Attempt(config, schedule, failed, anomalies, runner.run_dir.path)
        self.attempts.append(attempt)
        if self.out is not None:
            print(f"floodmark shrink: try {len(self.attempts)}: {len(schedule.faults)} faults, "
                  f"{config.time_limit:.0f} s, {config.nodes} brokers: "
                  f"{'still fails' if failed else 'passes'}", file=self.out, flush=True)
        if not failed:
            shutil.rmtree(runner.run_dir.path, ignore_errors=True)
        return attempt if failed else None

    def shrink(self, config: TestConfig, schedule: Schedule, original: Path) -> tuple[TestConfig, Schedule, Path]:
        """Apply each reduction in turn, keeping what still fails, round after round until a
        round finds nothing smaller (or the budget is spent); the original run is kept."""
        best = original
        self.tried.add(candidate(config, schedule))  # the original fails: no need to run it again
        steps: list[Callable[[TestConfig, Schedule], Attempt | None]] = [
            self._fewer_faults, self._shorter_test, self._shorter_faults, self._fewer_brokers, self._lighter_load,
        ]
        smaller = True
        while smaller and len(self.attempts) < self.budget:
            smaller = False
            for step in steps:
                found = step(config, schedule)
                if found is not None:
                    if best != original:
                        shutil.rmtree(best, ignore_errors=True)
                    config, schedule, best = found.config, found.schedule, found.run_dir
                    smaller = True
        return config, schedule, best

    # ------------------------------------------------------------------ reductions

    def _fewer_faults(self, config: TestConfig, schedule: Schedule) -> Attempt | None:
        """ddmin over the faults: try halves, then complements, then finer chunks."""
        faults, granularity, last = list(schedule.faults), 2, None
        while len(faults) >= 2 and len(self.attempts) < self.budget:
            chunks = split(faults, granularity)
            candidates = chunks + [without(faults, c) for c in chunks] if granularity > 2 else chunks
            found = None
            for subset in candidates:
                if subset and len(subset) < len(faults):
                    found = self.still_fails(config, renumbered(subset, schedule.time_limit))
                    if found is not None:
                        break
            if found is not None:
                if last is not None:
                    shutil.rmtree(last.run_dir, ignore_errors=True)
                last, faults = found, list(found.schedule.faults)
                granularity = max(granularity - 1, 2)
            elif granularity >= len(faults):
                break
            else:
                granularity = min(len(faults), granularity * 2)
        return last

    def _shorter_test(self, config: TestConfig, schedule: Schedule) -> Attempt | None:
        end = max((f.end for f in schedule.faults), default=0.0) + SETTLE
        if end >= config.time_limit - 1:
            return None
        limit = round(max(end, 5.0), 1)
        return self.still_fails(config.replace(time_limit=limit), Schedule(schedule.faults, limit))

    def _shorter_faults(self, config: TestConfig, schedule: Schedule) -> Attempt | None:
        if not schedule.faults:
            return None
        nemeses = make_nemeses(config)

        def halved(fault: Fault) -> Fault:
            # (to no less than 0.5 s, yet never longer: a 0.2 s fault stays 0.2 s)
            duration = round(min(fault.duration, max(fault.duration / 2, 0.5)), 3)
            # A pause's shape names its side of the session timeout: it keeps its length
            # rather than become another fault under the same name (the run would refuse it).
            if fault.kind in nemeses.kinds and nemeses.duration_problem(fault.kind, fault.shape, duration,
                                                                        config.zk_session_timeout):
                return fault
            return dataclasses.replace(fault, duration=duration)

        shorter = tuple(halved(f) for f in schedule.faults)
        if shorter == schedule.faults:
            return None
        return self.still_fails(config, Schedule(shorter, schedule.time_limit))

    def _fewer_brokers(self, config: TestConfig, schedule: Schedule) -> Attempt | None:
        if config.nodes - 1 < max(config.replication_factor, 3):
            return None
        return self.still_fails(config.replace(nodes=config.nodes - 1), schedule)

    def _lighter_load(self, config: TestConfig, schedule: Schedule) -> Attempt | None:
        if config.rate <= 25:
            return None
        return self.still_fails(config.replace(rate=max(25.0, config.rate / 2)), schedule)


def split(items: Sequence[Fault], parts: int) -> list[list[Fault]]:
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        chunks.append(list(items[start:end]))
        start = end
    return [c for c in chunks if c]


def without(items: Sequence[Fault], chunk: Sequence[Fault]) -> list[Fault]:
    drop = {f.number for f in chunk}
    return [f for f in items if f.number not in drop]


def renumbered(faults: Sequence[Fault], time_limit: float) -> Schedule:
    ordered = sorted(faults, key=lambda f: (f.start, f.number))
    return Schedule(tuple(dataclasses.replace(f, number=i) for i, f in enumerate(ordered)), time_limit)


def anomaly_types(path: Path) -> frozenset[str]:
    """The anomaly types a run's results name (none when they cannot be read, or are not a verdict)."""
    try:
        results = read_results(rundir.RunDir(path).results)
    except (OSError, ValueError):
        return frozenset()
    if verdict_problem(results) is not None:
        return frozenset()
    return frozenset(str(a.get("type")) for checker in (results.get("checkers") or {}).values()
                     for a in checker.get("anomalies", []))


def load_failure(path: Path) -> tuple[TestConfig, Schedule, frozenset[str]]:
    """A failing simulated run's configuration, schedule and anomaly types; UsageError if it
    is not one."""
    run = rundir.RunDir(path)
    if not os.path.lexists(run.config) or not os.path.lexists(run.schedule):  # there: read, or named
        raise UsageError(f"{path}: not a run directory (needs {rundir.CONFIG} and {rundir.SCHEDULE})")
    replayed = replayed_test(run)
    if replayed.edited is not None:
        # The shrink starts from the schedule as it now is, taken to fail without a run (the
        # original is never run again): edited, it failed nowhere, and "stays the smallest"
        # named a run whose schedule.json no longer is what failed.
        raise UsageError(f"{run.schedule}: edited since the run ({replayed.edited}), so it is not the schedule "
                         f"that failed; replay it first (floodmark repro {path}) and shrink that run if it fails")
    config, schedule = replayed.config, replayed.schedule
    if config.cluster != "sim":
        raise UsageError(f"{path}: a {config.cluster} run; only simulated runs can be shrunk "
                         "(they replay exactly)")
    try:  # what to preserve: a results file that cannot be read is named, not taken for a clean run
        unreadable = file_problem(run.results)  # (a FIFO is named at once, not waited on)
        if unreadable is not None:
            raise ValueError(f"{run.results}: {unreadable}")
        results = read_results(run.results)
    except (OSError, ValueError) as e:
        raise UsageError(f"{e}: the anomalies to preserve are read from it (floodmark check {path} "
                         "writes it)") from None
    problem = verdict_problem(results)
    if problem is not None:  # as the report shows it: no verdict, so no failure to preserve
        raise UsageError(f"{run.results}: {problem}; run floodmark check {path} to judge the run again")
    judged, results_run = results.get("judged_files"), results_run_id(results)
    # As the report reads it: a verdict that something says was judged on other files (a
    # results.json from another run) is not this run's failure, and the shrink would
    # spend its budget chasing anomalies this run never had.
    if judged is not None or os.path.lexists(run.digest):
        changed = run_digests.changed_since_judged(run, judged, results_run=results_run)
    else:
        changed = run_digests.another_run(run, results_run)
    if changed is not None:
        raise UsageError(f"{run.results}: its verdict is not of this run's files ({changed}); run "
                         f"floodmark check {path} to judge the run again")
    if results["valid"] is not False:
        raise UsageError(f"{path}: the run is {verdict_word(results['valid'])}, not invalid: there is no failure "
                         "to shrink (anomalies a valid run lists are ones its configuration permits)")
    if any(not isinstance(a.get("type"), str) for c in results["checkers"].values() for a in c.get("anomalies", [])):
        raise UsageError(f"{run.results}: an anomaly's 'type' is not a string, so what to preserve cannot be told; "
                         f"run floodmark check {path} to judge the run again")
    anomalies = anomaly_types(path)
    if not anomalies:
        raise UsageError(f"{path}: the run has no anomalies to preserve (is it invalid? run floodmark check first)")
    return config, schedule, anomalies


class ShrinkInterrupted(KeyboardInterrupt):
    """A shrink stopped by an interrupt, with the smallest failing run it had found (kept)."""

    def __init__(self, original: Path, smallest: Path) -> None:
        super().__init__(f"interrupted shrinking {original}")
        self.original, self.smallest = original, smallest


def shrink_run(path: Path, store: Path | None, budget: int = 60, out: TextIO | None = None) -> tuple[Path, int]:
    """Shrink a failing run, its candidates in ``store`` (None: the store the run is in);
    returns the minimal run directory and how many runs it took. Interrupted, raises
    :class:`ShrinkInterrupted` naming the smallest failing run so far."""
    config, schedule, anomalies = load_failure(path)
    if store is None:
        store = Path(store_of_run(path))
    left = remove_killed_explorations(str(store))
    if left and out is not None:
        print(f"floodmark shrink: removed {len(left)} unfinished run(s) that a killed exploration or shrink "
              f"left in {store}", file=out, flush=True)
    shrinker = Shrinker(store, anomalies, budget, out)
    try:
        with candidate_claim(store) as running:
            shrinker.running = running
            _, _, best = shrinker.shrink(config, schedule, path)
    except KeyboardInterrupt:
        # Each failing candidate kept is smaller than the one before (larger ones are removed).
        kept = [a.run_dir for a in shrinker.attempts if a.failed and a.run_dir.is_dir()]
        raise ShrinkInterrupted(path, kept[-1] if kept else path) from None
    finally:  # the candidates that passed were removed: latest must name a run still there
        rundir.repoint_latest(store)
    if best != path:
        from floodmark.reports.report import write_report

        write_report(best)
    return best, len(shrinker.attempts)
