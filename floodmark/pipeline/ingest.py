"""Ingestion: run directories into the Parquet store, incrementally and idempotently.

Each ingest writes one *batch*: the new runs' ops, node events and anomalies go into
``<table>/batch=<id>/`` and the ``runs`` rows go in last. The ``runs`` table is the commit
record: a batch whose runs rows never landed (a crash mid-ingest) is invisible to readers
and deleted by the next ingest, so a run is either wholly in the store or not at all.
A run already in ``runs`` is skipped, which makes ingesting twice a no-op.

Run directories are read on the executors, so a large store is read in parallel; on a
cluster the store must be on storage every executor can read. A small run is read whole by
one task (``records``); a run larger than ``LARGE_RUN_BYTES`` is cut into chunks that many
tasks parse at once, in a batch of its own (``ingest_large``).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from floodmark.pipeline import schemas
from floodmark.pipeline.chunks import CHUNK_BYTES
from floodmark.pipeline.ingest_large import LARGE_RUN_BYTES, ingest_large_run, run_bytes
from floodmark.pipeline.records import RunRejected, find_runs, iter_run_rows, run_id_of

Tagged = tuple[str, dict[str, Any]]


@dataclass
class IngestReport:
    batch: str | None
    ingested: list[str] = field(default_factory=list)
    skipped: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        # Each rejected run is named once, with why, as an error line of its own (see commands).
        return (f"ingested {len(self.ingested)} run(s), skipped {self.skipped} already in the store, "
                f"rejected {len(self.rejected)}")


def _tag_rows(path: str, store: str) -> Iterator[Tagged]:
    rows = iter_run_rows(path, store)
    try:
        first = next(rows)  # validation happens before the first row
    except RunRejected as e:
        yield "rejected", {"path": path, "error": str(e)}
        return
    except Exception as e:  # an unexpected bug must not sink the other runs' ingestion
        yield "rejected", {"path": path, "error": f"{type(e).__name__}: {e}"}
        return
    yield first
    yield from rows


def table_path(parquet_dir: str | Path, table: str) -> str:
    return str(Path(parquet_dir) / table)


def committed_run_ids(spark: SparkSession, parquet_dir: str | Path) -> set[str]:
    runs_path = Path(table_path(parquet_dir, "runs"))
    if not runs_path.exists():
        return set()
    return {r.run_id for r in spark.read.schema(_with_batch(schemas.RUNS)).parquet(str(runs_path)).select("run_id").collect()}


def _with_batch(schema: Any) -> Any:
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([*schema.fields, StructField("batch", StringType(), True)])


def _drop_uncommitted_batches(spark: SparkSession, parquet_dir: Path) -> None:
    runs_path = parquet_dir / "runs"
    committed: set[str] = set()
    if runs_path.exists():
        committed = {r.batch for r in spark.read.parquet(str(runs_path)).select("batch").distinct().collect()}
    for table in ("ops", "node_events", "anomalies"):
        for batch_dir in (parquet_dir / table).glob("batch=*"):
            if batch_dir.name.removeprefix("batch=") not in committed:
                shutil.rmtree(batch_dir, ignore_errors=True)


def ingest(
    spark: SparkSession, store: str | Path, parquet_dir: str | Path, *, slices: int | None = None,
    large_run_bytes: int = LARGE_RUN_BYTES, chunk_bytes: int = CHUNK_BYTES,
) -> IngestReport:
    """Ingest every run under ``store`` not yet in the Parquet store at ``parquet_dir``.

    Runs whose history and event files exceed ``large_run_bytes`` are read in chunks of
    ``chunk_bytes`` by many tasks; the others one task per run.
    """
    store_path, parquet = Path(store), Path(parquet_dir)
    parquet.mkdir(parents=True, exist_ok=True)
    _drop_uncommitted_batches(spark, parquet)
    known = committed_run_ids(spark, parquet)
    candidates = [p for p in find_runs(store_path) if not _inside(p, parquet)]
    new = [str(p) for p in candidates if run_id_of(p, store_path) not in known]
    report = IngestReport(batch=None, skipped=len(candidates) - len(new))
    if not new:
        return report

    batch = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]
    report.batch = batch
    sizes = {p: run_bytes(Path(p)) for p in new}
    large = [p for p in new if sizes[p] > large_run_bytes]
    small = [p for p in new if sizes[p] <= large_run_bytes]
    if small:
        _ingest_small(spark, small, store_path, parquet, batch, slices, report)
    for number, path in enumerate(large):
        try:
            run_id = ingest_large_run(spark, Path(path), store_path, parquet, f"{batch}-{number}",
                                      chunk_bytes=chunk_bytes)
        except RunRejected as e:
            report.rejected.append((path, str(e)))
        except Exception as e:  # noqa: BLE001 - as for small runs: one run's failure must not sink the others
            report.rejected.append((path, f"{type(e).__name__}: {e}"))
        else:
            report.ingested.append(run_id)
    report.ingested.sort()
    report.rejected.sort()
    return report


def _ingest_small(spark: SparkSession, new: list[str], store_path: Path, parquet: Path, batch: str,
                  slices: int | None, report: IngestReport) -> None:
    store_text = str(store_path)
    paths = spark.sparkContext.parallelize(new, slices or min(len(new), spark.sparkContext.defaultParallelism * 4))
    # Spilled to disk, not memory: one run's history may be larger than an executor's heap.
    tagged = paths.flatMap(lambda path: _tag_rows(path, store_text)).persist(StorageLevel.DISK_ONLY)
    try:
        report.rejected += [(r["path"], r["error"]) for _, r in tagged.filter(lambda t: t[0] == "rejected").collect()]
        # Runs last: their rows commit the batch.
        for table in ("ops", "node_events", "anomalies", "runs"):
            frame = _frame(spark, tagged, table)
            frame.withColumn("batch", F.lit(batch)).write.mode("append").partitionBy("batch").parquet(
                table_path(parquet, table)
            )
        report.ingested += [r.run_id for r in _frame(spark, tagged, "runs").select("run_id").collect()]
    finally:
        tagged.unpersist()


def _frame(spark: SparkSession, tagged: Any, table: str) -> DataFrame:
    schema = schemas.TABLES[table]
    names = schema.fieldNames()
    rows = tagged.filter(lambda t, table=table: t[0] == table).map(lambda t: tuple(t[1].get(n) for n in names))
    # The rows come from records.py, which builds them to the schema; verifying each row again
    # in Python cost more than reading the runs.
    return spark.createDataFrame(rows, schema, verifySchema=False)


def _inside(path: Path, parent: Path) -> bool:
    try:
        path.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


def load_table(spark: SparkSession, parquet_dir: str | Path, table: str) -> DataFrame:
    """A table with only committed batches (see the module docstring)."""
    path = table_path(parquet_dir, table)
    schema = _with_batch(schemas.TABLES[table])
    if not Path(path).exists():
        return spark.createDataFrame([], schema)
    frame = spark.read.schema(schema).parquet(path)
    if table == "runs":
        return frame
    batches = load_table(spark, parquet_dir, "runs").select("batch").distinct()
    return frame.join(F.broadcast(batches), "batch", "left_semi")
