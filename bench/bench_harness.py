"""Harness figures: sustained client throughput, and time from `floodmark run` to the first op.

    python bench/bench_harness.py [--runs 3] [--time-limit 20] [--backends local,docker]

1. **Throughput.** Runs `floodmark run --cluster local --nemesis none` at an offered rate far
   above the target and measures, from the recorded history, the client ops completed per
   second over the fault phase (target: at least 2,000 ops/s).
2. **Time to first op.** Measures wall time from spawning `floodmark run` to the first client
   invocation appearing in its history.jsonl (targets: under 10 s local, under 30 s on
   Docker with images built).

Prints each run's figure and the median. Needs root (local backend) and a Docker engine
(docker backend; the images are built first if missing, and that build is not timed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def newest_history(store: Path) -> Path | None:
    latest = store / "latest"
    history = latest / "history.jsonl"
    return history if history.exists() else None


def first_client_invoke(history: Path) -> bool:
    with history.open(encoding="utf-8") as f:
        for line in f:
            if '"type":"invoke"' in line and '"process":"nemesis"' not in line:
                return True
    return False


def run_once(store: Path, cluster: str, time_limit: float, rate: float, concurrency: int) -> tuple[float | None, float, int]:
    """One `floodmark run`; returns (seconds to first op, ops/s over the workload, exit code)."""
    argv = [sys.executable, "-m", "floodmark.cli", "run", "--cluster", cluster, "--nemesis", "none",
            "--time-limit", str(time_limit), "--rate", str(rate), "--concurrency", str(concurrency),
            "--store", str(store), "--seed", "1"]
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first_op: float | None = None
    while process.poll() is None:
        history = newest_history(store)
        if first_op is None and history is not None and first_client_invoke(history):
            first_op = time.monotonic() - started
        time.sleep(0.05)
    stderr = process.stderr.read() if process.stderr else ""
    history = newest_history(store)
    if history is None:
        print(stderr, file=sys.stderr)
        raise SystemExit("the run left no history")
    return first_op, throughput(history), process.returncode


def throughput(history: Path) -> float:
    """Client completions per second between the first and last client op of the fault phase."""
    times = []
    with history.open(encoding="utf-8") as f:
        for line in f:
            op = json.loads(line)
            if op["process"] != "nemesis" and op["type"] != "invoke" and op["f"] != "drain":
                times.append(op["time"])
    if len(times) < 2:
        return 0.0
    return len(times) / ((max(times) - min(times)) / 1e9)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=20000.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--backends", default="local,docker", help="comma-separated: local, docker")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    if "docker" in backends:
        import docker
        from floodmark.harness.images import ensure_images

        ensure_images(docker.from_env())  # build outside the timed runs
    for cluster in backends:
        firsts, rates = [], []
        for n in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="fm-bench-") as store:
                first, rate, code = run_once(Path(store), cluster, args.time_limit, args.rate, args.concurrency)
            print(f"{cluster} run {n + 1}: first op after {first if first is None else round(first, 2)} s, "
                  f"{rate:.0f} client ops/s, exit {code}", flush=True)
            if first is not None:
                firsts.append(first)
            rates.append(rate)
        if firsts:
            print(f"{cluster}: median time from `floodmark run` to first op: {statistics.median(firsts):.2f} s "
                  f"(target < {10 if cluster == 'local' else 30} s)")
        print(f"{cluster}: median sustained throughput, no faults: {statistics.median(rates):.0f} ops/s "
              f"(target >= 2000 on local)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
