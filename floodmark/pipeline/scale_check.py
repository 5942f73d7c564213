"""Checking at scale: the in-process checkers, run inside grouped pandas UDFs on Spark.

Two ways to cut the work:

* **by run**: one group per run, so a corpus of runs is checked in parallel, each run by
  exactly the code ``floodmark check`` uses;
* **by partition**: one group per (run, topic, partition), so a single history too large
  for one process is checked in parallel. Every op about a partition goes to its group (a
  poll or drain that read several partitions is split into one op per partition, keeping its
  index, process and times); nemesis ops and node events that name no partition (few) are
  broadcast and added to every group of their run. This is sound because every guarantee checked here is stated per
  partition (linearizability is P-compositional, and durability, HW, leader and queue
  properties are per partition); run-wide statistics are left to the by-run mode, and
  anomalies that do not belong to one partition (a second controller in one controller
  epoch) are found in every group and deduplicated. Without an explicit list, a run is
  checked by its workload's default checkers that are partition-local.

Splitting ops by partition is Spark SQL (``from_json`` on the value), not Python, so a history
of 10^7 ops is cut up in the JVM; Python sees each group once, in its pandas UDF.

The verdicts are exactly the in-process checkers' verdicts on the same histories; the
differential test in tests/pipeline/test_pipeline_check.py holds the two to that.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal, cast

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from floodmark.contracts.history import Op
from floodmark.contracts.node_events import NodeEvent, event_from_fields
from floodmark.contracts.run_config import TestConfig
from floodmark.inputs.fast_json import loads
from floodmark.pipeline.records import INT64, config_from_json, in_range, json_text

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


def process_of(text: str) -> int | str:
    """A process as the ops table keeps it (text) back to the history's: a number or a name."""
    return int(text) if text.lstrip("-").isdigit() else text


def ops_from_frame(frame: pd.DataFrame, partition: tuple[str, str] | None = None) -> list[Op]:
    """Ops from rows of the ``ops`` table; with ``partition`` (topic, partition as text), the
    entries of multi-partition values (polls, drains) are restricted to that partition."""
    frame = frame.sort_values("index")
    values = [loads(v) if isinstance(v, str) else None for v in frame["value_json"]]
    if partition is not None:
        topic, number = partition
        values = [[v for v in value if isinstance(v, dict) and v.get("topic") == topic
                   and str(v.get("partition")) == number] if isinstance(value, list) else value
                  for value in values]
    return [
        Op(int(i), int(t), ty, process_of(p), f, v, n if isinstance(n, str) else None, _error(e))
        for i, t, ty, p, f, v, n, e in zip(
            frame["index"], frame["time"], frame["type"], frame["process"], frame["f"],
            values, frame["node"], frame["error"], strict=True)
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
        events.setdefault(node, []).append(event_from_fields(node, int(seq), float(wall), kind, loads(fields),
                                                             "node_events table"))
    for node_events in events.values():
        node_events.sort(key=lambda e: e.seq)
    return events


def _output_rows(run_id: str, results: dict[str, Any], checkers: tuple[str, ...] | None) -> Iterator[dict[str, Any]]:
    """The verdict and anomaly rows of one check. An anomaly names what the history holds, and
    a hostile history may hold an offset or partition beyond 64 bits: that number is left out
    of its column (the explanation still says it), never a failure of the whole job."""
    for name, result in results["checkers"].items():
        if checkers is not None and name not in checkers:
            continue
        yield {"run_id": run_id, "row_kind": "verdict", "checker": name, "valid": _text(result["valid"])}
        for a in result["anomalies"]:
            yield {"run_id": run_id, "row_kind": "anomaly", "checker": name, "type": str(a["type"]),
                   "topic": a.get("topic") if isinstance(a.get("topic"), str) else None,
                   "partition": in_range(a.get("partition"), INT64),
                   "offsets": [o for o in a.get("offsets") or [] if in_range(o, INT64) is not None],
                   "ops": [i for i in a.get("ops") or [] if in_range(i, INT64) is not None],
                   "explanation": _optional_text(a.get("explanation")),
                   "permitted_by": _optional_text(a.get("permitted_by"))}


def _optional_text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else json_text(value)


def _text(valid: Any) -> str:
    return "true" if valid is True else "false" if valid is False else str(valid)


Shared = dict[str, tuple[list[Op], dict[str, list[NodeEvent]]]]


def _checker(configs: dict[str, str | None], checkers: tuple[str, ...] | None, time_limit: float | None,
             shared: Any = None, gaps: dict[str, str] | None = None,
             cut_short: dict[str, frozenset[str]] | None = None,
             unrecorded: frozenset[str] = frozenset(),
             torn_tails: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """The grouped UDF. ``shared`` (by-partition mode) broadcasts each run's ops and events
    that name no partition, which join every group of that run; ``gaps``, the runs whose
    event files miss lines (a group holds a part of each file, which cannot show it);
    ``cut_short``, per run, the nodes whose event file ends in a line cut short (the runs
    table's column), told to the checkers as ``floodmark check`` tells them; ``unrecorded``,
    the runs ingested without a digest.json (their files may be cut at a line's end);
    ``torn_tails``, per run, its history's last line left unread (the runs table's
    ``history_torn_tail``), which keeps every verdict from valid as ``floodmark check`` keeps it."""
    from floodmark.checkers.registry import check_history, checker_names_for

    def check(ops_frame: pd.DataFrame, events_frame: pd.DataFrame) -> pd.DataFrame:
        if ops_frame.empty and (shared is not None or events_frame.empty):
            # by partition, a partition only node events name; every run has groups with ops
            return pd.DataFrame([], columns=OUTPUT.fieldNames())
        # by run, a run with no op at all is judged too (its history tested nothing: unknown,
        # or what its node events prove), as floodmark check judges it
        run_id = str((ops_frame if not ops_frame.empty else events_frame)["run_id"].iloc[0])
        config = config_from_json(configs.get(run_id), run_id)
        events = events_from_frame(events_frame)
        if shared is None:
            ops = ops_from_frame(ops_frame)
        else:
            topic, number = str(ops_frame["pkey"].iloc[0]).split("\u0000", 1)
            run_ops, run_events = shared.value.get(run_id, ([], {}))
            ops = sorted(ops_from_frame(ops_frame, (topic, number)) + run_ops, key=lambda op: op.index)
            for node, node_events in run_events.items():
                events[node] = sorted(events.get(node, []) + node_events, key=lambda e: e.seq)
        names = checkers or checker_names_for(config, ops)
        if shared is not None:
            names = tuple(n for n in names if n in PARTITION_LOCAL_CHECKERS)
        gap = None if shared is None else (gaps or {}).get(run_id, "")
        limit = time_limit if time_limit is not None or config is None else config.check_time_limit
        results = check_history(ops, events, config, checkers=list(names), time_limit=limit,
                                whole_file_gap=gap, cut_short=(cut_short or {}).get(run_id, frozenset()),
                                files_recorded=run_id not in unrecorded,
                                history_torn_tail=(torn_tails or {}).get(run_id))
        columns = OUTPUT.fieldNames()
        # Every cell filled (None, not NaN) so Arrow sees lists or nulls in the list columns.
        rows = [[row.get(c) for c in columns] for row in _output_rows(run_id, results, checkers)]
        return pd.DataFrame(rows, columns=columns, dtype=object)

    return check


def partition_keys() -> Column:
    """The partitions an op is about, as ``topic\\0partition`` keys, in Spark SQL.

    An op with a lifted topic and partition (a send) is about that one; an op whose value is
    a list of per-partition entries (poll, drain, assign) is about each entry's partition.
    """
    lifted = F.when(F.col("topic").isNotNull() & F.col("partition").isNotNull(),
                    F.array(F.concat_ws("\u0000", "topic", F.col("partition").cast("string"))))
    entries = F.from_json("value_json", "array<struct<topic:string,partition:string>>")
    listed = F.when(F.col("value_json").startswith("["), F.array_sort(F.array_distinct(F.transform(
        F.filter(entries, lambda e: e["topic"].isNotNull() & e["partition"].isNotNull()),
        lambda e: F.concat_ws("\u0000", e["topic"], e["partition"])))))
    return F.coalesce(lifted, listed, F.array().cast("array<string>"))


def _shared_rows(ops: DataFrame, events: DataFrame) -> Shared:
    """Per run, the nemesis ops and the node events that name no partition."""
    shared: Shared = {}
    nemesis = cast(pd.DataFrame, ops.where(F.col("process") == "nemesis").toPandas())
    for run_id, frame in nemesis.groupby("run_id"):
        shared[str(run_id)] = (ops_from_frame(frame), {})
    unlocated = cast(pd.DataFrame, events.where(F.col("topic").isNull()).toPandas())
    for run_id, frame in unlocated.groupby("run_id"):
        shared.setdefault(str(run_id), ([], {}))[1].update(events_from_frame(frame))
    return shared


def check_runs(
    spark: SparkSession, runs: DataFrame, ops: DataFrame, events: DataFrame, *,
    mode: Mode = "run", checkers: tuple[str, ...] | None = None, time_limit: float | None = None,
) -> tuple[DataFrame, DataFrame]:
    """Re-check runs on Spark. Returns (verdicts, anomalies).

    ``verdicts`` has one row per (run_id, checker) plus an ``overall`` row per run, merged
    with priority false > unknown > true; ``anomalies`` has the schema of the ``anomalies``
    table (first_op_time filled from the ops).

    Each run is judged as ``floodmark check`` judges its directory: by its workload's
    checkers (a run without test.yaml, by those of the workload its ops suggest), told the
    nodes whose event file was cut short, whether it held a digest and its history's torn last
    line, and, without a ``time_limit``, stopped at its configuration's ``check_time_limit``.
    """
    stated = runs.select("run_id", "config_json", "cut_short", "files_recorded", "history_torn_tail").collect()
    configs = {r.run_id: r.config_json for r in stated}
    cut_short = {r.run_id: frozenset(r.cut_short) for r in stated if r.cut_short}
    unrecorded = frozenset(r.run_id for r in stated if r.files_recorded is False)
    torn_tails = {r.run_id: r.history_torn_tail for r in stated if r.history_torn_tail is not None}
    ops = ops.drop("batch")
    events = events.drop("batch")
    shared = None
    if mode == "run":
        groups = ["run_id"]
        grouped_ops, grouped_events = ops, events
    else:
        grouped_ops = ops.where(F.col("process") != "nemesis").withColumn("pkey", F.explode(partition_keys()))
        grouped_events = events.where(F.col("topic").isNotNull()).withColumn(
            "pkey", F.concat_ws("\u0000", "topic", F.col("partition").cast("string")))
        shared = spark.sparkContext.broadcast(_shared_rows(ops, events))
        groups = ["run_id", "pkey"]
    checker = _checker(configs, checkers, time_limit, shared, _event_gaps(events) if shared is not None else None,
                       cut_short, unrecorded, torn_tails)
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


def _event_gaps(events: DataFrame) -> dict[str, str]:
    """Per run, the first node (in name order) whose events miss a number between 0 and their
    last, and how many (what :func:`floodmark.checkers.event_coverage.first_gap` finds in
    whole files); runs without one are not listed. Worked out before the files are split."""
    counted = (events.groupBy("run_id", "node")
               .agg(F.min("seq").alias("low"), F.max("seq").alias("high"), F.count("*").alias("held"))
               .where((F.col("low") != 0) | (F.col("high") + 1 != F.col("held"))))
    gaps: dict[str, str] = {}
    for row in sorted(counted.collect(), key=lambda r: (r.run_id, r.node)):
        if row.run_id not in gaps:
            gaps[row.run_id] = (f"the events of {row.node} miss {row.high + 1 - row.held} of seq 0 to {row.high}: "
                                "line(s) missing from its file")
    return gaps


def _merge_verdicts(rows: DataFrame) -> DataFrame:
    rank = F.when(F.col("valid") == "false", 2).when(F.col("valid") == "true", 0).otherwise(1)
    per_checker = rows.groupBy("run_id", "checker").agg(F.max(rank).alias("rank"))
    overall = per_checker.groupBy("run_id").agg(F.max("rank").alias("rank")).withColumn("checker", F.lit("overall"))
    merged = per_checker.unionByName(overall)
    return merged.select(
        "run_id", "checker",
        F.when(F.col("rank") == 2, "false").when(F.col("rank") == 0, "true").otherwise("unknown").alias("valid"),
    )


def in_process_results(ops: list[Op], events: dict[str, list[NodeEvent]], config: TestConfig | None,
                       checkers: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The same check without Spark (for the differential test and the benchmark)."""
    from floodmark.checkers.registry import check_history

    return check_history(ops, events, config, checkers=list(checkers) if checkers else None)
