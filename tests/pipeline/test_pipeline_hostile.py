"""Ingestion against hostile run directories, without Spark: each input the audit of
``floodmark analyze`` found mishandled is refused in one line naming the file (never waited
on, never a traceback), or its values are kept only where the store's columns hold them.

The Hypothesis property at the end feeds the reader results files and op values of any
shape: a run is either refused in one line naming its file, or every row fits the schema.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_fixtures import make_run

from floodmark.pipeline.ingest_large import run_bytes
from floodmark.pipeline.records import RunRejected, read_run

INT32 = (-(2**31), 2**31 - 1)  # what the store's int and long columns hold
INT64 = (-(2**63), 2**63 - 1)


def _rewrite_json(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _history_fifo(run: Path) -> None:
    (run / "history.jsonl").unlink()
    os.mkfifo(run / "history.jsonl")


def _history_dev_zero(run: Path) -> None:
    (run / "history.jsonl").unlink()
    os.symlink("/dev/zero", run / "history.jsonl")


def _events_fifo(run: Path) -> None:
    (run / "events" / "n1.jsonl").unlink()
    os.mkfifo(run / "events" / "n1.jsonl")


def _events_loop(run: Path) -> None:
    os.symlink("loop.jsonl", run / "events" / "loop.jsonl")


def _results_fifo(run: Path) -> None:
    (run / "results.json").unlink()
    os.mkfifo(run / "results.json")


def _events_name_not_utf8(run: Path) -> None:
    os.rename(run / "events" / "n2.jsonl", os.path.join(os.fsencode(run / "events"), b"n\xff.jsonl"))


def _says_valid_but_its_checker_not(results: dict[str, Any]) -> None:
    results["valid"] = True
    results["checkers"]["durability"]["valid"] = False


def _says_invalid_but_its_checker_not(results: dict[str, Any]) -> None:
    results["valid"] = False


def _valid_yes(results: dict[str, Any]) -> None:
    results["valid"] = "yes"


def _no_checker(results: dict[str, Any]) -> None:
    results["checkers"] = {}


def _checkers_a_list(results: dict[str, Any]) -> None:
    results["checkers"] = [1]


def _anomaly_a_string(results: dict[str, Any]) -> None:
    results["checkers"]["durability"]["anomalies"] = ["boom"]


RESULTS = {  # results.json rewritten so -> the words its refusal must carry
    "says-valid-checker-invalid": (_says_valid_but_its_checker_not,
                                   "inconsistent: its verdict is valid, but its checkers' is invalid (durability invalid)"),
    "says-invalid-checker-valid": (_says_invalid_but_its_checker_not,
                                   "inconsistent: its verdict is invalid, but its checkers' is valid (durability valid)"),
    "valid-yes": (_valid_yes, "not a results file ('valid' is \"yes\", not true, false or \"unknown\")"),
    "no-checker": (_no_checker, "no checker's verdict in it"),
    "checkers-list": (_checkers_a_list, "not a results file ('checkers' is [1], not an object)"),
    "anomaly-string": (_anomaly_a_string, "not a results file (checker 'durability': an anomaly is not an object)"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("damage", "file", "problem"), [
    (_history_fifo, "history.jsonl", "is a FIFO, not a file"),  # audit P1: hung for ever
    (_history_dev_zero, "history.jsonl", "is not a regular file"),  # audit P1: read without end
    (_events_fifo, "events/n1.jsonl", "is a FIFO, not a file"),  # audit P11: 10 s each
    (_results_fifo, "results.json", "is a FIFO, not a file"),
    (_events_loop, "events/loop.jsonl", "too many levels of symbolic links"),
    (_events_name_not_utf8, "events/n\\xff.jsonl", "its name is not UTF-8 text"),
])
def test_a_file_that_cannot_be_read_as_one_is_named_at_once(tmp_path: Path, damage: Any, file: str,
                                                            problem: str) -> None:
    run = make_run(tmp_path, seed=1).path
    damage(run)
    refusal = _refusal_in_a_child(run, tmp_path)
    assert refusal.startswith(f"{run}/{file}: {problem}"), refusal


def _refusal_in_a_child(run: Path, store: Path) -> str:
    """read_run's refusal, read in a process of its own with bounded memory and time: a reader
    that waits on a FIFO, or reads /dev/zero as one endless line, fails this test instead of
    taking the test run down with it."""
    import subprocess
    import sys

    script = ("import resource, sys\n"
              "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
              "from floodmark.errors import printable\n"
              "from floodmark.pipeline.records import RunRejected, read_run\n"
              "try:\n    read_run(sys.argv[1], sys.argv[2])\nexcept RunRejected as e:\n    print(printable(str(e)))\n")
    done = subprocess.run([sys.executable, "-c", script, os.fsencode(run), str(store)], capture_output=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2], text=True)
    assert done.returncode == 0 and done.stdout.count("\n") == 1, (done.returncode, done.stdout, done.stderr[-500:])
    return done.stdout.rstrip("\n")


@pytest.mark.parametrize("case", sorted(RESULTS))
def test_results_that_are_no_verdict_reject_the_run(tmp_path: Path, case: str) -> None:
    """Audit P3/P4: a self-contradicting results.json was ingested with its top line as the
    run's verdict (counted valid under --no-check); one whose checkers or anomalies were not
    objects was refused as 'AttributeError: ...', naming no file."""
    change, problem = RESULTS[case]
    run = make_run(tmp_path, seed=2).path
    _rewrite_json(run / "results.json", change)
    with pytest.raises(RunRejected) as refused:
        read_run(run, tmp_path)
    assert str(refused.value) == f"{run}/results.json: {problem}", str(refused.value)


def test_a_run_whose_files_differ_from_its_digest_is_refused(tmp_path: Path) -> None:
    """Audit P8: node events cut at a line's end were ingested and judged as the run's, as
    floodmark check refuses them (they read whole, as another run)."""
    from floodmark.run_dirs.run_digests import compute_digest
    from floodmark.run_dirs.rundir import RunDir

    run = make_run(tmp_path, seed=3).path
    (run / "digest.json").write_text(json.dumps(compute_digest(RunDir(run))))
    read_run(run, tmp_path)  # as recorded: ingested
    events = run / "events" / "n1.jsonl"
    events.write_text(events.read_text().splitlines(keepends=True)[0])
    with pytest.raises(RunRejected, match=r"events/n1.jsonl differs from what digest.json recorded at the end of "
                                          r"the run, so this is not the run that was recorded; remove digest.json"):
        read_run(run, tmp_path)
    (run / "digest.json").write_text("[]")
    with pytest.raises(RunRejected, match=r"digest.json: not a digest"):
        read_run(run, tmp_path)


def test_a_run_directory_named_in_bytes_that_are_not_utf8_is_refused(tmp_path: Path) -> None:
    """Audit P6: its path was stored with U+FFFD in place of the byte, so its repro command
    named another path, and a second such run was skipped as 'already in the store'."""
    run = make_run(tmp_path, seed=4).path
    renamed = os.path.join(os.fsencode(run.parent), b"2026\xff-s4")
    os.rename(run, renamed)
    with pytest.raises(RunRejected, match="its name is not UTF-8 text"):
        read_run(os.fsdecode(renamed), tmp_path)


def test_numbers_beyond_a_column_are_left_out_not_wrapped(tmp_path: Path) -> None:
    """Audit P5: an op naming partition 2**40 was stored as partition 0 (int32 wrapped round),
    an anomaly's partition too, and an explanation that was an object as '{x=1}'."""
    generated = make_run(tmp_path, seed=5, lost_offsets=(1,))
    run = generated.path
    lines = (run / "history.jsonl").read_text().splitlines()
    send = json.loads(lines[1])
    send["value"].update(partition=2**40, offset=2**70)
    lines[1] = json.dumps(send)
    (run / "history.jsonl").write_text("\n".join(lines) + "\n")

    def hostile_anomaly(results: dict[str, Any]) -> None:
        (anomaly,) = results["checkers"]["durability"]["anomalies"]
        anomaly.update(partition=2**40, offsets=[2**70, 1, True], ops=[2**64, 3], explanation={"x": 1},
                       permitted_by=["acks"], type=7)

    _rewrite_json(run / "results.json", hostile_anomaly)
    (run / "test.yaml").unlink()
    _rewrite_json(run / "results.json", lambda r: r.update(seed=10**30))
    rows = read_run(run, tmp_path)
    op = next(r for r in rows.ops if r["index"] == 1)
    assert op["partition"] is None and op["offset"] is None and '"partition":1099511627776' in op["value_json"]
    (anomaly,) = rows.anomalies
    assert anomaly["partition"] is None and anomaly["offsets"] == [1] and anomaly["ops"] == [3]
    assert anomaly["explanation"] == '{"x":1}' and anomaly["permitted_by"] == '["acks"]' and anomaly["type"] == "7"
    assert rows.run["seed"] is None


def test_the_size_of_a_run_with_a_looping_link_is_no_failure(tmp_path: Path) -> None:
    """Audit P2: the driver's size of each run stat()ed an events/ link in a loop and the
    whole analysis ended in a traceback."""
    run = make_run(tmp_path, seed=6).path
    _events_loop(run)
    assert run_bytes(run) > 0


# --- the property: any results file, any op value ---------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False,
                     allow_infinity=False), st.text(max_size=5))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=4), inner, max_size=3), max_leaves=6)
_anomaly = st.fixed_dictionaries({}, optional={k: _values for k in (
    "type", "topic", "partition", "offsets", "ops", "explanation", "permitted_by")}) | _values
_judgement = st.fixed_dictionaries({"valid": st.sampled_from((True, False, "unknown", "yes", None))},
                                   optional={"anomalies": st.lists(_anomaly, max_size=3) | _values,
                                             "stats": _values})


def _fits(row: dict[str, Any], ints: dict[str, tuple[int, int]]) -> None:
    for name, bounds in ints.items():
        value = row.get(name)
        values = value if isinstance(value, list) else [value]
        assert all(v is None or (type(v) is int and bounds[0] <= v <= bounds[1]) for v in values), (name, value)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("template"), seed=9, lost_offsets=(2,)).path


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(("durability", "queue")), _judgement, min_size=1, max_size=2),
       st.sampled_from((True, False, "unknown")), _values, _values, _values)
def test_any_results_or_op_value_is_refused_in_one_line_or_fits_the_schema(
        template: Path, tmp_path_factory: pytest.TempPathFactory, checkers: dict[str, Any], valid: Any,
        partition: Any, offset: Any, seed: Any) -> None:
    store = tmp_path_factory.mktemp("store")
    run = store / "queue" / template.name
    shutil.copytree(template, run)
    results = json.loads((run / "results.json").read_text())
    results.update(valid=valid, checkers=checkers, seed=seed)
    (run / "results.json").write_text(json.dumps(results))
    lines = (run / "history.jsonl").read_text().splitlines()
    send = json.loads(lines[1])
    send["value"].update(partition=partition, offset=offset)
    lines[1] = json.dumps(send)
    (run / "history.jsonl").write_text("\n".join(lines) + "\n")
    try:
        rows = read_run(run, store)
    except RunRejected as e:
        message = str(e)
        assert "\n" not in message and message.startswith(str(run)), message
        return
    _fits(rows.run, {"seed": INT64, "duration_ns": INT64, "op_count": INT64})
    for op in rows.ops:
        _fits(op, {"partition": INT32, "offset": INT64, "index": INT64, "time": INT64})
    for anomaly in rows.anomalies:
        _fits(anomaly, {"partition": INT32, "offsets": INT64, "ops": INT64, "first_op_time": INT64})
        assert all(isinstance(anomaly[k], str) or anomaly[k] is None for k in ("topic", "explanation", "permitted_by"))
        assert isinstance(anomaly["type"], str)
