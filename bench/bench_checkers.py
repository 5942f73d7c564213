"""Throughput of the log checkers (durability, queue, hw, leader, stats) by history length.

    python bench/bench_checkers.py [--sizes 10000,100000,1000000] [--repeat 3]

For each size (history entries: invocations plus completions) a correct queue run is
generated (:mod:`floodmark.checkers.synthetic`: 10 processes, 6 partitions, 3 brokers, their
node events), then each checker is timed from scratch (the shared history index rebuilt
each time) with the garbage collector paused, as :func:`floodmark.checkers.registry.run_checkers`
runs them. Caches the checkers keep between calls on the same run (the index, the scan for
unclean elections) are dropped before every timed run. Prints the median process CPU time
of the checker alone (generation excluded) and history entries per second of that CPU time,
and the peak memory the checkers allocated (tracemalloc) on top of the loaded history.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
import tracemalloc

from calibration import machine_speed

from floodmark.checkers import permitted, queue_index
from floodmark.checkers.api import CheckInput
from floodmark.checkers.registry import make_checker
from floodmark.checkers.synthetic import queue_run

CHECKERS = ("durability", "queue", "hw", "leader", "stats")


def forget_cached_scans() -> None:
    """Drop what checkers remember about the last run (the shared queue index, the scan for
    unclean elections), so every timed run pays for it from scratch."""
    queue_index._cache.clear()
    permitted._scanned.clear()


def run_all(run: CheckInput, names: tuple[str, ...]) -> None:
    forget_cached_scans()
    for name in names:
        verdict = make_checker(name).check(run)
        assert verdict.valid is True, (name, verdict.anomalies[:1])


def measure(run: CheckInput, names: tuple[str, ...], repeat: int) -> float:
    times = []
    gc.disable()
    try:
        for _ in range(repeat):
            started = time.process_time()
            run_all(run, names)
            times.append(time.process_time() - started)
    finally:
        gc.enable()
    return statistics.median(times)




def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="history lengths (entries), comma-separated; add 10000000 if memory allows")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--checkers", default=",".join(CHECKERS),
                        help="checkers to time one by one, comma-separated (all five are also timed together)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"reference loop {machine_speed():.2f} CPU s (about 0.3 s when idle)")
    print(f"{'entries':>10} {'events':>10} {'checker':>12} {'median CPU s':>13} {'entries/s':>12} "
          f"{'(entries+events)/s':>19}")
    for size in (int(s) for s in args.sizes.split(",")):
        generated = time.process_time()
        synthetic = queue_run(7, ops=size // 2, processes=10, topics=2, partitions=3, leader_change_rate=0.0005)
        generated = time.process_time() - generated
        run = CheckInput(synthetic.history, synthetic.events, synthetic.config)
        entries = len(synthetic.history)
        events = sum(len(e) for e in synthetic.events.values())
        for name in args.checkers.split(","):
            median = measure(run, (name,), args.repeat)
            print(f"{entries:10} {events:10} {name:>12} {median:13.3f} {entries / median:12,.0f} "
                  f"{(entries + events) / median:19,.0f}")
        median = measure(run, CHECKERS, args.repeat)
        print(f"{entries:10} {events:10} {'all five':>12} {median:13.3f} {entries / median:12,.0f} "
              f"{(entries + events) / median:19,.0f}")
        gc.disable()
        tracemalloc.start()
        run_all(run, CHECKERS)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        gc.enable()
        print(f"{'':10} {'':10} {'peak alloc':>12} {peak / 2**20:12.1f} MiB (checkers only; generation took {generated:.1f} s)")
        del run, synthetic
        gc.collect()
    print(f"load average at the end {os.getloadavg()[0]:.1f}, reference loop {machine_speed():.2f} CPU s")
    print(f"peak RSS of this process (history and events included): "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
