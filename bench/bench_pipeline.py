"""Benchmark: the Spark pipeline on local[1] and local[2] against the in-process checkers.

Two inputs, generated once under --data and reused by later invocations:
  * a corpus of --runs runs (default 1,000) of about 2 x --run-ops history entries each
    (floodmark.checkers.synthetic.queue_run), spread over three variants and three nemeses;
  * one history of --single-history-ops entries (default 10^7), streamed to disk by
    pipeline_fixtures.write_large_queue_run (8 partitions, 16 client processes).

For each input the anchor is the in-process way: read the run directory and run the checkers
(what `floodmark check` does; the single history gets the checkers that by-partition checking
runs, so both sides do the same work), in a child process whose peak memory is reported. The
in-process checkers hold a whole run as Python objects (about 2 KB per history entry with its
node events), so a single history above --in-process-max-ops does not fit in this machine's
memory: they are then measured on a run of that size with the same shape, and their time and
memory projected linearly, which the output says. For each Spark master the
input is ingested into a fresh Parquet store and re-checked (the corpus by run, the single
history by partition). Then one analysis question is answered both ways: per variant and
nemesis, how many client ops completed ok/fail/info and their p99 latency, from Parquet on
Spark against re-reading every run directory in process. Figures are medians of --repeats.

    python bench/bench_pipeline.py                              # everything (~20 min idle)
    python bench/bench_pipeline.py --single-history-ops 0       # corpus only
    python bench/bench_pipeline.py --runs 0 --single-history-ops 10000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"))

from calibration import machine_speed  # noqa: E402
from pipeline_fixtures import write_large_queue_run, write_synthetic_run  # noqa: E402

from floodmark.checkers import synthetic  # noqa: E402
from floodmark.checkers.registry import check_history  # noqa: E402
from floodmark.contracts.history import iter_history, read_history  # noqa: E402
from floodmark.contracts.node_events import read_events_dir  # noqa: E402
from floodmark.contracts.run_config import read_test_config  # noqa: E402
from floodmark.pipeline.records import find_runs  # noqa: E402
from floodmark.run_dirs.rundir import RunDir  # noqa: E402

VARIANTS = ("default", "truncate-to-hw", "unclean-election")
NEMESES = ("partition", "kill", "pause")
SINGLE_CHECKERS = ("durability", "queue", "hw", "leader")  # the queue defaults that are partition-local
DRIVER_MEMORY = "4g"  # of 24 GB; local executors share it, Python workers live outside it
IN_PROCESS_MAX_OPS = 2_000_000  # the in-process checkers hold a whole run as Python objects


def build_corpus(data: Path, runs: int, run_ops: int) -> tuple[Path, int]:
    corpus = data / f"corpus-{runs}x{run_ops}"
    if not (corpus / ".complete").exists():
        shutil.rmtree(corpus, ignore_errors=True)
        for seed in range(runs):
            run = synthetic.queue_run(seed, ops=run_ops, partitions=3)
            variant = VARIANTS[seed % 3]
            run.config = run.config.replace(variant=variant, nemesis=(NEMESES[seed // 3 % 3],),
                                            unclean_leader_election=variant == "unclean-election")
            write_synthetic_run(corpus, f"suite-{seed % 10}", run, seed)
        (corpus / ".complete").write_text("")
    return corpus, sum(_lines(p / "history.jsonl") for p in find_runs(corpus))


def build_single(data: Path, entries: int) -> tuple[Path, int]:
    single = data / f"single-{entries}"
    if not (single / ".complete").exists():
        shutil.rmtree(single, ignore_errors=True)
        write_large_queue_run(single, "big", 10_000, entries=entries, partitions=8, processes=16)
        (single / ".complete").write_text("")
    return single, sum(_lines(p / "history.jsonl") for p in find_runs(single))


def _lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b""))


def in_process_check(store: Path, checkers: tuple[str, ...] | None) -> tuple[float, float, float]:
    """(s reading run directories, s checking, peak GB), in a child process so that its peak
    memory is its own."""
    import json
    import subprocess

    command = [sys.executable, __file__, "--in-process-child", str(store),
               "--checkers", ",".join(checkers or ())]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    read_s, check_s, peak_gb = json.loads(out.strip().splitlines()[-1])
    return read_s, check_s, peak_gb


def _in_process_child(store: Path, checkers: tuple[str, ...] | None) -> None:
    import json
    import resource

    read_s, check_s = _read_and_check(store, checkers)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux
    print(json.dumps([read_s, check_s, peak_gb]))


def _read_and_check(store: Path, checkers: tuple[str, ...] | None) -> tuple[float, float]:
    read_s = check_s = 0.0
    for path in find_runs(store):
        started = time.perf_counter()
        rd = RunDir(path)
        history, events, config = read_history(rd.history), read_events_dir(rd.events), read_test_config(rd.config)
        read = time.perf_counter()
        check_history(history, events, config, checkers=list(checkers) if checkers else None)
        read_s += read - started
        check_s += time.perf_counter() - read
        del history, events
    return read_s, check_s


def in_process_question(store: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The analysis question by re-reading every run directory: per (variant, nemesis),
    client completions by outcome and the p99 latency (exact)."""
    latencies: dict[tuple[str, str], list[int]] = defaultdict(list)
    outcomes: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for path in find_runs(store):
        rd = RunDir(path)
        config = read_test_config(rd.config)
        assert config is not None, f"{rd.config}: the corpus's runs state their configuration"
        key = (config.variant, ",".join(sorted(config.nemesis)))
        invoked: dict[Any, int] = {}
        for op in iter_history(rd.history):
            if op.process == "nemesis":
                continue
            if op.type == "invoke":
                invoked[op.process] = op.time
            elif op.process in invoked:
                latencies[key].append(op.time - invoked.pop(op.process))
                outcomes[key][op.type] += 1
    answer = {}
    for key, values in latencies.items():
        values.sort()
        answer[key] = {**outcomes[key], "p99_ms": values[min(len(values) - 1, int(0.99 * len(values)))] / 1e6}
    return answer


def spark_question(spark: Any, parquet: Path) -> list[Any]:
    """The same question from the Parquet store, in Spark SQL (a window pairs each completion
    with its process's invocation, so no Python runs per op)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from floodmark.pipeline.ingest import load_table

    ops = load_table(spark, parquet, "ops").where(F.col("process") != "nemesis")
    by_process = Window.partitionBy("run_id", "process").orderBy("index")
    paired = (ops.select("run_id", "process", "index", "type", "time")
              .withColumn("invoked", F.lag("time").over(by_process))
              .withColumn("invoke_type", F.lag("type").over(by_process))
              .where((F.col("type") != "invoke") & (F.col("invoke_type") == "invoke")))
    runs = load_table(spark, parquet, "runs").select("run_id", "variant", "nemesis")
    return (paired.join(F.broadcast(runs), "run_id").groupBy("variant", "nemesis").agg(
        *[F.sum(F.when(F.col("type") == t, 1).otherwise(0)).alias(t) for t in ("ok", "fail", "info")],
        F.percentile_approx((F.col("time") - F.col("invoked")) / F.lit(1e6), 0.99).alias("p99_ms"),
    ).orderBy("variant", "nemesis").collect())


def spark_pass(master: str, store: Path, mode: str, checkers: tuple[str, ...] | None,
               question: bool) -> tuple[float, float, float | None]:
    """(ingest s, check s, question s) on a fresh Parquet store."""
    from floodmark.pipeline.ingest import ingest, load_table
    from floodmark.pipeline.scale_check import check_runs
    from floodmark.pipeline.session import get_session

    spark = get_session(master, progress=False, driver_memory=DRIVER_MEMORY)
    parquet = Path(tempfile.mkdtemp(prefix="fm-bench-parquet-"))
    try:
        started = time.perf_counter()
        report = ingest(spark, store, parquet)
        assert not report.rejected, report.summary()
        ingested = time.perf_counter()
        tables = {t: load_table(spark, parquet, t) for t in ("runs", "ops", "node_events")}
        verdicts, anomalies = check_runs(spark, tables["runs"], tables["ops"], tables["node_events"],
                                         mode=mode, checkers=checkers)  # type: ignore[arg-type]
        invalid = verdicts.where("valid != 'true'").count()
        assert invalid == 0 and anomalies.count() == 0, "a correct synthetic run was judged invalid"
        checked = time.perf_counter()
        asked = None
        if question:
            spark_question(spark, parquet)
            asked = time.perf_counter() - checked
        return ingested - started, checked - ingested, asked
    finally:
        shutil.rmtree(parquet, ignore_errors=True)
        spark.stop()


def median_of(repeats: int, measure: Callable[[], Any]) -> Any:
    results = [measure() for _ in range(repeats)]
    if isinstance(results[0], tuple):
        return tuple(statistics.median(r[i] for r in results) if results[0][i] is not None else None
                     for i in range(len(results[0])))
    return statistics.median(results)


def bench_input(name: str, store: Path, ops: int, mode: str, checkers: tuple[str, ...] | None,
                masters: list[str], repeats: int, anchor: tuple[Path, int] | None = None) -> None:
    """``anchor``: a smaller run of the same shape to measure the in-process checkers on, when
    ``store`` is too large for them; their time is then projected linearly (and says so)."""
    print(f"\n== {name}: {ops:,} history entries, checkers {', '.join(checkers) if checkers else 'workload defaults'}")
    anchor_store, anchor_ops = anchor or (store, ops)
    read_s, check_s, peak_gb = median_of(repeats, lambda: in_process_check(anchor_store, checkers))
    scale = ops / anchor_ops
    if anchor is not None:
        print(f"  in-process      measured on {anchor_ops:,} entries: read {read_s:.1f} s  check {check_s:.1f} s  "
              f"peak {peak_gb:.1f} GB; projected x{scale:.1f} (linear) below")
        read_s, check_s, peak_gb = read_s * scale, check_s * scale, peak_gb * scale
    whole = read_s + check_s
    print(f"  in-process      read {read_s:7.1f} s  check {check_s:7.1f} s  read+check {whole:7.1f} s "
          f"({ops / whole:,.0f} ops/s)  peak memory {peak_gb:.1f} GB{' (projected)' if anchor else ''}")
    question_s = median_of(repeats, lambda: _timed(lambda: in_process_question(store)))
    print(f"  in-process      analysis question (re-read every run directory) {question_s:7.1f} s")
    for master in masters:
        ingest_s, spark_check_s, spark_question_s = median_of(
            repeats, lambda m=master: spark_pass(m, store, mode, checkers, question=True))
        print(f"  {master + ' by ' + mode:<15} ingest {ingest_s:7.1f} s ({ops / ingest_s:,.0f} ops/s)  "
              f"check {spark_check_s:7.1f} s ({ops / spark_check_s:,.0f} ops/s)")
        print(f"  {'':<15} check {check_s / spark_check_s:.2f}x in-process check;  "
              f"ingest+check {whole / (ingest_s + spark_check_s):.2f}x in-process read+check;  "
              f"analysis question {spark_question_s:.1f} s = {question_s / spark_question_s:.2f}x in-process")


def _timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000, help="corpus size (0: skip the corpus)")
    parser.add_argument("--run-ops", type=int, default=100, help="client ops per corpus run")
    parser.add_argument("--single-history-ops", type=int, default=10_000_000,
                        help="entries in the single history (0: skip it)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("--in-process-max-ops", type=int, default=IN_PROCESS_MAX_OPS,
                        help="a larger single history is checked in process at this size and projected")
    parser.add_argument("--in-process-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--checkers", default="", help=argparse.SUPPRESS)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "floodmark-bench-pipeline"),
                        help="where inputs are generated once and kept for later invocations")
    args = parser.parse_args()
    if args.in_process_child:
        _in_process_child(Path(args.in_process_child), tuple(args.checkers.split(",")) if args.checkers else None)
        return

    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    masters = args.masters.split(",")
    started = time.perf_counter()
    print(f"reference loop {machine_speed():.2f} CPU s (about 0.3 s when idle), "
          f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    if args.runs:
        t0 = time.perf_counter()
        corpus, ops = build_corpus(data, args.runs, args.run_ops)
        print(f"corpus of {args.runs} runs ready in {time.perf_counter() - t0:.0f} s")
        bench_input(f"corpus of {args.runs} runs", corpus, ops, "run", None, masters, args.repeats)
    if args.single_history_ops:
        t0 = time.perf_counter()
        single, ops = build_single(data, args.single_history_ops)
        size = (single / "big" / "20261121T120000-s10000" / "history.jsonl").stat().st_size
        print(f"\nsingle history ready in {time.perf_counter() - t0:.0f} s ({size / 1e9:.1f} GB of JSONL)")
        anchor = None
        if args.single_history_ops > args.in_process_max_ops:
            anchor = build_single(data, args.in_process_max_ops)
        bench_input("single history", single, ops, "partition", SINGLE_CHECKERS, masters, args.repeats, anchor)
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at the end {os.getloadavg()[0]:.1f}, "
          f"reference loop {machine_speed():.2f} CPU s")


if __name__ == "__main__":
    main()
