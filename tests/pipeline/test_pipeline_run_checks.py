"""What ``floodmark analyze`` decides about a run before reading its rows (no Spark):

* a results.json past the size a results file may have is refused unread, naming the file and
  its size: read whole by one executor task, one of gigabytes exhausted that task's memory,
  and with it the whole analysis (the report and the results browser refuse it the same way);
* a run's digest.json is read before the files it names are hashed, and a run whose files are
  no longer the ones it recorded is named as such before its configuration and verdict are
  read: the run was hashed whole (a pass over its whole history) even when its digest.json
  was no digest, and its results.json was read, and named, before the change that made it
  another run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_fixtures import make_run

from floodmark.contracts import results as results_file
from floodmark.contracts.results import MAX_RESULTS_BYTES
from floodmark.pipeline import run_checks
from floodmark.pipeline.records import RunRejected, read_run
from floodmark.run_dirs.run_digests import compute_digest
from floodmark.run_dirs.rundir import RunDir
from floodmark.run_dirs.unfinished_runs import Interruption, unfinished_reason, write_interruption


def _refusal(run: Path, store: Path) -> str:
    with pytest.raises(RunRejected) as refused:
        read_run(run, store)
    return str(refused.value)


def test_a_results_file_past_the_bound_is_refused_unread(tmp_path: Path) -> None:
    run = make_run(tmp_path, seed=1).path
    results = (run / "results.json").read_bytes()
    # valid JSON and a valid verdict, only too large: the old reader read and ingested it
    size = MAX_RESULTS_BYTES + 1
    (run / "results.json").write_bytes(results + b" " * (size - len(results)))
    assert _refusal(run, tmp_path) == (f"{run}/results.json: {size:,} bytes, more than the "
                                       f"{MAX_RESULTS_BYTES:,} a results file may have")


@pytest.fixture(scope="module")
def verdict_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("store"), seed=2).path


SMALL_LIMIT = 4096  # bytes: larger than the run's results.json, small enough to pass often


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(padding=st.integers(0, 2 * SMALL_LIMIT), blank=st.sampled_from([b" ", b"\n", b"\t"]))
def test_a_results_file_is_read_exactly_up_to_the_bound(verdict_run: Path, padding: int, blank: bytes) -> None:
    """A verdict followed by any amount of whitespace (valid JSON all the same) is ingested
    up to the bound and refused, naming its size, past it."""
    results = verdict_run / "results.json"
    original = results.read_bytes()
    try:
        data = original + blank * padding
        results.write_bytes(data)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(results_file, "MAX_RESULTS_BYTES", SMALL_LIMIT)
            if len(data) <= SMALL_LIMIT:
                assert read_run(verdict_run, verdict_run.parents[2]).run["valid"] == "true"
            else:
                assert _refusal(verdict_run, verdict_run.parents[2]) == (
                    f"{results}: {len(data):,} bytes, more than the {SMALL_LIMIT:,} a results file may have")
    finally:
        results.write_bytes(original)


def _digested(run: Path) -> None:
    (run / "digest.json").write_text(json.dumps(compute_digest(RunDir(run))))


def test_a_damaged_digest_is_named_without_hashing_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path, seed=3).path
    (run / "digest.json").write_text("[]")
    hashed: list[Path] = []
    monkeypatch.setattr(run_checks, "compute_digest", lambda rd: hashed.append(rd.path) or compute_digest(rd))
    refusal = _refusal(run, tmp_path)
    assert refusal.startswith(f"{run}/digest.json: not a digest"), refusal
    assert refusal.endswith("remove digest.json to ingest the files as they are now"), refusal
    assert hashed == []


def test_a_run_hashed_once_when_its_digest_is_sound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path, seed=4).path
    _digested(run)
    hashed: list[Path] = []
    monkeypatch.setattr(run_checks, "compute_digest", lambda rd: hashed.append(rd.path) or compute_digest(rd))
    assert read_run(run, tmp_path).run["valid"] == "true"
    assert hashed == [run]


@pytest.mark.parametrize(("damage", "why"), [
    ("results", "not a results file"),  # a verdict no one can read
    ("config", "cannot be read"),  # a configuration no one can read (digest.json names it as changed)
])
def test_a_run_that_is_not_the_one_recorded_is_named_so_before_its_other_files(
        tmp_path: Path, damage: str, why: str) -> None:
    """Its history changed since digest.json recorded it, and its results.json (or test.yaml)
    is damaged too: what it is, first, is another run (the old order named the damaged file
    and never said the history had changed)."""
    run = make_run(tmp_path, seed=5).path
    _digested(run)
    history = run / "history.jsonl"
    history.write_text("".join(history.read_text().splitlines(keepends=True)[:-2]))
    if damage == "results":
        (run / "results.json").write_text("{")
    else:
        (run / "test.yaml").write_text("nodes: [")
    refusal = _refusal(run, tmp_path)
    changed = "history.jsonl differs" if damage == "results" else "history.jsonl, test.yaml differ"
    assert refusal.startswith(f"{run}: {changed} from what digest.json recorded at the end of the run"), refusal
    assert why not in refusal


def test_a_results_file_that_cannot_be_looked_at_is_named(tmp_path: Path) -> None:
    run = make_run(tmp_path, seed=6).path
    (run / "results.json").unlink()
    os.symlink("results.json", run / "results.json")  # a loop: stat fails
    assert _refusal(run, tmp_path) == f"{run}/results.json: too many levels of symbolic links"


@pytest.mark.parametrize(("make", "problem"), [
    (lambda p: p.write_text("{}\n"), "is a file, not a directory"),
    (lambda p: os.symlink(p.name, p), "too many levels of symbolic links"),
])
def test_events_that_are_no_directory_reject_the_run(tmp_path: Path, make: object, problem: str) -> None:
    """Such a run was ingested as one without node events, unsaid."""
    import shutil

    run = make_run(tmp_path, seed=7).path
    shutil.rmtree(run / "events")
    make(run / "events")  # type: ignore[operator]
    assert _refusal(run, tmp_path) == f"{run}/events: {problem}"


def test_an_interrupted_run_is_not_ingested_as_a_result(tmp_path: Path) -> None:
    """Its history stops where the interrupt stopped it: no verdict on it is a test's."""
    run = make_run(tmp_path, seed=3).path
    assert read_run(run, tmp_path).run["valid"] == "true"
    write_interruption(RunDir(run), Interruption("the final reads", 70.5, None, 60.0, "SIGTERM"))
    reason = unfinished_reason(RunDir(run))
    assert reason is not None and _refusal(run, tmp_path) == f"{run}: {reason}"
