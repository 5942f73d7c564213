"""Benchmark: Spark ingest and check throughput, local[1] against local[2], and in-process.

Two inputs, both generated from seeds by floodmark.checkers.synthetic (correct runs with
node events):
  * a corpus of --runs runs (default 1,000) of --run-ops client ops each;
  * one history of --single-ops ops (default 10^6; pass 10000000 for the 10^7 figure).
For each Spark master the store is ingested from scratch and then re-checked (the corpus by
run, the single history by partition); the in-process checkers check the same inputs in one
Python process as the anchor. Figures are medians of --repeats runs.

    python bench/bench_pipeline.py [--runs 1000] [--single-ops 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from floodmark.checkers import synthetic  # noqa: E402
from floodmark.checkers.registry import check_history  # noqa: E402
from tests.pipeline_fixtures import write_synthetic_run  # noqa: E402


def build_inputs(root: Path, runs: int, run_ops: int, single_ops: int) -> tuple[Path, Path, int, int]:
    corpus, single = root / "corpus", root / "single"
    corpus_ops = 0
    for seed in range(runs):
        run = synthetic.queue_run(seed, ops=run_ops, partitions=3)
        corpus_ops += len(run.history)
        write_synthetic_run(corpus, f"suite-{seed % 10}", run, seed)
    big = synthetic.queue_run(10_000, ops=single_ops, partitions=8, processes=16)
    write_synthetic_run(single, "big", big, 10_000)
    return corpus, single, corpus_ops, len(big.history)


def in_process(store: Path) -> float:
    from floodmark.checkers.registry import read_config
    from floodmark.history import read_history
    from floodmark.node_events import read_events_dir
    from floodmark.pipeline.records import find_runs
    from floodmark.rundir import RunDir

    started = time.perf_counter()
    for path in find_runs(store):
        rd = RunDir(path)
        check_history(read_history(rd.history), read_events_dir(rd.events), read_config(rd))
    return time.perf_counter() - started


def spark_pass(master: str, store: Path, mode: str) -> tuple[float, float]:
    from floodmark.pipeline.ingest import ingest, load_table
    from floodmark.pipeline.scale_check import check_runs
    from floodmark.pipeline.session import get_session

    spark = get_session(master, progress=False)
    parquet = Path(tempfile.mkdtemp(prefix="fm-bench-parquet-"))
    try:
        started = time.perf_counter()
        ingest(spark, store, parquet)
        ingested = time.perf_counter()
        tables = {t: load_table(spark, parquet, t) for t in ("runs", "ops", "node_events")}
        verdicts, anomalies = check_runs(spark, tables["runs"], tables["ops"], tables["node_events"],
                                         mode=mode)  # type: ignore[arg-type]
        verdicts.count()
        anomalies.count()
        checked = time.perf_counter()
        return ingested - started, checked - ingested
    finally:
        shutil.rmtree(parquet, ignore_errors=True)
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--run-ops", type=int, default=500)
    parser.add_argument("--single-ops", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--masters", default="local[1],local[2]")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="fm-bench-pipeline-"))
    try:
        t0 = time.perf_counter()
        corpus, single, corpus_ops, single_ops = build_inputs(root, args.runs, args.run_ops, args.single_ops)
        print(f"generated {args.runs} runs ({corpus_ops:,} ops) and one history of {single_ops:,} ops "
              f"in {time.perf_counter() - t0:.0f} s")
        inputs = [("corpus", corpus, corpus_ops, "run"), ("single history", single, single_ops, "partition")]
        print(f"{'input':<16}{'engine':<18}{'ingest s':>10}{'ingest ops/s':>14}{'check s':>10}{'check ops/s':>14}")
        for name, store, ops, mode in inputs:
            anchor = statistics.median(in_process(store) for _ in range(args.repeats))
            print(f"{name:<16}{'in-process':<18}{'-':>10}{'-':>14}{anchor:>10.1f}{ops / anchor:>14,.0f}")
            for master in args.masters.split(","):
                passes = [spark_pass(master, store, mode) for _ in range(args.repeats)]
                ingest_s = statistics.median(p[0] for p in passes)
                check_s = statistics.median(p[1] for p in passes)
                print(f"{name:<16}{master + ' by ' + mode:<18}{ingest_s:>10.1f}{ops / ingest_s:>14,.0f}"
                      f"{check_s:>10.1f}{ops / check_s:>14,.0f}   (check {anchor / check_s:.2f}x in-process)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
