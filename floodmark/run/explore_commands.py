"""The ``floodmark explore`` and ``floodmark shrink`` commands: hunting bugs on the simulator.

``explore`` runs many seeds, each its own swarm test (``run.swarm``), across worker processes
or Spark tasks (``run.explore``), prints each failing seed with its repro command and shrinks
the first few; ``shrink`` reduces one failing simulated run to a minimal one that fails the
same way (``run.shrink``). Both exit as ``run`` does (0 valid, 1 invalid, 2 unknown, 254 bad
arguments, 130 interrupted); what they say goes to stderr, as progress does.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from floodmark.backends import cleanup
from floodmark.errors import UsageError, given_text
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.run.argument_checks import given_run_dir, usable_store
from floodmark.run.swarm import exploration_key, swarm_config
from floodmark.run.worker_pool import MAX_BROKEN_POOLS
from floodmark.run_dirs import rundir

if TYPE_CHECKING:
    from floodmark.run.explore import Explored

EXPLORE_DESCRIPTION = """\
Hunt for bugs on the simulator: run many seeds, each drawing its own test (3-5 brokers,
replication factor, min.insync.replicas, topics and partitions, which fault kinds and how
often and how long, the producer's linger: swarm testing), all within the durability
contract, so any invalid run is a real bug. The queue workload drives them unless
--workload log-lin asks for appends and reads judged for linearizability. Runs go across
--jobs processes (or Spark tasks with --master); every failing seed is printed with the
command that replays it and kept as a run directory, and shrunk to a minimal failing run
unless --no-shrink.

examples:
  floodmark explore --runs 200 --variant truncate-to-hw --stop-on-first
  floodmark explore --runs 10000 --jobs 8 --no-shrink
  floodmark explore --runs 500 --workload log-lin
  floodmark explore --runs 100000 --master spark://spark-master:7077 --store /shared/store
"""

MAX_JOBS = 1024



def explore_command(args: argparse.Namespace) -> int:
    from floodmark.harness.seeds import new_seed
    from floodmark.run import explore, runner

    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    if args.variant not in VARIANTS:
        raise UsageError(f"unknown variant {args.variant!r}; choose one of: {', '.join(VARIANTS)}")
    if args.time_budget is not None and not 0 < args.time_budget < math.inf:  # NaN fails both
        raise UsageError(f"--time-budget must be a positive number of seconds, got {args.time_budget}")
    if args.shrink_budget < 1:
        raise UsageError(f"--shrink-budget must be at least 1 (runs per failure), got {args.shrink_budget}")
    jobs = args.jobs if args.jobs is not None else explore.default_jobs()
    if not 1 <= jobs <= MAX_JOBS:
        raise UsageError(f"--jobs must be between 1 and {MAX_JOBS} (a worker process each), got {jobs}")
    if given_text("--master", args.master, "master URL") is not None:
        try:
            from floodmark.pipeline.session import check_master
        except ImportError as e:
            raise UsageError(f"--master needs PySpark, which cannot be imported here ({e}); "
                             "pip install floodmark[spark]") from None
        check_master(args.master)  # before the store is made or anything said
    if args.runs > explore.MAX_SEED + 1:
        raise UsageError(f"--runs {args.runs}: more seeds than there are ({explore.MAX_SEED + 1}, from 0)")
    # A first seed drawn at random is drawn so that the runs asked for fit: an error would
    # blame a --seed the user never gave.
    first = args.seed if args.seed is not None else new_seed() % (explore.MAX_SEED - args.runs + 2)
    try:
        seeds = explore.seeds_from(first, args.runs)
    except ValueError as e:
        raise UsageError(str(e)) from None
    store = usable_store(args.store)
    problem = rundir.store_problem(store, swarm_config(first, args.variant, workload=args.workload).name)
    if problem is not None:  # else every seed's run would fail, each counted unknown
        raise UsageError(problem)
    print(f"floodmark explore: variant {args.variant}, {args.workload} workload, seeds {first}..{first + args.runs - 1}, "
          f"{'Spark ' + args.master if args.master else f'{jobs} job' + 's' * (jobs != 1)}; store {store}", file=sys.stderr)
    left = explore.remove_killed_explorations(store)
    if left:
        print(f"floodmark explore: removed {len(left)} unfinished run(s) that a killed exploration or shrink left in {store}",
              file=sys.stderr)
    tally, on_result = explore.progress_printer(len(seeds), sys.stderr)
    started = time.monotonic()
    shrinking: Path | None = None
    try:
        with explore.claim(store, exploration_key(args.variant, args.workload), seeds):
            if args.master:
                found = explore.explore_spark(seeds, args.variant, store, args.master, workload=args.workload, keep_all=True,
                                              on_result=on_result)
            else:
                found = explore.explore_local(seeds, args.variant, store, jobs, workload=args.workload,
                                              keep_all=args.keep_all,
                                              time_budget=args.time_budget, stop_on_first=args.stop_on_first,
                                              on_result=on_result)
        rundir.repoint_latest(store)  # the passing runs were removed: latest names one still there
        print(f"{_end_of_progress()}floodmark explore: {explore.summary(tally, time.monotonic() - started)}"
              f"{_cut_short(args, tally.runs, tally.invalid, len(seeds), explore.workers_kept_dying(found))}",
              file=sys.stderr)
        if tally.invalid and not args.no_shrink:
            with cleanup.interruptible():
                for path in _failures(found)[:3]:  # the first few; each costs up to the budget in runs
                    shrinking = path
                    _shrink_finding(path, store, args.shrink_budget)
    except KeyboardInterrupt as e:
        what = (f"shrinking {shrinking}; {_shrink_kept(e)}" if shrinking is not None
                else f"after {tally.runs} of {len(seeds)} runs ({tally.invalid} invalid, {tally.unknown} unknown); "
                     f"the failing runs are kept in {store}, unfinished ones removed")
        print(f"{_end_of_progress()}floodmark explore: interrupted {what}", file=sys.stderr)
        return runner.EXIT_INTERRUPTED
    return tally.exit_code


def _cut_short(args: argparse.Namespace, runs: int, invalid: int, planned: int, workers_kept_dying: bool) -> str:
    """What the summary adds when fewer seeds ran than were announced, and what stopped them.
    (A worker that died outright once stops nothing: the seeds after its pool's run in a new one.)"""
    if runs >= planned:
        return ""
    if workers_kept_dying:
        why = (f"worker processes kept dying outright, {MAX_BROKEN_POOLS} pools of them in a row with no seed "
               "finishing (the unknown seeds above say which they held)")
    elif args.stop_on_first and invalid:
        why = "--stop-on-first: an invalid run stopped it"
    else:
        why = f"--time-budget of {args.time_budget:g} s ran out"
    return f" ({planned - runs:,} of {planned:,} seeds not run: {why})"


def _end_of_progress() -> str:
    """What ends the progress line a terminal shows (rewritten in place, so unterminated)."""
    return "\n" if sys.stderr.isatty() else ""


def _failures(found: list[Explored]) -> list[Path]:
    """This exploration's invalid runs (not an earlier one's in the same store)."""
    return [Path(f.run_dir) for f in found if f.valid is False and f.run_dir is not None]


def _shrink_finding(path: Path, store: str, budget: int) -> None:
    from floodmark.run.shrink import shrink_run

    print(f"floodmark explore: shrinking {path}", file=sys.stderr)
    minimal, runs = shrink_run(path, Path(store), budget)
    print(f"floodmark explore: {_shrunk(runs, budget, '--shrink-budget')}: {rundir.repro_command(minimal)}", file=sys.stderr)


def _shrunk(runs: int, budget: int, flag: str) -> str:
    """What a shrink that took ``runs`` of its ``budget`` found, in words: a shrink that spent
    its whole budget may have stopped short of the minimal run."""
    if runs < budget:
        return f"minimal after {runs} runs"
    return f"the smallest failing run within the budget of {budget} runs ({flag} for more)"


def _shrink_kept(interrupt: KeyboardInterrupt) -> str:
    """What an interrupted shrink kept, in words."""
    from floodmark.run.shrink import ShrinkInterrupted

    if isinstance(interrupt, ShrinkInterrupted) and interrupt.smallest != interrupt.original:
        return f"the smallest failing run so far is kept: {rundir.repro_command(interrupt.smallest)}"
    return "no smaller failing run found; the run that was shrinking is kept as it was"


def shrink_command(args: argparse.Namespace) -> int:
    from floodmark.run import runner
    from floodmark.run.shrink import shrink_run

    if args.budget < 1:
        raise UsageError("--budget must be at least 1")
    path = given_run_dir(args.run_dir)
    store = Path(usable_store(args.store)) if args.store is not None else None  # (the run's, once it is read)
    try:
        with cleanup.interruptible():  # SIGTERM as Ctrl-C: the candidate running is torn down and removed
            minimal, runs = shrink_run(path, store, args.budget, sys.stderr)
    except KeyboardInterrupt as e:
        print(f"floodmark shrink: interrupted; {_shrink_kept(e)}", file=sys.stderr)
        return runner.EXIT_INTERRUPTED
    if minimal == path:
        print(f"floodmark shrink: no smaller failing run found in {runs} runs; {path} stays the smallest",
              file=sys.stderr)
    else:
        print(f"floodmark shrink: {_shrunk(runs, args.budget, '--budget')}: {minimal}\n"
              f"  replay it with: {rundir.repro_command(minimal)}", file=sys.stderr)
    return 0
