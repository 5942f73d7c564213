"""Benchmark: the HTML report of a 1,000,000-op history.

Targets (issue 5): report generation under 30 s, and the page open in Chromium (loaded and
its process timeline drawn) under 5 s. Prints the median of several runs, with CPU time and
the machine's load average, since a shared machine inflates wall-clock figures, and whether
each target is met (by the median). The run has 20,000 "unseen" anomalies of one type, so
the page carries the inline context of the first 1,000 of them (CONTEXT_PER_TYPE).

    python bench/bench_report.py [--ops 1000000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fixtures")]  # this checkout's floodmark, not an installed one

from report_fixtures import make_run  # noqa: E402

from floodmark.reports.report import write_report  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
GENERATION_TARGET_S = 30.0
PAGE_OPEN_TARGET_S = 5.0


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, and the core count."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} cores"


def verdict(name: str, median: float, target: float) -> str:
    return f"target {name} < {target:.0f} s: {'MET' if median < target else 'NOT MET'} (median {median:.2f} s)"


def bench_generation(run_dir: Path, repeat: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        write_report(run_dir)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus


def bench_page_open(report: Path, repeat: int) -> list[float] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("page open: skipped (playwright not installed)")
        return None
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(executable).exists():
        print("page open: skipped (chromium not installed)")
        return None
    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            started = time.perf_counter()
            page.goto(report.as_uri(), wait_until="load", timeout=120_000)
            page.wait_for_function(
                "document.getElementById('timeline-window').textContent.includes('ops visible')",
                timeout=120_000)
            times.append(time.perf_counter() - started)
            if errors:
                raise SystemExit(f"page errors: {errors}")
            page.close()
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="generate the run here and keep it")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        print(f"load average at start: {load_average()}")
        started = time.perf_counter()
        run = make_run(root / "store", name="bench", seed=1, ops=args.ops, anomalies=True, unseen=20_000)
        history_mb = run.path.joinpath("history.jsonl").stat().st_size / 1e6
        print(f"generated {run.op_count:,} ops ({history_mb:.0f} MB history) in {time.perf_counter() - started:.1f} s")
        walls, cpus = bench_generation(run.path, args.repeat)
        report = run.path / "report.html"
        print(f"report generation: median {statistics.median(walls):.2f} s wall, "
              f"{statistics.median(cpus):.2f} s CPU over {args.repeat} runs "
              f"(runs: {', '.join(f'{w:.2f}' for w in walls)}); target < {GENERATION_TARGET_S:.0f} s")
        print(f"report size: {report.stat().st_size / 1e6:.1f} MB")
        opens = bench_page_open(report, args.repeat)
        if opens:
            print(f"page open (load + timeline drawn): median {statistics.median(opens):.2f} s over "
                  f"{len(opens)} runs (runs: {', '.join(f'{t:.2f}' for t in opens)}); "
                  f"target < {PAGE_OPEN_TARGET_S:.0f} s")
        print(f"load average at end: {load_average()}")
        print(f"{args.ops:,}-op report generation: {verdict('generation', statistics.median(walls), GENERATION_TARGET_S)}")
        if opens:
            print(f"{args.ops:,}-op page open: {verdict('page open', statistics.median(opens), PAGE_OPEN_TARGET_S)}")
        else:
            print(f"{args.ops:,}-op page open: target < {PAGE_OPEN_TARGET_S:.0f} s: NOT MEASURED (no browser)")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
