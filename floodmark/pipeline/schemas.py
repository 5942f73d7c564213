"""Explicit schemas of the Parquet store, so every table reads the same in every job.

Op and event values are nested, free-form JSON in the run directory; the store keeps them as
JSON strings and lifts out the columns that questions are asked about (topic, partition,
offset, leader epoch) so that Spark can filter and group on them without parsing JSON.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

RUNS = StructType([
    StructField("run_id", StringType(), False),
    StructField("test", StringType(), False),
    StructField("started", StringType(), True),
    StructField("seed", LongType(), True),
    StructField("variant", StringType(), True),
    StructField("workload", StringType(), True),
    StructField("nemesis", StringType(), True),
    StructField("cluster", StringType(), True),
    StructField("code_version", StringType(), True),
    StructField("valid", StringType(), True),
    StructField("op_count", LongType(), False),
    StructField("duration_ns", LongType(), True),
    StructField("path", StringType(), False),
    StructField("config_json", StringType(), True),
    # The nodes whose event file ends in a line cut short (what node_events.read_events_dir
    # tells its ``cut_short``): the checkers take no proof from what such a node's story
    # lacks, so the re-check must be told them as ``floodmark check`` is. Null in runs
    # ingested before the column was added (read as none).
    StructField("cut_short", ArrayType(StringType()), True),
    # Whether the run held a digest.json (compared on ingestion): without one, a node's event
    # file may have lost whole lines at its end, and the checkers take no proof from what a
    # member's story lacks past its end (checkers.story_ends), as ``floodmark check`` does.
    # Null in runs ingested before the column was added (read as held).
    StructField("files_recorded", BooleanType(), True),
    # Where the history's last line was cut short and left unread ("FILE:LINE", a
    # contracts.history.TornTail's ``where``), or null: no checker's re-check may then be valid, as ``floodmark check`` holds
    # it. Null too in runs ingested before the column was added (read as none).
    StructField("history_torn_tail", StringType(), True),
])

OPS = StructType([
    StructField("run_id", StringType(), False),
    StructField("index", LongType(), False),
    StructField("time", LongType(), False),
    StructField("type", StringType(), False),
    StructField("process", StringType(), False),
    StructField("f", StringType(), False),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("node", StringType(), True),
    StructField("error", StringType(), True),
    StructField("value_json", StringType(), True),
])

NODE_EVENTS = StructType([
    StructField("run_id", StringType(), False),
    StructField("node", StringType(), False),
    StructField("seq", LongType(), False),
    StructField("wall", DoubleType(), True),
    StructField("kind", StringType(), False),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("leader_epoch", LongType(), True),
    StructField("fields_json", StringType(), True),
])

ANOMALIES = StructType([
    StructField("run_id", StringType(), False),
    StructField("checker", StringType(), False),
    StructField("type", StringType(), False),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offsets", ArrayType(LongType()), True),
    StructField("ops", ArrayType(LongType()), True),
    StructField("explanation", StringType(), True),
    StructField("permitted_by", StringType(), True),
    StructField("first_op_time", LongType(), True),
])

REJECTED = StructType([
    StructField("path", StringType(), False),
    StructField("error", StringType(), False),
])

CHECKER_VERDICTS = StructType([
    StructField("run_id", StringType(), False),
    StructField("checker", StringType(), False),
    StructField("valid", StringType(), False),
    StructField("anomaly_count", LongType(), False),
])

TABLES: dict[str, StructType] = {
    "runs": RUNS,
    "ops": OPS,
    "node_events": NODE_EVENTS,
    "anomalies": ANOMALIES,
}

__all__ = ["TABLES", "RUNS", "OPS", "NODE_EVENTS", "ANOMALIES", "REJECTED", "CHECKER_VERDICTS",
           "BooleanType"]
