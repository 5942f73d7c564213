"""Aggregates: the questions a regression suite asks of all its runs.

* anomaly counts and rates by nemesis, variant, workload and code version;
* detection per variant: how many runs were caught, and how soon (time from the start of the
  run to the earliest op that witnesses an anomaly);
* latency distributions of client ops during and outside faults;
* unavailability: per run and partition, the gaps between successful ops longer than a
  threshold, and whether they overlap a fault;
* the failing seeds, each with the command that reproduces it.

Per-run work that needs the ops in order (pairing invocations with completions, finding
fault intervals) runs in grouped pandas UDFs, one group per run; everything else is Spark SQL.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

DIMENSIONS = ("nemesis", "variant", "workload", "code_version")
UNAVAILABILITY_THRESHOLD_NS = 1_000_000_000

LATENCY_SCHEMA = StructType([
    StructField("run_id", StringType(), False),
    StructField("f", StringType(), False),
    StructField("outcome", StringType(), False),
    StructField("latency_ns", LongType(), False),
    StructField("during_fault", BooleanType(), False),
])

GAP_SCHEMA = StructType([
    StructField("run_id", StringType(), False),
    StructField("topic", StringType(), False),
    StructField("partition", LongType(), False),
    StructField("start_ns", LongType(), False),
    StructField("duration_ns", LongType(), False),
    StructField("during_fault", BooleanType(), False),
])


def anomaly_rates(runs: DataFrame, anomalies: DataFrame, dimension: str) -> DataFrame:
    """Per value of ``dimension`` and anomaly type: anomalies, runs showing it, and its rate."""
    totals = runs.groupBy(dimension).agg(F.count("*").alias("runs"))
    per_type = (
        anomalies.join(runs.select("run_id", dimension), "run_id")
        .groupBy(dimension, "type")
        .agg(F.count("*").alias("anomalies"), F.countDistinct("run_id").alias("runs_with_type"))
    )
    return (
        per_type.join(totals, dimension, "right")
        .withColumn("rate", F.col("runs_with_type") / F.col("runs"))
        .orderBy(dimension, "type")
    )


def detection(runs: DataFrame, anomalies: DataFrame) -> DataFrame:
    """Per variant: runs, runs found invalid, runs with no verdict (unknown, or never checked:
    neither valid nor invalid), detection rate, median time to first anomaly (s)."""
    start = _run_start(runs)
    first = anomalies.groupBy("run_id").agg(F.min("first_op_time").alias("first_anomaly_time"))
    per_run = runs.join(first, "run_id", "left").join(start, "run_id", "left")
    per_run = per_run.withColumn(
        "time_to_first_s", (F.col("first_anomaly_time") - F.col("start_time")) / F.lit(1e9)
    )
    return (
        per_run.groupBy("variant")
        .agg(
            F.count("*").alias("runs"),
            F.sum(F.when(F.col("valid") == "false", 1).otherwise(0)).alias("invalid_runs"),
            F.sum(F.when(F.col("valid").isin("true", "false"), 0).otherwise(1)).alias("unknown_runs"),
            F.percentile_approx("time_to_first_s", 0.5).alias("median_time_to_first_anomaly_s"),
        )
        .withColumn("detection_rate", F.col("invalid_runs") / F.col("runs"))
        .orderBy("variant")
    )


def _run_start(runs: DataFrame) -> DataFrame:
    # Histories start at time 0 by contract; kept as a column so the formula reads plainly.
    return runs.select("run_id", F.lit(0).cast("long").alias("start_time"))


def failing_seeds(runs: DataFrame) -> DataFrame:
    return (
        runs.where(F.col("valid") == "false")
        .select("run_id", "test", "seed", "variant", "nemesis", "workload", "code_version",
                F.concat(F.lit("floodmark repro "), F.col("path")).alias("repro"))
        .orderBy("test", "seed")
    )


def _fault_intervals(frame: pd.DataFrame) -> list[tuple[int, int]]:
    """[start, end) of every fault, from nemesis start-*/stop-* ops (an unhealed fault runs to the end)."""
    nemesis = frame[frame["process"] == "nemesis"].sort_values("index")
    end_of_run = int(frame["time"].max()) if len(frame) else 0
    open_since: dict[str, int] = {}
    intervals: list[tuple[int, int]] = []
    for f, t in zip(nemesis["f"], nemesis["time"], strict=True):
        kind = f.split("-", 1)[1] if "-" in f else f
        if f.startswith("start-"):
            open_since.setdefault(kind, int(t))
        elif f.startswith("stop-") and kind in open_since:
            intervals.append((open_since.pop(kind), int(t)))
        elif f == "heal-all":
            intervals += [(s, int(t)) for s in open_since.values()]
            open_since.clear()
    intervals += [(s, end_of_run) for s in open_since.values()]
    return sorted(intervals)


def _overlaps(intervals: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(s < end and start < e for s, e in intervals)


def _latencies(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.sort_values("index")
    faults = _fault_intervals(frame)
    open_invoke: dict[str, tuple[int, str]] = {}
    rows: list[dict[str, Any]] = []
    for process, op_type, f, t in zip(frame["process"], frame["type"], frame["f"], frame["time"], strict=True):
        if process == "nemesis":
            continue
        if op_type == "invoke":
            open_invoke[process] = (int(t), f)
        elif process in open_invoke:
            started, invoked_f = open_invoke.pop(process)
            rows.append({"run_id": frame["run_id"].iloc[0], "f": invoked_f, "outcome": op_type,
                         "latency_ns": int(t) - started, "during_fault": _overlaps(faults, started, int(t))})
    return pd.DataFrame(rows, columns=LATENCY_SCHEMA.fieldNames())


def latencies(ops: DataFrame) -> DataFrame:
    """One row per completed client op: its latency and whether a fault was active."""
    return ops.select("run_id", "index", "time", "type", "process", "f").groupBy("run_id").applyInPandas(
        _latencies, LATENCY_SCHEMA
    )


def latency_distribution(runs: DataFrame, latency: DataFrame) -> DataFrame:
    return (
        latency.join(runs.select("run_id", "variant", "nemesis"), "run_id")
        .groupBy("variant", "nemesis", "f", "during_fault")
        .agg(
            F.count("*").alias("ops"),
            *[F.percentile_approx(F.col("latency_ns") / F.lit(1e6), q).alias(f"p{int(q * 100)}_ms")
              for q in (0.5, 0.95, 0.99)],
            F.max(F.col("latency_ns") / F.lit(1e6)).alias("max_ms"),
        )
        .orderBy("variant", "nemesis", "f", "during_fault")
    )


def _partitions_of(f: str, value_json: str, topic: Any, partition: Any) -> list[tuple[str, int]]:
    if topic is not None and partition is not None and not pd.isna(partition):
        return [(str(topic), int(partition))]
    if f in ("poll", "drain"):
        try:
            value = json.loads(value_json)
        except (TypeError, ValueError):
            return []
        if isinstance(value, list):
            return [(str(v["topic"]), int(v["partition"])) for v in value
                    if isinstance(v, dict) and "topic" in v and "partition" in v and v.get("records")]
    return []


def _gaps(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.sort_values("index")
    faults = _fault_intervals(frame)
    run_id = frame["run_id"].iloc[0]
    end_of_run = int(frame["time"].max())
    oks = frame[(frame["type"] == "ok") & (frame["process"] != "nemesis")]
    last_ok: dict[tuple[str, int], int] = {}
    rows: list[dict[str, Any]] = []

    def gap(key: tuple[str, int], start: int, end: int) -> None:
        if end - start > UNAVAILABILITY_THRESHOLD_NS:
            rows.append({"run_id": run_id, "topic": key[0], "partition": key[1], "start_ns": start,
                         "duration_ns": end - start, "during_fault": _overlaps(faults, start, end)})

    for f, value_json, topic, partition, t in zip(
        oks["f"], oks["value_json"], oks["topic"], oks["partition"], oks["time"], strict=True
    ):
        for key in _partitions_of(f, value_json, topic, partition):
            if key in last_ok:
                gap(key, last_ok[key], int(t))
            last_ok[key] = int(t)
    for key, t in last_ok.items():
        gap(key, t, end_of_run)
    return pd.DataFrame(rows, columns=GAP_SCHEMA.fieldNames())


def unavailability(ops: DataFrame) -> DataFrame:
    """Per run and partition, every interval longer than 1 s with no successful op on it."""
    cols = ["run_id", "index", "time", "type", "process", "f", "topic", "partition", "value_json"]
    return ops.select(*cols).groupBy("run_id").applyInPandas(_gaps, GAP_SCHEMA)


def unavailability_distribution(runs: DataFrame, gaps: DataFrame) -> DataFrame:
    return (
        gaps.join(runs.select("run_id", "variant", "nemesis"), "run_id")
        .groupBy("variant", "nemesis", "during_fault")
        .agg(
            F.count("*").alias("windows"),
            F.sum(F.col("duration_ns") / F.lit(1e9)).alias("total_s"),
            F.percentile_approx(F.col("duration_ns") / F.lit(1e9), 0.5).alias("p50_s"),
            F.max(F.col("duration_ns") / F.lit(1e9)).alias("max_s"),
        )
        .orderBy("variant", "nemesis", "during_fault")
    )
