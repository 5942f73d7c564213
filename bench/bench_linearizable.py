"""Linearizability checking time: the reference histories, and generated ones by concurrency.

    python bench/bench_linearizable.py [--histories DIR] [--repeat 5] [--ops 2000] [--time-limit 30]
                                       [--etcd DIR] [--porcupine-kv DIR] [--kv-only]

First, beside Porcupine v1.3.0's figures on this machine: the start-up of ``floodmark check``,
the whole-process CPU time of checking a batch of Jepsen etcd histories in one process, and
the check-only time of key-value histories (the shared c10 ones, and generated 50-client ones
correct and with an illegal early get in three keys) with Porcupine's figure and the ratio
(``--kv-only``: just that table). Then, for every history in ``EXPECTED.tsv``, the verdict, whether it matches, and the median
checking time (CPU seconds of this process, so other load on the machine does not inflate
it) over ``--repeat`` runs; then, for generated ``log-lin`` and CAS-register histories with
10, 50 and 100 concurrent processes, the median time for the correct history and for the
same history with one corrupted read; finally the peak memory (tracemalloc peak of one
check of the largest etcd history, and the process's peak RSS).
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from calibration import machine_speed

from floodmark.checkers.api import CheckInput
from floodmark.checkers.linearizability.checker import (
    LinearizableChecker,
    format_conventions,
    infer_model,
)
from floodmark.checkers.linearizability.synthetic import (
    corrupt_read,
    illegal_gets,
    kv_run,
    log_lin_run,
    register_run,
)
from floodmark.contracts.history import Op
from floodmark.formats.detect import load_history

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = [REPO / "data/histories", REPO.parent / "shared/data/histories", Path("/work/shared/data/histories")]


def timed(checker: LinearizableChecker, run: CheckInput, repeat: int) -> tuple[Any, float, dict[str, Any]]:
    times = []
    result = None
    for _ in range(repeat):
        started = time.process_time()
        result = checker.check(run)
        times.append(time.process_time() - started)
    assert result is not None
    return result.valid, statistics.median(times), result.stats


def reference(directory: Path, repeat: int, time_limit: float) -> None:
    with open(directory / "EXPECTED.tsv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    print(f"== reference histories ({len(rows)}, median of {repeat} runs, CPU ms) ==")
    matched = 0
    by_folder: dict[str, list[float]] = {}
    for row in rows:
        loaded = load_history(directory / row["path"])
        model = infer_model(loaded.ops)
        checker = LinearizableChecker(model=model, **format_conventions(loaded.format, model))
        valid, median, stats = timed(checker, CheckInput(loaded.ops, time_limit=time_limit), repeat)
        expected = row["expected"].split()[0] == "linearizable"
        matched += valid is expected
        folder = "/".join(row["path"].split("/")[:2])
        by_folder.setdefault(folder, []).append(median)
        print(f"{row['path']:60} {model:15} {str(valid):8} {'ok' if valid is expected else 'MISMATCH':8} "
              f"{median * 1e3:9.2f} ms  {stats['calls']:5} calls {stats['configurations_explored']:7} configs")
    print(f"verdicts matching EXPECTED.tsv: {matched}/{len(rows)}")
    for folder, times in sorted(by_folder.items()):
        print(f"  {folder:30} {len(times):4} histories  median {statistics.median(times) * 1e3:8.2f} ms"
              f"  max {max(times) * 1e3:8.2f} ms")
    etcd = sorted((directory / "porcupine/jepsen-etcd").glob("*.log"), key=lambda p: p.stat().st_size)
    if etcd:
        loaded = load_history(etcd[-1])
        checker = LinearizableChecker(model="cas-register", **format_conventions(loaded.format, "cas-register"))
        tracemalloc.start()
        checker.check(CheckInput(loaded.ops))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"tracemalloc peak while checking {etcd[-1].name}: {peak / 2**20:.2f} MiB")


def generated(ops: int, repeat: int, time_limit: float) -> None:
    print(f"== generated histories ({ops} ops, median of {repeat} runs, CPU s, time limit {time_limit} s) ==")
    print(f"{'model':13} {'processes':>9} {'correct':>8} {'time':>9} {'configs':>9} {'corrupted':>10} {'time':>9}")
    for name, generate in (("log", log_lin_run), ("cas-register", register_run)):
        for processes in (10, 50, 100):
            run = generate(1, ops=ops, processes=processes)
            checker = LinearizableChecker(model=name)
            good = timed(checker, CheckInput(run.history, config=run.config, time_limit=time_limit), repeat)
            bad_run = corrupt_read(run, 1)
            bad = timed(checker, CheckInput(bad_run.history, config=bad_run.config, time_limit=time_limit), repeat)
            print(f"{name:13} {processes:9} {str(good[0]):>8} {good[1]:9.3f} {good[2]['configurations_explored']:9}"
                  f" {str(bad[0]):>10} {bad[1]:9.3f}")




# Porcupine v1.3.0's figures on this machine (issue #13): its check time per batch or file.
PORCUPINE_ETCD_BATCH = (99, 0.47)  # 99 Jepsen etcd histories, seconds in all
PORCUPINE_KV_MS = {"c10-ok.txt": 1.8, "c10-bad.txt": 1.6, "c50-ok.txt": 409.0, "c50-bad.txt": 55.0}  # check only, ms
GENERATED_KV_SEEDS = (7, 8)


def _child_cpu(command: list[str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, exit code) of a whole ``floodmark`` process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall, done.returncode


def against_porcupine(directory: Path, etcd_dir: Path | None, kv_dir: Path | None, repeat: int) -> None:
    """Whole-process and check-only times beside Porcupine's (the best of ``repeat`` runs)."""
    print(f"== against Porcupine v1.3.0 (best of {repeat}; CPU seconds of the whole process) ==")
    python = [sys.executable, "-m", "floodmark"]
    startup = min(_child_cpu(python + ["check", "--help"])[0] for _ in range(repeat))
    bare = min(_child_cpu([sys.executable, "-c", "pass"])[0] for _ in range(repeat))
    print(f"start-up: floodmark check --help {startup:.3f} s (a bare interpreter: {bare:.3f} s; target 0.1 s)")
    etcd = sorted((etcd_dir or directory / "porcupine/jepsen-etcd").glob("*.log"))
    if etcd:
        runs = [_child_cpu(python + ["check", *map(str, etcd)]) for _ in range(repeat)]
        cpu, wall = min(r[0] for r in runs), min(r[1] for r in runs)
        count, seconds = PORCUPINE_ETCD_BATCH
        anchor = seconds * len(etcd) / count
        print(f"etcd batch: {len(etcd)} histories in one process: {cpu:.3f} CPU s ({wall:.3f} s wall); "
              f"Porcupine {anchor:.3f} s ({seconds} s for {count}, scaled); ratio {cpu / anchor:.2f}")
    kv_against_porcupine(kv_dir or directory / "porcupine/kv", max(repeat, 7))


def kv_against_porcupine(kv: Path, repeat: int) -> None:
    """Check-only time of key-value histories beside Porcupine's: the shared c10 files, c50
    files if given, and generated 50-client histories of the same shape (Porcupine's own c50
    files are kept aside, so its c50 figures are the anchor, not a same-file comparison)."""
    print(f"== kv, check only (median of {repeat} runs, CPU ms) ==")
    print(f"{'history':36} {'verdict':8} {'floodmark':>10} {'Porcupine':>10} {'ratio':>6}  configurations")
    rows: list[tuple[str, list[Op], float]] = []
    for name, porcupine_ms in PORCUPINE_KV_MS.items():
        if (kv / name).is_file():
            rows.append((f"{name} (Porcupine's)", load_history(kv / name).ops, porcupine_ms))
    for seed in GENERATED_KV_SEEDS:
        run = kv_run(seed, ops=2000, processes=50)
        rows.append((f"generated c50-ok seed {seed}", run.history, PORCUPINE_KV_MS["c50-ok.txt"]))
        rows.append((f"generated c50-bad seed {seed}", illegal_gets(run, seed).history, PORCUPINE_KV_MS["c50-bad.txt"]))
    for label, ops, porcupine_ms in rows:
        valid, median, stats = timed(LinearizableChecker(model="kv"), CheckInput(ops), repeat)
        print(f"{label:36} {str(valid):8} {median * 1e3:10.2f} {porcupine_ms:10.1f} {median * 1e3 / porcupine_ms:6.2f}"
              f"  {stats['configurations_explored']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", type=Path,
                        default=next((p for p in CANDIDATES if (p / "EXPECTED.tsv").is_file()), CANDIDATES[0]))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--skip-generated", action="store_true")
    parser.add_argument("--kv-only", action="store_true", help="only the key-value table beside Porcupine")
    parser.add_argument("--etcd", type=Path, default=None,
                        help="a folder of Jepsen etcd logs for the whole-process batch (default: the reference ones)")
    parser.add_argument("--porcupine-kv", type=Path, default=None,
                        help="Porcupine's test_data/kv, for the c50 figures")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"reference loop {machine_speed():.2f} CPU s (about 0.3 s when idle)")
    if args.kv_only:
        kv_against_porcupine(args.porcupine_kv or args.histories / "porcupine/kv", max(args.repeat, 7))
        return 0
    against_porcupine(args.histories, args.etcd, args.porcupine_kv, args.repeat)
    if (args.histories / "EXPECTED.tsv").is_file():
        reference(args.histories, args.repeat, args.time_limit)
    else:
        print(f"(no reference histories at {args.histories})")
    if not args.skip_generated:
        generated(args.ops, max(1, args.repeat // 2), args.time_limit)
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
