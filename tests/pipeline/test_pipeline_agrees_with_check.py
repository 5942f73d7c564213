"""`floodmark analyze` judges every run directory as `floodmark check` judges it.

Each run here is one a hunt over damaged sim runs found the two disagreeing on: a node's
event file cut short (check: the invariants' findings about that member are no proof, so
unknown; analyze said invalid), a run without test.yaml (check: judged by the checkers of the
workload its ops suggest; analyze: linearizability alone), a configured ``check_time_limit``
(check: the search stops there; analyze searched without end), and a history whose
completion closes no invocation (check refuses it; analyze judged it), without a digest,
a node's event file that lost whole lines at its end (check: no proof, unknown; analyze
said invalid), and a ``test.yaml`` no run has (min.insync above the replication factor, or
an unknown variant: check refuses it; analyze judged the run by it), and a history whose
last line was cut mid-write (both said valid of what they had not read). Each run's verdicts,
per checker and overall, are check's own (``check_run`` on a copy), read small (one task per
run) and large (in chunks).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from pipeline_fixtures import write_synthetic_run
from spark_fixtures import spark  # noqa: F401

from floodmark.checkers import synthetic
from floodmark.checkers.registry import check_run
from floodmark.cli import main
from floodmark.errors import SourceError, UsageError
from floodmark.pipeline.ingest import ingest, load_table
from floodmark.pipeline.records import find_runs, run_id_of
from floodmark.pipeline.scale_check import check_runs

pytestmark = pytest.mark.spark


def _cut_events(run_dir: Path, node: str, *, mid_line: bool) -> None:
    """Cut a node's event file at a line in its middle: inside the line, or just before its newline."""
    path = run_dir / "events" / f"{node}.jsonl"
    data = path.read_bytes()
    end = data.find(b"\n", len(data) // 2)
    path.write_bytes(data[: end - 10] if mid_line else data[:end])


def _unpair(run_dir: Path) -> None:
    """Turn an invocation in the middle of the history into a completion (no invocation open)."""
    path = run_dir / "history.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    for number in range(len(lines) // 2, len(lines)):
        op = json.loads(lines[number])
        if op["type"] == "invoke" and op["process"] != "nemesis":
            lines[number] = (json.dumps({**op, "type": "ok"}) + "\n").encode()
            break
    path.write_bytes(b"".join(lines))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    _cut_events(write_synthetic_run(root, "cut-mid", synthetic.queue_run(5, ops=300, partitions=3), 5), "n1",
                mid_line=True)
    _cut_events(write_synthetic_run(root, "cut-at-newline", synthetic.queue_run(6, ops=300, partitions=3), 6), "n2",
                mid_line=False)
    (write_synthetic_run(root, "no-config", synthetic.queue_run(7, ops=300, partitions=3), 7) / "test.yaml").unlink()
    _unpair(write_synthetic_run(root, "unpaired", synthetic.queue_run(8, ops=300, partitions=3), 8))
    for seed, name, key, value in ((9, "insync-above-rf", "min_insync_replicas", "4"),
                                   (10, "unknown-variant", "variant", "no-such-flaw")):
        config = write_synthetic_run(root, name, synthetic.queue_run(seed, ops=100, partitions=3), seed) / "test.yaml"
        config.write_text("".join(f"{key}: {value}\n" if line.startswith(f"{key}:") else line
                                  for line in config.read_text().splitlines(keepends=True)))
    # A log-lin run under faults, whose linearizability search a tiny configured limit stops.
    sims = tmp_path_factory.mktemp("sims")
    assert main(["run", "--cluster", "sim", "--workload", "log-lin", "--time-limit", "15", "--seed", "41",
                 "--store", str(sims)]) == 0
    (sim,) = (p for p in find_runs(sims))
    limited = root / "time-limit" / sim.name
    shutil.copytree(sim, limited)
    (limited / "digest.json").unlink()  # (test.yaml is edited on purpose)
    config = limited / "test.yaml"
    config.write_text("".join(line for line in config.read_text().splitlines(keepends=True)
                              if not line.startswith("check_time_limit:")) + "check_time_limit: 0.000001\n")
    # A queue run under faults without its digest, whose n1 lost its last 20 lines whole.
    assert main(["run", "--cluster", "sim", "--time-limit", "20", "--seed", "3", "--store", str(sims)]) == 0
    (queue,) = (p for p in find_runs(sims) if p.parent.name.startswith("queue"))
    lines_cut = root / "lines-cut" / queue.name
    shutil.copytree(queue, lines_cut)
    (lines_cut / "digest.json").unlink()
    events = lines_cut / "events" / "n1.jsonl"
    events.write_bytes(b"".join(events.read_bytes().splitlines(keepends=True)[:-20]))
    # A valid queue run whose history ends in a line cut mid-write (no digest: it is the file
    # the run wrote no longer).
    torn = write_synthetic_run(root, "torn-tail", synthetic.queue_run(11, ops=300, partitions=3), 11)
    (torn / "digest.json").unlink(missing_ok=True)
    with open(torn / "history.jsonl", "ab") as f:
        f.write(b'{"index": 600, "time": 1, "type": "ok", "process": 0, "f": "poll", "va')
    return root


def _text(valid: object) -> str:
    return "true" if valid is True else "false" if valid is False else str(valid)


def _check_verdicts(store: Path, scratch: Path) -> tuple[dict[tuple[str, str], str], set[str]]:
    """What `floodmark check` says of each run (judged on a copy: it writes results.json),
    and the runs it refuses."""
    verdicts: dict[tuple[str, str], str] = {}
    refused: set[str] = set()
    for run_dir in find_runs(store):
        run_id = run_id_of(run_dir, store)
        copy = scratch / run_id
        shutil.copytree(run_dir, copy)
        try:
            results = check_run(copy)
        except (SourceError, UsageError):
            refused.add(run_id)
            continue
        verdicts[(run_id, "overall")] = _text(results["valid"])
        verdicts |= {(run_id, name): _text(r["valid"]) for name, r in results["checkers"].items()}
    return verdicts, refused


@pytest.fixture(scope="module")
def check_said(store, tmp_path_factory):
    return _check_verdicts(store, tmp_path_factory.mktemp("checked"))


@pytest.fixture(scope="module", params=[False, True], ids=["one-task-per-run", "in-chunks"])
def analyze_said(request, spark, store, tmp_path_factory):  # noqa: F811
    """What analyze's ingestion rejects (run id -> why) and its re-check's verdicts."""
    parquet = tmp_path_factory.mktemp("parquet")
    options = {"large_run_bytes": 0, "chunk_bytes": 64 * 1024} if request.param else {}
    report = ingest(spark, store, parquet, **options)
    verdicts, _ = check_runs(spark, load_table(spark, parquet, "runs"), load_table(spark, parquet, "ops"),
                             load_table(spark, parquet, "node_events"))
    return ({run_id_of(Path(path), store): error for path, error in report.rejected},
            {(r.run_id, r.checker): r.valid for r in verdicts.collect()})


def _of(verdicts: dict[tuple[str, str], str], test: str) -> dict[str, str]:
    return {checker: valid for (run_id, checker), valid in verdicts.items() if run_id.split("/")[0] == test}


@pytest.mark.parametrize("test", ["cut-mid", "cut-at-newline"])
def test_a_member_whose_event_file_is_cut_short_proves_nothing_by_what_it_lacks(check_said, analyze_said, test):
    expected, actual = _of(check_said[0], test), _of(analyze_said[1], test)
    assert expected["invariants"] == expected["overall"] == "unknown"  # check's verdict (not invalid)
    assert actual == expected


def test_a_member_whose_story_ends_before_what_it_lacks_proves_nothing_without_a_digest(check_said, analyze_said):
    """A file that lost whole lines at its end has no cut line: check and analyze alike take
    no proof from what the member's story lacks past its end (analyze said invalid)."""
    expected, actual = _of(check_said[0], "lines-cut"), _of(analyze_said[1], "lines-cut")
    assert expected["invariants"] == expected["overall"] == "unknown"
    assert actual == expected


def test_a_history_whose_last_line_was_cut_short_is_valid_to_neither(check_said, analyze_said):
    """The line left unread could have recorded an anomaly: check holds every checker at
    unknown (it said valid), and analyze's re-check, told by the runs table, says the same."""
    expected, actual = _of(check_said[0], "torn-tail"), _of(analyze_said[1], "torn-tail")
    assert expected["queue"] == expected["durability"] == expected["overall"] == "unknown"
    assert expected["stats"] == "true"
    assert actual == expected


def test_a_run_without_test_yaml_is_judged_by_the_checkers_its_ops_suggest(check_said, analyze_said):
    expected, actual = _of(check_said[0], "no-config"), _of(analyze_said[1], "no-config")
    assert {"durability", "queue", "invariants"} <= expected.keys()  # a queue run's checkers
    assert actual == expected


def test_the_configured_check_time_limit_stops_the_search(check_said, analyze_said):
    expected, actual = _of(check_said[0], "time-limit"), _of(analyze_said[1], "time-limit")
    assert expected["linearizable"] == "unknown"
    assert actual == expected


def test_check_and_analyze_refuse_the_same_runs(check_said, analyze_said):
    refused, rejected = check_said[1], analyze_said[0]
    assert refused == {"unpaired/20261121T120000-s8", "insync-above-rf/20261121T120000-s9",
                       "unknown-variant/20261121T120000-s10"}
    assert rejected.keys() == refused


@pytest.mark.parametrize(("run_id", "named"), [
    ("insync-above-rf/20261121T120000-s9", "min_insync_replicas: 4 is more than the replication factor 3"),
    ("unknown-variant/20261121T120000-s10", "variant: unknown variant 'no-such-flaw'"),
])
def test_a_test_yaml_check_refuses_rejects_the_run(analyze_said, run_id, named):
    assert named in analyze_said[0][run_id] and "test.yaml" in analyze_said[0][run_id]


def test_a_history_whose_completion_closes_no_invocation_is_refused(check_said, analyze_said):
    rejected = analyze_said[0]
    assert "ok completion of process" in rejected["unpaired/20261121T120000-s8"]
    assert "with no invocation open" in rejected["unpaired/20261121T120000-s8"]


def test_floodmark_analyze_calls_a_cut_short_run_unknown_as_check_does(spark, tmp_path, capsys):  # noqa: F811
    """The report's reproducer, end to end: `floodmark analyze` on a store holding a run whose
    member's event file is cut short gives check's verdict (unknown), not a failing seed; and
    a store whose runs were ingested before the cut-short nodes were recorded says so."""
    store = tmp_path / "store"
    run_dir = write_synthetic_run(store, "cut", synthetic.queue_run(5, ops=300, partitions=3), 5)
    _cut_events(run_dir, "n1", mid_line=True)
    scratch = tmp_path / "checked"
    shutil.copytree(run_dir, scratch)
    assert main(["check", str(scratch)]) == 2  # unknown
    capsys.readouterr()

    assert main(["analyze", str(store), "--quiet", "--master", "local[2]"]) == 0
    tables = store / "_analysis" / "tables"
    with open(tables / "failing_seeds.csv") as f:
        assert list(csv.DictReader(f)) == []
    with open(tables / "detection_by_variant.csv") as f:
        (row,) = csv.DictReader(f)
    assert (row["runs"], row["invalid_runs"], row["unknown_runs"]) == ("1", "0", "1")
    assert "ingested by an older floodmark" not in (store / "_analysis" / "summary.html").read_text()

    # As an older floodmark left it: a runs table without the column.
    runs_dir = store / "_analysis" / "parquet" / "runs"
    old = tmp_path / "old-runs"
    spark.read.parquet(str(runs_dir)).drop("cut_short").write.partitionBy("batch").parquet(str(old))
    shutil.rmtree(runs_dir)
    shutil.move(old, runs_dir)
    assert main(["analyze", str(store), "--quiet", "--master", "local[2]"]) == 0
    page = (store / "_analysis" / "summary.html").read_text()
    assert "1 run(s) were ingested by an older floodmark" in page
