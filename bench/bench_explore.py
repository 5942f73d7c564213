"""How fast exploration catches each protocol variant: seeds and seconds to the first invalid run.

    python bench/bench_explore.py [--first-seed 1] [--cap 200] [--variants truncate-to-hw,...]
                                  [--time-cap SECONDS] [--store DIR]
    python bench/bench_explore.py --rate SEEDS [--starts K] [--first-seed N] [--variants ...]

For each variant (all but ``default`` unless ``--variants`` names some), seeds from the same
fixed first seed run one at a time on the simulator, exactly as ``floodmark explore --jobs 1
--no-shrink`` runs them (:func:`floodmark.run.explore.run_seed`: the seed's swarm test),
until one is invalid or the cap of seeds (or of seconds, with ``--time-cap``) is reached.
Printed per variant: how many seeds it took, the wall seconds it took, the anomalies the
catching run showed, and whether that meets the target (200 seeds and 300 s). Variants run
one after another, never in parallel: the figures are single-core seconds, so the machine's
load (the load average, printed before and after) matters and is reported beside them.

The first catch from one fixed seed says little about a fresh start: a variant caught by the
98th seed from seed 1 may be caught by one seed in a hundred, or by one in thirty. ``--rate
SEEDS`` measures that instead: for each variant it runs ``SEEDS`` seeds from a fresh random
first seed (printed, so the figures can be run again; ``--first-seed`` fixes it) without
stopping at a catch, and prints the share of seeds that catch the variant, the seconds a seed
takes, and from them the chance that a fresh random start catches it within 200 seeds,
``1 - (1 - p)^200``, and within the whole target, ``1 - (1 - p)^n`` with ``n`` the seeds
that fit in 200 and in 300 s at the measured pace (which the machine's load sets), each for
the measured ``p`` and for the lower end of its 95% Wilson interval. ``--starts K`` runs K
such ranges (K fresh random first seeds; with ``--first-seed``, K ranges one after another)
and adds a ``pooled`` row per variant: all K × SEEDS seeds as one sample.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import sys
import tempfile
import time

from floodmark.reference.protocol.variants import VARIANTS
from floodmark.run.explore import run_seed

TARGET_SEEDS = 200
TARGET_SECONDS = 300.0


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def first_catch(variant: str, first_seed: int, cap: int, time_cap: float | None,
                store: str) -> tuple[int | None, int, float, tuple[str, ...]]:
    """(seed that caught it or None, seeds run, wall seconds, anomalies of the catching run)."""
    started = time.monotonic()
    for ran, seed in enumerate(range(first_seed, first_seed + cap), start=1):
        found = run_seed(seed, variant, store)
        if found.valid is False:
            return seed, ran, time.monotonic() - started, found.anomalies
        if time_cap is not None and time.monotonic() - started >= time_cap:
            return None, ran, time.monotonic() - started, ()
    return None, cap, time.monotonic() - started, ()


def catch_rate(variant: str, first_seed: int, seeds: int, store: str) -> tuple[int, float]:
    """(seeds of ``seeds`` from ``first_seed`` whose run was invalid, wall seconds for all)."""
    started = time.monotonic()
    caught = sum(run_seed(seed, variant, store).valid is False for seed in range(first_seed, first_seed + seeds))
    return caught, time.monotonic() - started


def wilson_low(caught: int, seeds: int, z: float = 1.96) -> float:
    """The lower end of the Wilson score interval for a share ``caught / seeds``."""
    p = caught / seeds
    centre = p + z * z / (2 * seeds)
    spread = z * math.sqrt(p * (1 - p) / seeds + z * z / (4 * seeds * seeds))
    return max(0.0, (centre - spread) / (1 + z * z / seeds))


def within_target(p: float, seconds_per_seed: float | None = None) -> float:
    """The chance that a fresh start catches a variant caught by a share ``p`` of seeds
    within the target's seeds (and seconds, at ``seconds_per_seed``)."""
    fit = TARGET_SEEDS
    if seconds_per_seed is not None and seconds_per_seed > 0:
        fit = min(fit, int(TARGET_SECONDS / seconds_per_seed))
    return 1 - (1 - p) ** fit


def rates(variants: list[str], first_seeds: list[int], seeds: int, store: str) -> None:
    """Each variant's catch rate from each first seed, and pooled over them when there are several."""
    named = f"seed {first_seeds[0]}" if len(first_seeds) == 1 else f"seeds {', '.join(map(str, first_seeds))}"
    print(f"load average {load_average()}; {seeds} seeds per variant from "
          f"{named}; target {TARGET_SEEDS} seeds / {TARGET_SECONDS:.0f} s", flush=True)
    print(f"{'variant':28} {'caught':>9} {'s/seed':>7} {'P(200 seeds)':>13} {'at 95% low':>11} "
          f"{'P(target)':>10} {'at 95% low':>11}", flush=True)
    for variant in variants:
        measured = [catch_rate(variant, first, seeds, store) for first in first_seeds]
        for caught, seconds in measured:
            _rate_row(variant, caught, seeds, seconds)
        if len(measured) > 1:  # every start's seeds as one sample
            _rate_row("  pooled", sum(c for c, _ in measured), seeds * len(measured), sum(s for _, s in measured))
    print(f"load average {load_average()}", flush=True)


def _rate_row(label: str, caught: int, seeds: int, seconds: float) -> None:
    per_seed, low = seconds / seeds, wilson_low(caught, seeds)
    print(f"{label:28} {caught:>4}/{seeds:<4} {per_seed:7.2f} {within_target(caught / seeds):13.3f} "
          f"{within_target(low):11.3f} {within_target(caught / seeds, per_seed):10.3f} "
          f"{within_target(low, per_seed):11.3f}", flush=True)


def first_seeds_of(first_seed: int | None, starts: int, seeds: int) -> list[int]:
    """``starts`` first seeds: fresh random ones, or ``first_seed`` and the ranges after it."""
    if first_seed is not None:
        return [first_seed + k * seeds for k in range(starts)]
    draw = random.SystemRandom()
    return [draw.randrange(10**6, 10**9) for _ in range(starts)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--first-seed", type=int, default=None,
                        help="first seed (default: 1, or a fresh random one with --rate)")
    parser.add_argument("--rate", type=int, default=None, metavar="SEEDS",
                        help="measure each variant's catch rate over SEEDS seeds instead of its first catch")
    parser.add_argument("--starts", type=int, default=1, metavar="K",
                        help="with --rate: K first seeds, each SEEDS seeds, and the rate pooled over them")
    parser.add_argument("--cap", type=int, default=TARGET_SEEDS, help="seeds per variant at most")
    parser.add_argument("--time-cap", type=float, default=None, help="seconds per variant at most")
    parser.add_argument("--variants", default=",".join(v for v in VARIANTS if v != "default"))
    parser.add_argument("--store", default=None, help="keep failing runs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    store = args.store or tempfile.mkdtemp(prefix="bench-explore-")
    if args.rate is not None:
        if args.rate < 1 or args.starts < 1:
            parser.error("--rate and --starts: at least one")
        rates(variants, first_seeds_of(args.first_seed, args.starts, args.rate), args.rate, store)
        if args.store is None:
            shutil.rmtree(store, ignore_errors=True)
        return 0
    first_seed = 1 if args.first_seed is None else args.first_seed
    print(f"load average {load_average()}; first seed {first_seed}, "
          f"cap {args.cap} seeds{f', {args.time_cap:.0f} s' if args.time_cap else ''}; "
          f"target {TARGET_SEEDS} seeds / {TARGET_SECONDS:.0f} s", flush=True)
    print(f"{'variant':28} {'seeds':>6} {'seconds':>8} {'meets':>6}  caught by", flush=True)
    missed = 0
    for variant in variants:
        seed, ran, seconds, anomalies = first_catch(variant, first_seed, args.cap, args.time_cap, store)
        meets = seed is not None and ran <= TARGET_SEEDS and seconds <= TARGET_SECONDS
        missed += not meets
        what = f"seed {seed}: {', '.join(anomalies)}" if seed is not None else f"not caught in {ran} seeds"
        print(f"{variant:28} {ran if seed is not None else '>' + str(ran):>6} {seconds:8.1f} "
              f"{'yes' if meets else 'no':>6}  {what}", flush=True)
    print(f"load average {load_average()}", flush=True)
    print(f"{len(variants) - missed} of {len(variants)} variants meet the target", flush=True)
    if args.store is None:
        shutil.rmtree(store, ignore_errors=True)
    return 0  # a measurement, not a gate (tests/chaos/test_sim_corpus.py is the gate)


if __name__ == "__main__":
    sys.exit(main())
