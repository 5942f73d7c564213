"""`floodmark analyze` end to end on a local Spark session."""

import csv

import pytest
from pipeline_fixtures import write_synthetic_run
from spark_fixtures import spark  # noqa: F401

from floodmark.checkers import synthetic
from floodmark.cli import main

pytestmark = pytest.mark.spark


def test_analyze_writes_tables_and_summary(spark, tmp_path, capsys):  # noqa: F811
    store = tmp_path / "store"
    write_synthetic_run(store, "clean", synthetic.queue_run(1, ops=200), 1)
    bad = synthetic.inject(synthetic.queue_run(2, ops=200), "lost-write", 2)
    write_synthetic_run(store, "lossy", bad, 2)
    broken = write_synthetic_run(store, "broken", synthetic.queue_run(3, ops=50), 3)
    (broken / "history.jsonl").write_text('{"index": 0, "time": 0, "type": "ok"}\n')

    assert main(["analyze", str(store), "--quiet"]) == 254  # a run was rejected: bad input, named
    out = capsys.readouterr()
    assert "ingested 2 run(s)" in out.out and "rejected 1" in out.out
    rejected = [line for line in out.err.splitlines() if line.startswith("floodmark analyze: error: rejected ")]
    assert len(rejected) == 1 and "broken" in rejected[0] and "missing field 'process'" in rejected[0]
    assert rejected[0].count(str(broken)) == 1, rejected[0]  # the run named once, not once per layer
    analysis = store / "_analysis"
    with open(analysis / "tables" / "failing_seeds.csv") as f:
        seeds = list(csv.DictReader(f))
    # The Spark re-check found the planted loss although the run had no results.json.
    assert [int(r["seed"]) for r in seeds] == [2]
    assert seeds[0]["repro"].startswith("floodmark repro ")
    page = (analysis / "summary.html").read_text()
    assert "failing seeds" in page and "lost-write" in page

    # Analysing again ingests nothing new and gives the same tables (and rejects the same run).
    assert main(["analyze", str(store), "--quiet"]) == 254
    assert "ingested 0 run(s), skipped 2" in capsys.readouterr().out


def test_analyze_rejects_a_missing_store(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "nope")]) == 254
    assert "is not a directory" in capsys.readouterr().err

