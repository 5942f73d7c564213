"""Differential test: the checkers on Spark give exactly the in-process checkers' results."""

import pytest
from pipeline_fixtures import write_synthetic_run
from spark_fixtures import spark  # noqa: F401

from floodmark.checkers import synthetic
from floodmark.checkers.registry import check_history
from floodmark.contracts.history import read_history
from floodmark.contracts.node_events import read_events_dir
from floodmark.contracts.run_config import read_test_config
from floodmark.pipeline.ingest import ingest, load_table
from floodmark.pipeline.scale_check import PARTITION_LOCAL_CHECKERS, check_runs
from floodmark.run_dirs.rundir import RunDir

pytestmark = pytest.mark.spark

PLANTED = ("lost-write", "duplicate", "poll-skip", "nonmonotonic-poll", "hw-decrease",
           "committed-truncated", "multiple-leaders", "multiple-controllers")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, spark):  # noqa: F811
    store = tmp_path_factory.mktemp("store")
    dirs = [write_synthetic_run(store, "clean", synthetic.queue_run(1, ops=300, partitions=3), 1)]
    for seed, anomaly in enumerate(PLANTED, start=2):
        run = synthetic.inject(synthetic.queue_run(seed, ops=300, partitions=3), anomaly, seed)
        dirs.append(write_synthetic_run(store, anomaly, run, seed))
    # A clean run whose event file lost a line from its middle: unknown, in every mode (a
    # by-partition group holds a part of each file, so the gap is found over the whole files).
    gapped = write_synthetic_run(store, "gapped", synthetic.queue_run(20, ops=300, partitions=3), 20)
    events = gapped / "events" / "n1.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(b"".join(lines[:3] + lines[4:]))
    dirs.append(gapped)
    parquet = tmp_path_factory.mktemp("parquet")
    report = ingest(spark, store, parquet)
    assert not report.rejected
    tables = {t: load_table(spark, parquet, t) for t in ("runs", "ops", "node_events")}
    return store, dirs, tables


def _in_process(run_dir, checkers=None):
    rd = RunDir(run_dir)
    return check_history(read_history(rd.history), read_events_dir(rd.events), read_test_config(rd.config),
                         checkers=list(checkers) if checkers else None)


def _anomaly_key(checker, a):
    return (checker, a["type"], a.get("topic"), a.get("partition"), tuple(a.get("offsets") or ()),
            tuple(a.get("ops") or ()))


def _expected(dirs, store, checkers=None):
    verdicts, anomalies = {}, set()
    for run_dir in dirs:
        run_id = run_dir.relative_to(store).as_posix()
        results = _in_process(run_dir, checkers)
        verdicts[(run_id, "overall")] = _text(results["valid"])
        for name, result in results["checkers"].items():
            verdicts[(run_id, name)] = _text(result["valid"])
            anomalies |= {(run_id, *_anomaly_key(name, a)) for a in result["anomalies"]}
    return verdicts, anomalies


def _text(v):
    return "true" if v is True else "false" if v is False else str(v)


def _actual(verdicts_frame, anomalies_frame):
    verdicts = {(r.run_id, r.checker): r.valid for r in verdicts_frame.collect()}
    anomalies = {(r.run_id, r.checker, r.type, r.topic, r.partition, tuple(r.offsets or ()), tuple(r.ops or ()))
                 for r in anomalies_frame.collect()}
    return verdicts, anomalies


def test_by_run_equals_in_process(spark, corpus):  # noqa: F811
    store, dirs, t = corpus
    expected = _expected(dirs, store)
    actual = _actual(*check_runs(spark, t["runs"], t["ops"], t["node_events"], mode="run"))
    assert actual == expected
    # The corpus really exercises the checkers: every planted anomaly was found.
    found_types = {a[2] for a in actual[1]}
    assert set(PLANTED) <= found_types


def test_by_partition_equals_in_process(spark, corpus):  # noqa: F811
    store, dirs, t = corpus
    expected = _expected(dirs, store, PARTITION_LOCAL_CHECKERS[:-1])
    actual = _actual(*check_runs(spark, t["runs"], t["ops"], t["node_events"], mode="partition",
                                 checkers=PARTITION_LOCAL_CHECKERS[:-1]))
    assert actual == expected
    gapped = next(d for d in dirs if d.parent.name == "gapped").relative_to(store).as_posix()
    assert actual[0][(gapped, "hw")] == actual[0][(gapped, "leader")] == "unknown"
    assert actual[0][(gapped, "durability")] == "true"
