"""Ingesting one large run: its history and event files parsed by many tasks at once.

A run whose files exceed ``LARGE_RUN_BYTES`` is not read by one task (see ``chunks``): its
history and each node's event file are cut into byte ranges, parsed and judged on the
executors, and written straight to Parquet; the driver then reduces the chunks' summaries to
judge what many lines decide together (``chunk_summaries``), so the run is refused exactly
where and as ``floodmark check`` refuses it. A node's file whose seqs do not rise line after
line gets one more pass (:func:`_reordered`), to find the line that repeats a seq and what
follows a stop in the node's order. The run gets a batch of its own, so the store's commit
rule holds unchanged: its ``runs`` row is written last, only after every chunk validated,
and a rejected (or crashed) run's ops and events are removed with its batch. The small files
(``test.yaml``, ``results.json``) are read on the driver.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from floodmark.checkers.run_partitions import PartitionBounds
from floodmark.contracts.history import HistoryError
from floodmark.contracts.node_event_kinds import Started, Stopped
from floodmark.contracts.node_events import NodeEventError
from floodmark.contracts.node_files import Claim, Life
from floodmark.contracts.run_ids import RunIdCheck, StatedRun
from floodmark.pipeline import schemas
from floodmark.pipeline.chunk_summaries import (
    ChunkSummary,
    EventChunk,
    HistoryChunk,
    judge_event_file,
    judge_history,
)
from floodmark.pipeline.chunks import (
    CHUNK_BYTES,
    Chunk,
    event_rows,
    history_rows,
    plan_chunks,
    seq_rows,
)
from floodmark.pipeline.records import (
    RunRejected,
    anomaly_rows,
    run_id_of,
    run_row,
    witness_indices,
)
from floodmark.pipeline.run_checks import checked_run
from floodmark.run_dirs.rundir import RunDir

LARGE_RUN_BYTES = 64 * 1024 * 1024
CHUNK_SCHEMA = "path string, number int, start long, end long, last boolean"
SEQS_SCHEMA = "seq long, line long, kind string"  # (chunks.SEQS_ARROW, as Spark names it)


class _Summaries(AccumulatorParam):  # type: ignore[type-arg]
    """Collects the chunk summaries the tasks report."""

    def zero(self, value: list[ChunkSummary]) -> list[ChunkSummary]:
        return []

    def addInPlace(self, a: list[ChunkSummary], b: list[ChunkSummary]) -> list[ChunkSummary]:
        a.extend(b)
        return a


def run_bytes(run_dir: Path) -> int:
    """What a run's ingestion has to parse: its history and node event files. A file that
    cannot be looked at (a symbolic link in a loop, gone meanwhile) counts nothing here; the
    run's reader then names it as it rejects the run."""
    rd = RunDir(run_dir)
    files = [rd.history]
    try:
        if rd.events.is_dir():
            files += rd.events.glob("*.jsonl")
    except OSError:
        pass
    return sum(_size(path) for path in files)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def ingest_large_run(
    spark: SparkSession, run_dir: Path, store: Path, parquet: Path, batch: str,
    *, chunk_bytes: int = CHUNK_BYTES,
) -> str:
    """Ingest one run as batch ``batch``; returns its run id or raises RunRejected."""
    rd = RunDir(run_dir)
    config, results = checked_run(rd)  # every file a regular one, results a verdict, the digest kept
    run_id = run_id_of(rd.path, store)
    witnesses = frozenset(witness_indices(results))
    event_files = sorted(str(p) for p in rd.events.glob("*.jsonl")) if rd.events.is_dir() else []
    cut_short: list[str] = []
    try:
        history = _write_chunks(
            spark, plan_chunks(str(rd.history), chunk_bytes), schemas.OPS, parquet / "ops", batch,
            lambda chunk, report: history_rows(chunk, run_id, witnesses, report))
        try:
            totals = judge_history([s for s in history if isinstance(s, HistoryChunk)], str(rd.history),
                                   PartitionBounds(config))
        except HistoryError as e:
            raise RunRejected(str(e)) from None
        chunks = {path: plan_chunks(path, chunk_bytes) for path in event_files}
        if event_files:
            topics, partitions = None if config is None else config.topic_names, totals.bounds.bounds()
            events = [s for s in _write_chunks(spark, [c for path in event_files for c in chunks[path]],
                                               schemas.NODE_EVENTS, parquet / "node_events", batch,
                                               lambda chunk, report: event_rows(chunk, run_id, topics, partitions,
                                                                                report))
                      if isinstance(s, EventChunk)]
            runs = RunIdCheck(None if config is None else StatedRun(config.run_id, str(rd.config)))
            claims: dict[int, Claim] = {}
            for path in event_files:
                try:
                    judge_event_file([s for s in events if s.path == path], path, runs, claims,
                                     partial(_reordered, spark, chunks[path]))
                except NodeEventError as e:
                    raise RunRejected(str(e)) from None
            cut_short = sorted({Path(s.path).stem for s in events if s.cut_short})
        anomalies = anomaly_rows(run_id, results, totals.witness_times) if results else []
        if anomalies:
            _append(spark.createDataFrame([_cells(r, schemas.ANOMALIES) for r in anomalies], schemas.ANOMALIES),
                    parquet / "anomalies", batch)
        row = run_row(run_id, rd, config, results, totals.ops, totals.first_time, totals.last_time, cut_short,
                      None if totals.torn_tail is None else totals.torn_tail.where)
        # The runs row commits the batch: written last.
        _append(spark.createDataFrame([_cells(row, schemas.RUNS)], schemas.RUNS), parquet / "runs", batch)
    except BaseException:
        for table in ("ops", "node_events", "anomalies"):
            shutil.rmtree(parquet / table / f"batch={batch}", ignore_errors=True)
        raise
    return run_id


def _reordered(spark: SparkSession, chunks: list[Chunk],
               offsets: dict[int, int]) -> tuple[tuple[int, int, int] | None, Life | None]:
    """The extra pass over a node's file whose seqs do not rise (see ``chunk_summaries``):
    (the first line whose seq an earlier line had, as (line, seq, the earlier line)), and
    (the first event that follows a clean stop in the node's order and is no start, as
    (line, kind, the stop's line)), in the file's lines; only the first when there is one."""
    sc = spark.sparkContext
    cells = [(c.path, c.number, c.start, c.end, c.last) for c in chunks]

    def tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk_batch in batches:
            for cell in chunk_batch.to_pylist():
                yield from seq_rows(Chunk(**cell), offsets[cell["number"]])

    seqs = spark.createDataFrame(sc.parallelize(cells, len(cells)), CHUNK_SCHEMA).mapInArrow(tasks, SEQS_SCHEMA)
    seqs = seqs.persist(StorageLevel.DISK_ONLY)
    try:
        same_seq = Window.partitionBy("seq").orderBy("line")
        again = (seqs.select("seq", "line", F.first("line").over(same_seq).alias("seen"),
                             F.row_number().over(same_seq).alias("nth"))
                 .where(F.col("nth") == 2).orderBy("line").limit(1).collect())
        if again:
            return (again[0]["line"], again[0]["seq"], again[0]["seen"]), None
        by_seq = Window.orderBy("seq")  # (one file's seqs, gathered in one task: a rare, damaged file)
        after = (seqs.select("seq", "line", "kind", F.lag("kind").over(by_seq).alias("before"),
                             F.lag("line").over(by_seq).alias("stopped_on"))
                 .where((F.col("before") == Stopped.kind) & (F.col("kind") != Started.kind))
                 .orderBy("seq").limit(1).collect())
        return None, (after[0]["line"], after[0]["kind"], after[0]["stopped_on"]) if after else None
    finally:
        seqs.unpersist()


def _cells(row: dict[str, Any], schema: Any) -> tuple[Any, ...]:
    return tuple(row.get(name) for name in schema.fieldNames())


def _append(frame: DataFrame, table_dir: Path, batch: str) -> None:
    frame.withColumn("batch", F.lit(batch)).write.mode("append").partitionBy("batch").parquet(str(table_dir))


def _write_chunks(
    spark: SparkSession, chunks: list[Chunk], schema: Any, table_dir: Path, batch: str,
    parse: Callable[[Chunk, Callable[[ChunkSummary], None]], Iterator[pa.RecordBatch]],
) -> list[ChunkSummary]:
    """One task per chunk parses it into rows appended to ``table_dir``; returns the summaries."""
    sc = spark.sparkContext
    summaries = sc.accumulator([], _Summaries())
    cells = [(c.path, c.number, c.start, c.end, c.last) for c in chunks]
    frame = spark.createDataFrame(sc.parallelize(cells, len(cells)), CHUNK_SCHEMA)

    def tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk_batch in batches:
            for cell in chunk_batch.to_pylist():
                yield from parse(Chunk(**cell), lambda s: summaries.add([s]))

    _append(frame.mapInArrow(tasks, schema), table_dir, batch)
    # A retried task reports twice; the summaries of one chunk are identical, so keep one.
    return list({(s.path, s.number): s for s in summaries.value}.values())
