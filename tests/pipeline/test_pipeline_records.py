"""Reading run directories into rows, without Spark."""

import json
from pathlib import Path

import pytest
from pipeline_fixtures import make_run

from floodmark.pipeline.records import RunRejected, config_from_json, find_runs, read_run


def test_a_run_becomes_rows_with_lifted_columns(tmp_path):
    run = make_run(tmp_path, seed=3, lost_offsets=(1,))
    rows = read_run(run.path, tmp_path)
    assert rows.run["run_id"] == f"queue/{run.path.name}"
    assert rows.run["seed"] == 3 and rows.run["valid"] == "false" and rows.run["nemesis"] == "partition"
    assert rows.run["op_count"] == len(run.ops) == len(rows.ops)
    send = next(r for r in rows.ops if r["f"] == "send" and r["type"] == "ok")
    assert send["topic"] == "t0" and send["partition"] in (0, 1) and send["offset"] is not None
    assert {e["node"] for e in rows.node_events} == {"n1", "n2"}
    (anomaly,) = rows.anomalies
    assert anomaly["type"] == "lost-write" and anomaly["offsets"] == [1]
    assert anomaly["first_op_time"] == run.ops[anomaly["ops"][0]].time


def _time_is_not_a_number(lines: list[str]) -> list[str]:
    return [*lines[:5], '{"index": 5, "time": "soon"}', *lines[6:]]


def _op_3_is_gone(lines: list[str]) -> list[str]:
    return lines[:3] + lines[4:]  # the next line holds index 4


def _op_5_goes_back_in_time(lines: list[str]) -> list[str]:
    op = json.loads(lines[5])
    op["time"] = -1  # before op 4's: floodmark check refuses the history, so must analyze
    return [*lines[:5], json.dumps(op), *lines[6:]]


@pytest.mark.parametrize(("seed", "rewrite", "problem"), [
    (4, _time_is_not_a_number, r"history.jsonl:6: "),
    (4, _op_5_goes_back_in_time, r"history.jsonl:6: time -1 is before the previous op's \(\d+\)"),
    (6, _op_3_is_gone, r"history.jsonl:4: index 4 out of sequence \(expected 3\)"),
])
def test_a_malformed_history_is_rejected_with_file_and_line(tmp_path, seed, rewrite, problem):
    run = make_run(tmp_path, seed=seed)
    history = run.path.joinpath("history.jsonl")
    history.write_text("\n".join(rewrite(history.read_text().splitlines())) + "\n")
    with pytest.raises(RunRejected, match=problem):
        read_run(run.path, tmp_path)


@pytest.mark.parametrize(("seed", "content", "problem"), [
    (5, "seed: [unclosed\n", "test.yaml"),
    (7, "seed: 7\nmin_insync_replicas: two\n", r"test.yaml: min_insync_replicas: expected a number, got 'two'"),
])
def test_a_malformed_or_mistyped_config_is_rejected_naming_the_file(tmp_path, seed, content, problem):
    run = make_run(tmp_path, seed=seed)
    run.path.joinpath("test.yaml").write_text(content)
    with pytest.raises(RunRejected, match=problem):
        read_run(run.path, tmp_path)


def test_find_runs_skips_run_subfolders(tmp_path):
    a = make_run(tmp_path, seed=1)
    b = make_run(tmp_path, test="other", seed=2)
    assert sorted(find_runs(tmp_path)) == sorted([a.path, b.path])


def test_the_run_row_carries_the_typed_configuration(tmp_path):
    run = make_run(tmp_path, seed=8, variant="unclean-election", nemesis=("kill", "partition"))
    row = read_run(run.path, tmp_path).run
    assert (row["variant"], row["nemesis"], row["workload"], row["cluster"], row["code_version"]) == \
        ("unclean-election", "kill,partition", "queue", "local", "abc123")
    config = config_from_json(row["config_json"], row["run_id"])
    assert config is not None and config.variant == "unclean-election" and config.seed == 8
    assert config.unclean_leader_election is False  # the file did not state it: nothing is inferred


def test_a_run_without_configuration_leaves_what_it_does_not_state_null(tmp_path):
    run = make_run(tmp_path, seed=9)
    run.path.joinpath("test.yaml").unlink()
    row = read_run(run.path, tmp_path).run
    assert row["test"] == "queue" and row["seed"] == 9  # the directory's name; the seed results.json copied
    assert row["workload"] is None and row["nemesis"] is None and row["cluster"] is None
    assert row["config_json"] is None and config_from_json(row["config_json"], row["run_id"]) is None
    assert config_from_json("{}", row["run_id"]) is None  # what older ingests stored for such a run


def test_a_master_url_spark_does_not_know_is_refused_before_a_jvm_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad --master is a bad argument: one line, exit 254, and no Java stack on the way
    (Spark itself would start a JVM only to refuse it)."""
    from floodmark.cli import main

    # (local[0] and spark://:7077 started a JVM that printed 30 lines before failing)
    for master in ("bogus://x", "local[", "spark://", "yarnx", "local[0]", "spark://:7077", "local-cluster[0,1,1]"):
        assert main(["analyze", "--master", master, str(tmp_path)]) == 254
        assert capsys.readouterr().err == (
            f"floodmark analyze: error: --master {master}: not a Spark master URL (local, local[*], local[N], "
            "spark://HOST:PORT, yarn, k8s://URL or mesos://URL)\n")
