"""Checking at scale: the in-process checkers, run inside grouped pandas UDFs on Spark.

Two ways to cut the work:

* **by run**: one group per run, so a corpus of runs is checked in parallel, each run by
  exactly the code ``floodmark check`` uses;
* **by partition**: one group per (run, topic, partition), so a single history too large
  for one process is checked in parallel. Every op about a partition goes to its group (a
  poll or drain that read several partitions is split into one op per partition, keeping its
  index, process and times); nemesis ops and node events that name no partition go to every
  group of their run. This is sound because every guarantee checked here is stated per
  partition (linearizability is P-compositional, and durability, HW, leader and queue
  properties are per partition); run-wide statistics are left to the by-run mode, and
  anomalies that do not belong to one partition (a second controller in one controller
  epoch) are found in every group and deduplicated.

The verdicts are exactly the in-process checkers' verdicts on the same histories; the
differential test in tests/test_pipeline_check.py holds the two to that.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from floodmark.history import Op
from floodmark.node_events import NodeEvent

Mode = Literal["run", "partition"]
PARTITION_LOCAL_CHECKERS = ("durability", "queue", "hw", "leader", "linearizable")

OUTPUT = StructType([
    StructField("run_id", StringType(), False),
    StructField("row_kind", StringType(), False),  # "verdict" | "anomaly"
    StructField("checker", StringType(), False),
    StructField("valid", StringType(), True),
    StructField("type", StringType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", LongType(), True),
    StructField("offsets", ArrayType(LongType()), True),
    StructField("ops", ArrayType(LongType()), True),
    StructField("explanation", StringType(), True),
    StructField("permitted_by", StringType(), True),
])


def _process(text: str) -> int | str:
    return int(text) if text.lstrip("-").isdigit() else text


def ops_from_frame(frame: pd.DataFrame) -> list[Op]:
    frame = frame.sort_values("index")
    return [
        Op(int(i), int(t), ty, _process(p), f, json.loads(v) if isinstance(v, str) else None,
           n if isinstance(n, str) else None, _error(e))
        for i, t, ty, p, f, v, n, e in zip(
            frame["index"], frame["time"], frame["type"], frame["process"], frame["f"],
            frame["value_json"], frame["node"], frame["error"], strict=True)
    ]


def _error(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text) if text[:1] in "[{" else text
    except ValueError:
        return text


def events_from_frame(frame: pd.DataFrame) -> dict[str, list[NodeEvent]]:
    events: dict[str, list[NodeEvent]] = {}
    for node, seq, wall, kind, fields in zip(
        frame["node"], frame["seq"], frame["wall"], frame["kind"], frame["fields_json"], strict=True
    ):
        events.setdefault(node, []).append(NodeEvent(node, int(seq), float(wall), kind, json.loads(fields)))
    for node_events in events.values():
        node_events.sort(key=lambda e: e.seq)
    return events


def _output_rows(run_id: str, results: dict[str, Any], checkers: tuple[str, ...] | None) -> Iterator[dict[str, Any]]:
    for name, result in results["checkers"].items():
        if checkers is not None and name not in checkers:
            continue
        yield {"run_id": run_id, "row_kind": "verdict", "checker": name, "valid": _text(result["valid"])}
        for a in result["anomalies"]:
            yield {"run_id": run_id, "row_kind": "anomaly", "checker": name, "type": a["type"],
                   "topic": a.get("topic"), "partition": a.get("partition"),
                   "offsets": list(a.get("offsets") or []), "ops": list(a.get("ops") or []),
                   "explanation": a.get("explanation"), "permitted_by": a.get("permitted_by")}


def _text(valid: Any) -> str:
    return "true" if valid is True else "false" if valid is False else str(valid)


def _checker(configs: dict[str, str], checkers: tuple[str, ...] | None, time_limit: float | None):  # type: ignore[no-untyped-def]
    from floodmark.checkers.registry import check_history, default_checker_names

    def check(ops_frame: pd.DataFrame, events_frame: pd.DataFrame) -> pd.DataFrame:
        if ops_frame.empty:
            return pd.DataFrame([], columns=OUTPUT.fieldNames())
        run_id = str(ops_frame["run_id"].iloc[0])
        config = json.loads(configs.get(run_id) or "{}")
        names = checkers or default_checker_names(config.get("workload"))
        results = check_history(ops_from_frame(ops_frame), events_from_frame(events_frame), config,
                                checkers=list(names), time_limit=time_limit)
        columns = OUTPUT.fieldNames()
        # Every cell filled (None, not NaN) so Arrow sees lists or nulls in the list columns.
        rows = [[row.get(c) for c in columns] for row in _output_rows(run_id, results, checkers)]
        return pd.DataFrame(rows, columns=columns, dtype=object)

    return check


def _split_by_partition(ops: DataFrame) -> DataFrame:
    """Each op once per partition it is about; multi-partition values filtered to that partition."""

    def keys(f: str, value_json: str, topic: str | None, partition: int | None) -> list[str]:
        if topic is not None and partition is not None:
            return [f"{topic}\u0000{partition}"]
        try:
            value = json.loads(value_json)
        except (TypeError, ValueError):
            return []
        if isinstance(value, list):
            return sorted({f"{v['topic']}\u0000{v['partition']}" for v in value
                           if isinstance(v, dict) and "topic" in v and "partition" in v})
        return []

    keys_udf = F.udf(keys, ArrayType(StringType()))

    def restrict(value_json: str, key: str) -> str:
        value = json.loads(value_json)
        if isinstance(value, list):
            topic, partition = key.split("\u0000")
            value = [v for v in value if isinstance(v, dict) and v.get("topic") == topic
                     and str(v.get("partition")) == partition]
        return json.dumps(value, separators=(",", ":"))

    restrict_udf = F.udf(restrict, StringType())
    client = ops.where(F.col("process") != "nemesis").withColumn(
        "pkey", F.explode(keys_udf("f", "value_json", "topic", "partition")))
    client = client.withColumn("value_json", restrict_udf("value_json", "pkey"))
    pkeys = client.select("run_id", "pkey").distinct()
    nemesis = ops.where(F.col("process") == "nemesis").join(pkeys, "run_id")
    return client.unionByName(nemesis)


def check_runs(
    spark: SparkSession, runs: DataFrame, ops: DataFrame, events: DataFrame, *,
    mode: Mode = "run", checkers: tuple[str, ...] | None = None, time_limit: float | None = None,
) -> tuple[DataFrame, DataFrame]:
    """Re-check runs on Spark. Returns (verdicts, anomalies).

    ``verdicts`` has one row per (run_id, checker) plus an ``overall`` row per run, merged
    with priority false > unknown > true; ``anomalies`` has the schema of the ``anomalies``
    table (first_op_time filled from the ops).
    """
    configs = {r.run_id: r.config_json for r in runs.select("run_id", "config_json").collect()}
    ops = ops.drop("batch")
    events = events.drop("batch")
    if mode == "run":
        groups = ["run_id"]
        grouped_ops, grouped_events = ops, events
    else:
        if checkers is None:
            checkers = PARTITION_LOCAL_CHECKERS
        grouped_ops = _split_by_partition(ops)
        pkeys = grouped_ops.select("run_id", "pkey").distinct()
        located = events.where(F.col("topic").isNotNull()).withColumn(
            "pkey", F.concat_ws("\u0000", "topic", F.col("partition").cast("string")))
        shared = events.where(F.col("topic").isNull()).join(pkeys, "run_id")
        grouped_events = located.unionByName(shared)
        groups = ["run_id", "pkey"]
    checker = _checker(configs, checkers, time_limit)
    out = (
        grouped_ops.groupBy(*groups).cogroup(grouped_events.groupBy(*groups))
        .applyInPandas(checker, OUTPUT)
    )
    out = out.persist()
    verdicts = _merge_verdicts(out.where("row_kind = 'verdict'"))
    anomaly_columns = ["run_id", "checker", "type", "topic", "partition", "offsets", "ops",
                       "explanation", "permitted_by"]
    anomalies = out.where("row_kind = 'anomaly'").select(*anomaly_columns).dropDuplicates()
    times = ops.select("run_id", F.col("index").alias("op"), "time")
    first = (anomalies.withColumn("op", F.explode_outer("ops")).join(times, ["run_id", "op"], "left")
             .groupBy(*anomaly_columns).agg(F.min("time").alias("first_op_time")))
    first = first.withColumn("partition", F.col("partition").cast("int"))
    return verdicts, first


def _merge_verdicts(rows: DataFrame) -> DataFrame:
    rank = F.when(F.col("valid") == "false", 2).when(F.col("valid") == "true", 0).otherwise(1)
    per_checker = rows.groupBy("run_id", "checker").agg(F.max(rank).alias("rank"))
    overall = per_checker.groupBy("run_id").agg(F.max("rank").alias("rank")).withColumn("checker", F.lit("overall"))
    merged = per_checker.unionByName(overall)
    return merged.select(
        "run_id", "checker",
        F.when(F.col("rank") == 2, "false").when(F.col("rank") == 0, "true").otherwise("unknown").alias("valid"),
    )


def in_process_results(ops: list[Op], events: dict[str, list[NodeEvent]], config: dict[str, Any],
                       checkers: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The same check without Spark (for the differential test and the benchmark)."""
    from floodmark.checkers.registry import check_history

    return check_history(ops, events, config, checkers=list(checkers) if checkers else None)
