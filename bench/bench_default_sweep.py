"""The default variant under exploration: invalid and unknown runs over many seeds.

    python bench/bench_default_sweep.py [--first-seed 1] [--runs 10000] [--jobs 2] [--store DIR]

The default variant has every fix on, so every swarm test it draws must be valid: an invalid
run is a bug in the reference (or in a checker), an unknown one a run the checkers could not
decide (partitions left offline, a drain that never finished). The target is 0 invalid and 0
unknown over at least 10,000 seeds; CI runs seeds 1-500 (``tests/chaos/test_sim_corpus.py``).

Seeds run exactly as ``floodmark explore --no-shrink`` runs them
(:func:`floodmark.run.explore.explore_local`, ``--jobs`` worker processes); failing runs are
kept in ``--store`` (default: a temporary directory, removed unless something failed) and
printed with the command that replays each. A long sweep can be split into ranges
(``--first-seed``, ``--runs``) run at different times on the same code: each range prints
its own figures, and the runs do not depend on each other. Printed: the progress line every
minute, then runs, invalid, unknown, wall and CPU seconds, runs per second, the load average
and the calibration anchor before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration import machine_speed  # noqa: E402

from floodmark.run.explore import default_jobs, explore_local, progress_printer, seeds_from  # noqa: E402

TARGET_SEEDS = 10_000


def load_average() -> str:
    return f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=TARGET_SEEDS, help="seeds to run (default 10000)")
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="worker processes (default: one per core)")
    parser.add_argument("--store", default=None, help="keep failing runs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.jobs < 1:
        parser.error("--runs and --jobs must be at least 1")
    store = args.store or tempfile.mkdtemp(prefix="bench-default-sweep-")
    seeds = seeds_from(args.first_seed, args.runs)
    print(f"default variant, seeds {seeds[0]}..{seeds[-1]}, {args.jobs} jobs; "
          f"calibration: machine_speed {machine_speed():.3f} s (about 0.3 on a quiet 3 GHz core); "
          f"{load_average()}", flush=True)
    tally, on_result = progress_printer(len(seeds), sys.stdout, every=60.0)
    started = time.monotonic()
    interrupted = False
    try:
        explore_local(seeds, "default", store, args.jobs, on_result=on_result)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the workers are stopped; say what ran
        interrupted = True
    elapsed = time.monotonic() - started
    print(f"{'interrupted: ' if interrupted else ''}"
          f"seeds {seeds[0]}..{seeds[-1]}: {tally.runs} runs, {tally.invalid} invalid, {tally.unknown} unknown "
          f"in {elapsed:.0f} s ({tally.runs / max(elapsed, 1e-9):.2f} runs/s, {tally.cpu_seconds:.0f} CPU s); "
          f"target 0 invalid and 0 unknown over {TARGET_SEEDS:,} seeds; "
          f"calibration after: machine_speed {machine_speed():.3f} s; {load_average()}", flush=True)
    if args.store is None and tally.invalid == tally.unknown == 0:
        shutil.rmtree(store, ignore_errors=True)
    elif tally.invalid or tally.unknown:
        print(f"failing runs kept in {store}", flush=True)
    return 130 if interrupted else 0  # a measurement, not a gate (tests/chaos/test_sim_corpus.py is)


if __name__ == "__main__":
    sys.exit(main())
