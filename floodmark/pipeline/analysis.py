"""One analysis pass over a store: ingest, check at scale, aggregate, summarise.

With the re-check (the default) a run's verdict is the checkers' on the files now in the
store, never the one its results.json recorded: a run the re-check could not judge is
unknown. A run with neither verdict (unknown, or never checked under ``--no-check``) counts
as neither valid nor invalid: the tables count it apart and the summary says how many.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import functions as F

from floodmark.pipeline import aggregate
from floodmark.pipeline.ingest import IngestReport, ingest, load_table
from floodmark.pipeline.session import get_session
from floodmark.pipeline.summary import render_summary, write_table


@dataclass(frozen=True)
class AnalysisResult:
    ingest: IngestReport
    summary_path: Path
    tables: dict[str, int]  # rows per aggregate table


def analyze(
    store: Path, out: Path, parquet: Path, *, master: str | None = None, check: bool = True,
    log: Callable[[str], None] = print,
) -> AnalysisResult:
    """``log`` is told each step as it starts: the analysis's progress (Spark's own console
    progress bar stays off, :mod:`floodmark.pipeline.session`)."""
    spark = get_session(master)
    log(f"spark {spark.version} on {spark.sparkContext.master}; ingesting {store}")
    report = ingest(spark, store, parquet)
    log(report.summary())
    runs = load_table(spark, parquet, "runs")
    anomalies = load_table(spark, parquet, "anomalies")
    ops = load_table(spark, parquet, "ops")
    notes: list[str] = []
    if check:
        from floodmark.pipeline.scale_check import check_runs

        log("re-checking runs on Spark")
        verdicts, anomalies = check_runs(spark, runs, ops, load_table(spark, parquet, "node_events"))
        overall = verdicts.where("checker = 'overall'").select("run_id", F.col("valid").alias("rechecked"))
        recorded = runs
        runs = runs.join(overall, "run_id", "left").withColumn(
            "valid", F.coalesce(F.col("rechecked"), F.lit("unknown"))).drop("rechecked")
        disagreements = (
            verdicts.join(recorded.select("run_id", F.col("valid").alias("recorded")), "run_id")
            .where("checker = 'overall' and valid != recorded and recorded is not null")
            .count()
        )
        unrecorded = recorded.where(F.col("cut_short").isNull()).count()
        if unrecorded:
            notes.append(f"{unrecorded} run(s) were ingested by an older floodmark, which did not record which "
                         "node event files were cut short: their re-check may call invalid what floodmark check "
                         "calls unknown (remove the Parquet store to ingest them again)")
        if disagreements:
            notes.append(f"{disagreements} run(s) got a different verdict from the Spark re-check than the "
                         "one recorded in their results.json (checker changed since the run?)")
    tables = {
        "failing_seeds": aggregate.failing_seeds(runs),
        "detection_by_variant": aggregate.detection(runs, anomalies),
        **{f"anomalies_by_{d}": aggregate.anomaly_rates(runs, anomalies, d) for d in aggregate.DIMENSIONS},
        "latency_during_and_outside_faults": aggregate.latency_distribution(runs, aggregate.latencies(ops)),
        "unavailability": aggregate.unavailability_distribution(runs, aggregate.unavailability(ops)),
    }
    rows = {}
    for name, frame in tables.items():
        log(f"aggregating {name}")
        rows[name] = write_table(frame, out, name)
    without = runs.where(~F.col("valid").isin("true", "false") | F.col("valid").isNull()).count()
    if without:
        notes.append(f"{without} run(s) have no verdict (unknown{'' if check else ', or never checked'}): they "
                     "count as neither valid nor invalid (unknown_runs in detection by variant).")
    if report.rejected:
        notes.append(f"{len(report.rejected)} run(s) were rejected at ingestion; see the command output.")
    summary = render_summary(out, store, rows, notes)
    return AnalysisResult(report, summary, {k: len(v) for k, v in rows.items()})
