"""Ingesting one large run: its history and event files parsed by many tasks at once.

A run whose files exceed ``LARGE_RUN_BYTES`` is not read by one task (see ``chunks``): its
history and each node's event file are cut into byte ranges, parsed on the executors, and
written straight to Parquet; then each process's ops are paired (every completion closing
its invocation, as the small runs' reader and ``floodmark check`` require). The run gets a
batch of its own, so the store's commit rule holds unchanged: its ``runs`` row is written
last, only after every chunk validated, and a rejected (or crashed) run's ops and events are
removed with its batch. The small files
(``test.yaml``, ``results.json``) are read on the driver.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from floodmark.pipeline import schemas
from floodmark.pipeline.chunks import (
    CHUNK_BYTES,
    Chunk,
    ChunkSummary,
    event_rows,
    first_problem,
    history_rows,
    plan_chunks,
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
        problem = first_problem(history, dense_from_zero=True) or _pairing_problem(spark, parquet / "ops", batch,
                                                                                    str(rd.history))
        if problem is not None:
            raise RunRejected(f"{rd.history}:{problem[0]}: {problem[1]}")
        chunks = [c for path in event_files for c in plan_chunks(path, chunk_bytes)]
        if chunks:
            events = _write_chunks(spark, chunks, schemas.NODE_EVENTS, parquet / "node_events", batch,
                                   lambda chunk, report: event_rows(chunk, run_id, report))
            for path in event_files:
                problem = first_problem([s for s in events if s.path == path], dense_from_zero=False)
                if problem is not None:
                    raise RunRejected(f"{path}:{problem[0]}: {problem[1]}")
            cut_short = sorted({Path(s.path).stem for s in events if s.cut_short})
        ordered = sorted(history, key=lambda s: s.number)
        times = {i: t for s in ordered for i, t in s.witness_times.items()}
        firsts = [s.first_time for s in ordered if s.first_time is not None]
        lasts = [s.last_time for s in ordered if s.last_time is not None]
        op_count = sum(s.rows for s in ordered)
        anomalies = anomaly_rows(run_id, results, times) if results else []
        if anomalies:
            _append(spark.createDataFrame([_cells(r, schemas.ANOMALIES) for r in anomalies], schemas.ANOMALIES),
                    parquet / "anomalies", batch)
        row = run_row(run_id, rd, config, results, op_count, firsts[0] if firsts else None,
                      lasts[-1] if lasts else None, cut_short)
        # The runs row commits the batch: written last.
        _append(spark.createDataFrame([_cells(row, schemas.RUNS)], schemas.RUNS), parquet / "runs", batch)
    except BaseException:
        for table in ("ops", "node_events", "anomalies"):
            shutil.rmtree(parquet / table / f"batch={batch}", ignore_errors=True)
        raise
    return run_id


PAIRING_SCHEMA = "index long, problem string"


def _pairing_problem(spark: SparkSession, ops_dir: Path, batch: str, source: str) -> tuple[int, str] | None:
    """The history's first completion that closes no invocation of its process (line, problem),
    as :class:`~floodmark.contracts.history.ProcessPairing` finds it reading the file in order (``floodmark
    check`` refuses such a history); None when there is none. The rule is each process's own,
    so each process's ops are paired by a task of their own, in index order; the line is the
    op's index + 1 (one op per line), as the small runs' reader gives it."""
    from floodmark.contracts.history import HistoryError, Op, ProcessPairing
    from floodmark.pipeline.scale_check import process_of

    def pair(frame: pd.DataFrame) -> pd.DataFrame:
        pairing = ProcessPairing(source)
        for index, process, kind, f in frame.sort_values("index")[["index", "process", "type", "f"]].itertuples(
                index=False):
            try:
                pairing.see(Op(int(index), 0, kind, process_of(process), f), int(index) + 1)
            except HistoryError as e:
                return pd.DataFrame([(int(index), e.problem)], columns=["index", "problem"])
        return pd.DataFrame([], columns=["index", "problem"])

    written = ops_dir / f"batch={batch}"
    if not written.is_dir():  # (a history of no op writes no file)
        return None
    ops = spark.read.parquet(str(written)).select("index", "process", "type", "f")
    found = ops.groupBy("process").applyInPandas(pair, PAIRING_SCHEMA).orderBy("index").limit(1).collect()
    return (found[0]["index"] + 1, found[0]["problem"]) if found else None


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
