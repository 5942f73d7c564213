"""Large runs ingested in chunks by many tasks land exactly as if read whole."""

import pytest
from pipeline_fixtures import make_run, write_large_queue_run
from spark_fixtures import spark  # noqa: F401

from floodmark.checkers.registry import check_run
from floodmark.pipeline.ingest import ingest, load_table

pytestmark = pytest.mark.spark


@pytest.fixture
def store(tmp_path):
    big = write_large_queue_run(tmp_path / "store", "big", 11, entries=4000, partitions=3)
    lossy = make_run(tmp_path / "store", seed=3, lost_offsets=(1,))
    return tmp_path / "store", big, lossy


def _rows(spark, parquet, table):  # noqa: F811
    frame = load_table(spark, parquet, table).drop("batch")
    return sorted(tuple(r) for r in frame.collect())


def test_chunked_ingest_equals_whole_run_ingest(spark, store, tmp_path):  # noqa: F811
    store_dir, big, lossy = store
    whole = ingest(spark, store_dir, tmp_path / "whole")
    chunked = ingest(spark, store_dir, tmp_path / "chunked", large_run_bytes=0, chunk_bytes=20_000)
    assert whole.ingested == chunked.ingested and len(chunked.ingested) == 2 and not chunked.rejected
    for table in ("runs", "ops", "node_events", "anomalies"):
        assert _rows(spark, tmp_path / "chunked", table) == _rows(spark, tmp_path / "whole", table), table
    (anomaly,) = load_table(spark, tmp_path / "chunked", "anomalies").collect()
    assert anomaly.first_op_time is not None  # the witness's time came back from a chunk task
    # Each large run is its own batch, and ingesting again is a no-op.
    assert load_table(spark, tmp_path / "chunked", "runs").select("batch").distinct().count() == 2
    again = ingest(spark, store_dir, tmp_path / "chunked", large_run_bytes=0, chunk_bytes=20_000)
    assert again.ingested == [] and again.skipped == 2


def test_a_malformed_large_run_is_rejected_by_line_and_leaves_nothing(spark, store, tmp_path):  # noqa: F811
    store_dir, big, lossy = store
    lines = (big / "history.jsonl").read_text().splitlines()
    lines[2500] = lines[2500].replace('"process":', '"proc":', 1)
    (big / "history.jsonl").write_text("\n".join(lines) + "\n")
    parquet = tmp_path / "parquet"
    report = ingest(spark, store_dir, parquet, large_run_bytes=0, chunk_bytes=20_000)
    ((path, error),) = report.rejected
    assert path == str(big) and error == f"{big / 'history.jsonl'}:2501: missing field 'process'"
    assert report.ingested == [f"queue/{lossy.path.name}"]
    ids = {r.run_id for r in load_table(spark, parquet, "ops").select("run_id").distinct().collect()}
    assert ids == {f"queue/{lossy.path.name}"}
    assert not [p for t in ("ops", "node_events", "anomalies", "runs") for p in (parquet / t).glob("batch=*-0")]


def test_the_large_run_writer_makes_a_correct_run(tmp_path):
    run = write_large_queue_run(tmp_path, "big", 5, entries=6000, partitions=4, processes=8)
    results = check_run(run)
    assert results["valid"] is True
    assert results["checkers"]["durability"]["stats"]  # it really had acknowledged sends to check
    assert 5900 <= len((run / "history.jsonl").read_text().splitlines()) <= 6000
