"""Harness figures: sustained client throughput, its CPU cost, and time to the first op.

    python bench/bench_harness.py [--runs 3] [--time-limit 20] [--backends local,docker]

1. **Throughput.** Runs `floodmark run --cluster local --nemesis none` (the default queue
   workload: acks=all sends at replication factor 3, consumers polling) at an offered rate
   far above the target, and measures from the recorded history the client ops completed
   per second over the fault phase (target: at least 2,000 ops/s on the local backend).
2. **CPU per op.** Over a steady window of the fault phase (after a warm-up, before the
   end) it reads the CPU time (user + system, from ``/proc``) of the harness process, of
   each broker and of ZooKeeper, and divides by the client ops completed in that window.
   CPU time does not grow when other work shares the machine, so this figure, unlike
   ops/s, is comparable across loads; ``cores / (CPU seconds per op)`` estimates what a
   quiet machine would sustain.
3. **Time to first op.** Wall time from spawning `floodmark run` to the first client
   invocation in its history.jsonl (targets: under 10 s local, under 30 s on Docker with
   images built).

Prints each run's figures, the medians, the calibration anchor (``machine_speed``, CPU
seconds of a fixed loop measured in this process: about 0.3 s on a quiet 3 GHz core) and the
load average. Needs root (local backend) and a Docker engine (docker backend; the images
are built first if missing, and that build is not timed). CPU accounting covers the local
backend only (Docker nodes are not this machine's child processes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration import machine_speed  # noqa: E402

WARM_UP = 3.0  # seconds of the fault phase left out of the CPU window (connections, JIT-free warm caches)
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class RunFigures:
    first_op: float | None  # seconds from spawning `floodmark run` to the first client invoke
    ops_per_second: float
    exit_code: int
    window_ops: int = 0  # client completions in the CPU window
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds in the window, by role

    def cpu_per_kop(self, role: str | None = None) -> float:
        """CPU seconds per 1,000 ops (one role, or harness + brokers)."""
        if self.window_ops == 0:
            return float("nan")
        seconds = self.cpu.get(role, 0.0) if role else self.cpu.get("harness", 0.0) + self.cpu.get("brokers", 0.0)
        return 1000.0 * seconds / self.window_ops


def newest_history(store: Path) -> Path | None:
    history = store / "latest" / "history.jsonl"
    return history if history.exists() else None


def first_client_invoke(history: Path) -> bool:
    with history.open(encoding="utf-8") as f:
        for line in f:
            if '"type":"invoke"' in line and '"process":"nemesis"' not in line:
                return True
    return False


def client_completions(history: Path) -> int:
    """Client completions recorded so far (a torn last line is not counted)."""
    count = 0
    with history.open(encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n") and '"type":"invoke"' not in line and '"process":"nemesis"' not in line:
                count += 1
    return count


# --------------------------------------------------------------------------- CPU accounting


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    return children


def process_cpu(root: int) -> dict[str, float]:
    """CPU seconds so far of ``root`` (the harness) and its descendants, by role."""
    children = _children()
    totals = {"harness": 0.0, "brokers": 0.0, "zookeeper": 0.0, "other": 0.0}
    stack = [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        seconds = (int(stat[11]) + int(stat[12])) / TICKS  # utime + stime
        if pid == root:
            role = "harness"
        elif b"floodmark.reference" in cmdline:
            role = "brokers"
        elif b"zookeeper" in cmdline.lower():
            role = "zookeeper"
        else:
            role = "other"
        totals[role] += seconds
    return totals


# --------------------------------------------------------------------------- one run


def run_once(store: Path, cluster: str, time_limit: float, rate: float, concurrency: int) -> RunFigures:
    argv = [sys.executable, "-m", "floodmark", "run", "--cluster", cluster, "--nemesis", "none",
            "--time-limit", str(time_limit), "--rate", str(rate), "--concurrency", str(concurrency),
            "--store", str(store), "--seed", "1"]
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first_op: float | None = None
    window_start: tuple[float, dict[str, float], int] | None = None
    window_end: tuple[float, dict[str, float], int] | None = None
    measure_cpu = cluster == "local"
    while process.poll() is None:
        history = newest_history(store)
        now = time.monotonic()
        if first_op is None and history is not None and first_client_invoke(history):
            first_op = now - started
        if measure_cpu and first_op is not None and history is not None:
            into_phase = now - started - first_op
            if window_start is None and into_phase >= WARM_UP:
                window_start = (now, process_cpu(process.pid), client_completions(history))
            elif window_end is None and into_phase >= time_limit - 1.0:
                window_end = (now, process_cpu(process.pid), client_completions(history))
        time.sleep(0.05)
    stderr = process.stderr.read() if process.stderr else ""
    history = newest_history(store)
    if history is None:
        print(stderr, file=sys.stderr)
        raise SystemExit("the run left no history")
    figures = RunFigures(first_op, throughput(history), process.returncode)
    if window_start is not None and window_end is not None:
        figures.window_ops = window_end[2] - window_start[2]
        figures.cpu = {role: window_end[1][role] - window_start[1][role] for role in window_end[1]}
        figures.cpu["wall"] = window_end[0] - window_start[0]
    if process.returncode != 0:
        print(stderr[-2000:], file=sys.stderr)
    return figures


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


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


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
        from floodmark.backends.images import ensure_images

        ensure_images(docker.from_env())  # build outside the timed runs
    anchor = machine_speed()
    print(f"calibration: machine_speed {anchor:.3f} s (about 0.3 on a quiet 3 GHz core); {load_average()}",
          flush=True)
    for cluster in backends:
        runs: list[RunFigures] = []
        for n in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="fm-bench-") as store:
                figures = run_once(Path(store), cluster, args.time_limit, args.rate, args.concurrency)
            runs.append(figures)
            first = figures.first_op
            line = (f"{cluster} run {n + 1}: first op after {first if first is None else round(first, 2)} s, "
                    f"{figures.ops_per_second:.0f} client ops/s, exit {figures.exit_code}")
            if figures.window_ops:
                cpu = figures.cpu
                line += (f"; CPU s per 1,000 ops: harness {figures.cpu_per_kop('harness'):.3f}, "
                         f"brokers {figures.cpu_per_kop('brokers'):.3f}, zookeeper "
                         f"{figures.cpu_per_kop('zookeeper'):.3f} ({figures.window_ops} ops, "
                         f"{cpu['harness'] + cpu['brokers']:.1f} CPU s in {cpu['wall']:.1f} s)")
            print(line + f"; {load_average()}", flush=True)
        firsts = [r.first_op for r in runs if r.first_op is not None]
        if firsts:
            print(f"{cluster}: median time from `floodmark run` to first op: {statistics.median(firsts):.2f} s "
                  f"(target < {10 if cluster == 'local' else 30} s)")
        rate = statistics.median(r.ops_per_second for r in runs)
        print(f"{cluster}: median sustained throughput, no faults: {rate:.0f} ops/s (target >= 2000 on local); "
              f"anchor ratio {anchor / 0.3:.2f} (machine_speed / 0.3 s), so {rate * anchor / 0.3:.0f} ops/s "
              f"scaled to a 0.3 s anchor")
        measured = [r for r in runs if r.window_ops]
        if measured:
            per_kop = statistics.median(r.cpu_per_kop() for r in measured)
            cores = os.cpu_count() or 1
            harness = statistics.median(r.cpu_per_kop("harness") for r in measured)
            print(f"{cluster}: median CPU per 1,000 ops (harness + brokers): {per_kop:.3f} s, of which the "
                  f"harness {harness:.3f} s; a quiet machine with {cores} cores would sustain about "
                  f"{1000.0 * min(cores / per_kop, 1.0 / harness):.0f} ops/s if CPU-bound (the harness is one "
                  f"thread: at most {1000.0 / harness:.0f})")
    print(f"calibration after the runs: machine_speed {machine_speed():.3f} s; {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
