"""The Spark pipeline on a local session: ingest, idempotence, rejection, aggregates."""

import statistics

import pytest
from pipeline_fixtures import SECOND, make_run
from spark_fixtures import spark  # noqa: F401

from floodmark.pipeline import aggregate
from floodmark.pipeline.ingest import ingest, load_table

pytestmark = pytest.mark.spark


@pytest.fixture
def store(tmp_path):
    runs = [
        make_run(tmp_path / "store", seed=1, variant="default"),
        make_run(tmp_path / "store", seed=2, variant="default", nemesis=("kill",)),
        make_run(tmp_path / "store", seed=3, variant="truncate-to-hw", lost_offsets=(0, 2)),
        make_run(tmp_path / "store", seed=4, variant="truncate-to-hw", lost_offsets=(1,), nemesis=("kill",)),
        make_run(tmp_path / "store", seed=5, variant="unclean-election"),
    ]
    return tmp_path / "store", runs


def test_ingest_is_idempotent_and_complete(spark, store, tmp_path):  # noqa: F811
    store_dir, runs = store
    parquet = tmp_path / "parquet"
    first = ingest(spark, store_dir, parquet)
    assert len(first.ingested) == 5 and not first.rejected
    counts = {t: load_table(spark, parquet, t).count() for t in ("runs", "ops", "node_events", "anomalies")}
    assert counts["ops"] == sum(len(r.ops) for r in runs)
    assert counts["anomalies"] == 3 and counts["node_events"] == 5 * 4
    again = ingest(spark, store_dir, parquet)
    assert again.ingested == [] and again.skipped == 5
    assert {t: load_table(spark, parquet, t).count() for t in counts} == counts
    # A new run lands incrementally.
    make_run(store_dir, seed=6)
    assert len(ingest(spark, store_dir, parquet).ingested) == 1
    assert load_table(spark, parquet, "runs").count() == 6


def test_malformed_run_is_rejected_and_the_rest_ingested(spark, store, tmp_path):  # noqa: F811
    store_dir, runs = store
    history = runs[1].path / "history.jsonl"
    history.write_text(history.read_text().replace('"type":"ok"', '"type":"maybe"', 1))
    report = ingest(spark, store_dir, tmp_path / "parquet")
    assert len(report.ingested) == 4
    ((path, error),) = report.rejected
    assert path == str(runs[1].path) and "history.jsonl:" in error and "type must be" in error
    ids = {r.run_id for r in load_table(spark, tmp_path / "parquet", "ops").select("run_id").distinct().collect()}
    assert f"queue/{runs[1].path.name}" not in ids


def test_uncommitted_batch_is_invisible_and_cleaned(spark, store, tmp_path):  # noqa: F811
    store_dir, _ = store
    parquet = tmp_path / "parquet"
    ingest(spark, store_dir, parquet)
    orphan = parquet / "ops" / "batch=crashed"
    orphan.mkdir()
    (parquet / "ops" / "batch=20260101T000000-x").mkdir()
    before = load_table(spark, parquet, "ops").count()
    ingest(spark, store_dir, parquet)
    assert not orphan.exists() and load_table(spark, parquet, "ops").count() == before


def test_aggregates_match_independent_computation(spark, store, tmp_path):  # noqa: F811
    store_dir, runs = store
    parquet = tmp_path / "parquet"
    ingest(spark, store_dir, parquet)
    run_frame = load_table(spark, parquet, "runs")
    anomalies = load_table(spark, parquet, "anomalies")

    rates = {(r.variant, r.type): (r.anomalies, r.runs_with_type, r.runs, r.rate)
             for r in aggregate.anomaly_rates(run_frame, anomalies, "variant").collect() if r.type}
    assert rates == {("truncate-to-hw", "lost-write"): (3, 2, 2, 1.0)}

    detection = {r.variant: r for r in aggregate.detection(run_frame, anomalies).collect()}
    assert detection["truncate-to-hw"].detection_rate == 1.0
    assert detection["default"].invalid_runs == 0 and detection["default"].runs == 2
    first_times = sorted(min(r.ops[i].time for a in r.anomalies for i in a.ops) / 1e9 for r in runs[2:4])
    assert detection["truncate-to-hw"].median_time_to_first_anomaly_s == pytest.approx(first_times[0])

    seeds = aggregate.failing_seeds(run_frame).collect()
    assert sorted(r.seed for r in seeds) == [3, 4]
    assert all(r.repro.startswith("floodmark repro ") and r.repro.endswith(f"-s{r.seed}") for r in seeds)

    ops = load_table(spark, parquet, "ops")
    latency = aggregate.latencies(ops).collect()
    expected = []
    for run in runs:
        invoked = {}
        for op in run.ops:
            if op.process == "nemesis":
                continue
            if op.type == "invoke":
                invoked[op.process] = op.time
            else:
                expected.append(op.time - invoked.pop(op.process))
    assert sorted(r.latency_ns for r in latency) == sorted(expected)
    assert statistics.median(r.latency_ns for r in latency) == statistics.median(expected)

    gaps = aggregate.unavailability(ops).collect()
    # Every run has one planted >1 s pause in the middle, inside the partition fault.
    assert gaps and all(g.duration_ns > SECOND for g in gaps)
    assert any(g.during_fault for g in gaps)
    table = aggregate.unavailability_distribution(run_frame, aggregate.unavailability(ops)).collect()
    assert sum(r.windows for r in table) == len(gaps)
