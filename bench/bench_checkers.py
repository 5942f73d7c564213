"""Throughput and memory of the log checkers (durability, queue, hw, leader, invariants, stats) by history length.

    python bench/bench_checkers.py [--sizes 10000,100000,1000000] [--repeat 3]
    python bench/bench_checkers.py --sizes 10000000 --repeat 1     # about 14 GB of RAM

For each size (history entries: invocations plus completions) a correct queue run is
generated (:mod:`floodmark.checkers.synthetic`: 10 processes, 6 partitions, 3 brokers, and
their node events, about 1.9 per entry), then each checker is timed from scratch (the shared
history index rebuilt each time) with the garbage collector paused, as
:func:`floodmark.checkers.registry.run_checkers` runs them; the six are also timed together,
sharing the index as they do in a real check. Caches the checkers keep between calls on the
same run (the index, the scan for power-loss recoveries) are dropped before every timed run.

Printed per size: the median process CPU time of each checker alone (generation excluded),
history entries per second of it, and that time as a multiple of the calibration anchor
(:func:`calibration.machine_speed`, measured beside it), a load-independent figure: the
``idle entries/s`` column scales entries/s to an idle machine's anchor of 0.3 s. Memory: the
resident set the generated run added (RSS, from /proc); the peak resident set the checkers
added on top of the loaded run (sizes run in ascending order, so the process's peak RSS only
rises for the current size); and, up to ``--tracemalloc-up-to`` entries, the peak the checkers
allocated as tracemalloc counts it (its own bookkeeping costs gigabytes at 10^7 entries).
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

from floodmark.checkers import queue_index
from floodmark.checkers.api import CheckInput
from floodmark.checkers.registry import make_checker
from floodmark.checkers.synthetic import queue_run

CHECKERS = ("durability", "queue", "hw", "leader", "invariants", "stats")  # the queue workload's
IDLE_ANCHOR = 0.3  # CPU s of machine_speed() on an idle 3 GHz core with CPython 3.11
MIB = 2**20


def forget_cached_scans(run: CheckInput) -> None:
    """Drop what checkers remember about the last run (the shared queue index, the scan for
    power-loss recoveries the input caches), so every timed run pays for it from scratch."""
    queue_index._cache.clear()
    run.__dict__.pop("loss_permissions", None)  # CheckInput's cached_property


def run_all(run: CheckInput, names: tuple[str, ...]) -> None:
    for name in names:
        verdict = make_checker(name).check(run)
        assert verdict.valid is True, (name, verdict.anomalies[:1])


def measure(run: CheckInput, names: tuple[str, ...], repeat: int) -> tuple[float, float]:
    """Median CPU seconds of checking ``run`` with ``names``, and the median anchor measured
    right after each run (so both see the same load)."""
    times, anchors = [], []
    gc.disable()
    try:
        for _ in range(repeat):
            forget_cached_scans(run)  # outside the timed part: freeing the last index is not checking
            started = time.process_time()
            run_all(run, names)
            times.append(time.process_time() - started)
            anchors.append(machine_speed())
        forget_cached_scans(run)
    finally:
        gc.enable()
    return statistics.median(times), statistics.median(anchors)


def resident() -> int:
    """This process's resident set now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_resident() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def bench_size(size: int, names: tuple[str, ...], repeat: int, trace: bool) -> None:
    before = resident()
    gc.disable()  # the run is acyclic: collecting while building it only costs time
    generated = time.process_time()
    synthetic = queue_run(7, ops=size // 2, processes=10, topics=2, partitions=3, leader_change_rate=0.0005)
    generated = time.process_time() - generated
    gc.enable()
    gc.freeze()  # nor need later collections walk it
    run = CheckInput(synthetic.history, synthetic.events, synthetic.config)
    entries = len(synthetic.history)
    events = sum(len(e) for e in synthetic.events.values())
    run_bytes = resident() - before
    print(f"{entries:,} entries, {events:,} node events: generated in {generated:.1f} CPU s, "
          f"RSS +{run_bytes / MIB:,.0f} MiB ({run_bytes / entries:,.0f} bytes per entry)")
    loaded = resident()
    for name, group in [*((n, (n,)) for n in names), ("all six", CHECKERS)]:
        median, anchor = measure(run, group, repeat)
        print(f"{entries:12,} {name:>12} {median:12.3f} {entries / median:12,.0f} {median / anchor:9.2f} "
              f"{entries / median * anchor / IDLE_ANCHOR:14,.0f} {anchor:7.2f}")
    added = max(0, peak_resident() - loaded)
    print(f"{'':12} peak memory: checkers added {added / MIB:,.0f} MiB RSS at most to the loaded run; "
          f"process peak RSS {peak_resident() / MIB:,.0f} MiB")
    if trace:
        gc.disable()
        tracemalloc.start()
        run_all(run, CHECKERS)
        peak = tracemalloc.get_traced_memory()[1]
        forget_cached_scans(run)
        tracemalloc.stop()
        gc.enable()
        print(f"{'':12} peak memory: checkers allocated {peak / MIB:,.0f} MiB at most (tracemalloc, all six)")
    del run, synthetic
    gc.unfreeze()
    gc.collect()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="history lengths (entries), comma-separated; 10000000 needs about 14 GB of RAM")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tracemalloc-up-to", type=int, default=1_000_000, metavar="ENTRIES",
                        help="also trace the checkers' allocations for sizes up to this many entries")
    parser.add_argument("--checkers", default=",".join(CHECKERS),
                        help="checkers to time one by one, comma-separated (all six are also timed together)")
    args = parser.parse_args()
    names = tuple(args.checkers.split(","))
    unknown = sorted(set(names) - set(CHECKERS))
    if unknown:
        parser.error(f"unknown checker(s) {', '.join(unknown)}; choose from {', '.join(CHECKERS)}")
    try:
        sizes = sorted(int(s) for s in args.sizes.split(","))
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"reference loop {machine_speed():.2f} CPU s (about {IDLE_ANCHOR} s when idle), repeat {args.repeat}")
    print(f"{'entries':>12} {'checker':>12} {'median CPU s':>12} {'entries/s':>12} {'× anchor':>9} "
          f"{'idle entries/s':>14} {'anchor':>7}")
    for size in sizes:
        bench_size(size, names, args.repeat, trace=size <= args.tracemalloc_up_to)
    print(f"load average at the end {os.getloadavg()[0]:.1f}, reference loop {machine_speed():.2f} CPU s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
