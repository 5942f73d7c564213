"""repro of a run whose schedule.json was edited by hand in what the run recorded of its
execution (``executed``), not only in its plan: whatever was written there, the replay runs
the plan and says what changed, never a traceback.

Before, an executed fault's ``number`` edited into a list or an object ended repro in a
TypeError traceback (exit 1): it was used as a dictionary key to compare with the plan.
And a record edited while the plan was the run's was told as "edited since the run (fault 0
not as the run executed)" followed by "replay identical": the plan, which is what is
replayed, had not changed. The history (vouched for by digest.json) says which side changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from floodmark.cli import main

LIGHT = ("--rate", "50", "--concurrency", "4", "--topics", "1", "--partitions", "2")


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recorded")
    path = folder / "schedule.json"
    path.write_text(json.dumps({"time_limit": 2, "faults": [
        {"number": 0, "kind": "kill", "shape": "leader", "start": 0.5, "duration": 0.5, "seed": 1}]}))
    assert main(["run", "--cluster", "sim", "--seed", "9", *LIGHT, "--nemesis", "kill",
                 "--schedule", str(path), "--store", str(folder / "store")]) == 0
    return (folder / "store" / "latest").resolve()


@pytest.mark.parametrize(("number", "shown"), [([1], "fault [1]"), ({"a": 1}, "fault {'a': 1}"),
                                               (None, "fault None"), ("0", "fault 0")])
def test_an_executed_fault_s_number_edited_into_anything_is_said_to_be_a_changed_record(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], number: Any, shown: str) -> None:
    run = tmp_path / recorded_run.name
    shutil.copytree(recorded_run, run)
    recorded = json.loads((run / "schedule.json").read_text())
    recorded["executed"][0]["number"] = number
    (run / "schedule.json").write_text(json.dumps(recorded))
    code = main(["repro", str(run), "--store", str(tmp_path / "replays")])
    lines = capsys.readouterr().err.splitlines()
    assert code == 0, lines
    # The history never started such a fault: the record changed, not the plan that is replayed.
    assert any(f"schedule.json's record of executing {shown} changed since the run; its plan is the run's" in line
               for line in lines), lines
    assert not any("edited since the run" in line for line in lines), lines
    assert any(line.startswith(f"floodmark: replay identical to {run}") for line in lines), lines


def test_only_the_record_of_what_executed_edited_is_a_changed_record_not_an_edited_schedule(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / recorded_run.name
    shutil.copytree(recorded_run, run)
    recorded = json.loads((run / "schedule.json").read_text())
    recorded["executed"][0]["duration"] = 0.25  # the history starts fault 0 for 0.5 s, as planned
    (run / "schedule.json").write_text(json.dumps(recorded))
    assert main(["repro", str(run), "--store", str(tmp_path / "replays")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert f"floodmark: {run / 'schedule.json'}: schedule.json's record of executing fault 0 changed since the " \
           "run; its plan is the run's (as the history records it), and the plan is what is replayed" in lines, lines
    assert not any("edited since the run" in line for line in lines), lines
    assert any(line.startswith(f"floodmark: replay identical to {run}") for line in lines), lines


def test_which_side_changed_is_not_guessed_where_the_history_cannot_tell(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A start (or seed) the history does not record: plan or record, either may have changed."""
    run = tmp_path / recorded_run.name
    shutil.copytree(recorded_run, run)
    recorded = json.loads((run / "schedule.json").read_text())
    recorded["executed"][0]["start"] = 0.75
    (run / "schedule.json").write_text(json.dumps(recorded))
    assert main(["repro", str(run), "--store", str(tmp_path / "replays")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert any("schedule.json: edited since the run (fault 0 not as its record of executing it says: its plan or "
               "that record changed since the run)" in line for line in lines), lines
    # Without a digest vouching for the history it cannot tell a changed duration either.
    (run / "digest.json").unlink()
    recorded["executed"][0]["start"] = 0.5
    recorded["executed"][0]["duration"] = 0.25
    (run / "schedule.json").write_text(json.dumps(recorded))
    assert main(["repro", str(run), "--store", str(tmp_path / "replays")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert any("(fault 0 not as its record of executing it says: its plan or that record changed" in line
               for line in lines), lines


def test_a_plan_edited_is_still_said_to_be_edited(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / recorded_run.name
    shutil.copytree(recorded_run, run)
    recorded = json.loads((run / "schedule.json").read_text())
    recorded["faults"][0]["duration"] = 0.25  # the history says the run started it for 0.5 s
    (run / "schedule.json").write_text(json.dumps(recorded))
    assert main(["repro", str(run), "--store", str(tmp_path / "replays")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert any("schedule.json: edited since the run (fault 0 not as the run executed); replaying it as it is now"
               in line for line in lines), lines


def test_a_fault_added_to_the_plan_is_named_when_the_replay_differs(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fault added by hand leaves no trace the files can tell from a fault the run never
    reached: the replay that differs blamed 'nondeterminism, or uncommitted changes' alone."""
    run = tmp_path / recorded_run.name
    shutil.copytree(recorded_run, run)
    recorded = json.loads((run / "schedule.json").read_text())
    recorded["faults"].append({"number": 1, "kind": "kill", "shape": "leader", "start": 1.2, "duration": 0.3,
                               "seed": 2})
    (run / "schedule.json").write_text(json.dumps(recorded))
    code = main(["repro", str(run), "--store", str(tmp_path / "replays")])
    lines = capsys.readouterr().err.splitlines()
    assert code == 0, lines
    differs = [line for line in lines if line.startswith(f"floodmark: replay DIFFERS from {run}: ")]
    assert len(differs) == 1, lines
    assert "(fault 1 in schedule.json with no record of the run's (added since?), or nondeterminism" in differs[0]


def _edited_copy(recorded_run: Path, tmp_path: Path, edit: Any) -> Path:
    run = tmp_path / recorded_run.name
    shutil.copytree(recorded_run, run)
    recorded = json.loads((run / "schedule.json").read_text())
    edit(recorded)
    (run / "schedule.json").write_text(json.dumps(recorded))
    return run


def _both_durations(recorded: dict[str, Any]) -> None:
    recorded["faults"][0]["duration"] = recorded["executed"][0]["duration"] = 1.25


def _both_durations_and_the_record_s_shape(recorded: dict[str, Any]) -> None:
    _both_durations(recorded)
    recorded["executed"][0]["shape"] = "random"


def _taken_out_of_both(recorded: dict[str, Any]) -> None:
    recorded["faults"] = recorded["executed"] = []


@pytest.mark.parametrize("edit", [_both_durations, _both_durations_and_the_record_s_shape, _taken_out_of_both])
def test_a_plan_edited_alike_in_its_record_is_said_to_be_edited_not_blamed_on_nondeterminism(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any) -> None:
    """Plan and record edited alike (one search-and-replace) agree: the replay that differed
    was blamed on 'nondeterminism, or uncommitted changes', and with the record's shape
    changed too the fault was said to keep the run's plan. The history says what ran."""
    run = _edited_copy(recorded_run, tmp_path, edit)
    code = main(["repro", str(run), "--store", str(tmp_path / "replays")])
    lines = capsys.readouterr().err.splitlines()
    assert code == 0, lines
    assert any("schedule.json: edited since the run (fault 0 not as the run executed); replaying it as it is now"
               in line for line in lines), lines
    assert not any("record of executing" in line or "nondeterminism" in line for line in lines), lines
    assert main(["shrink", str(run), "--store", str(tmp_path / "shrunk")]) == 254
    assert "edited since the run (fault 0 not as the run executed)" in capsys.readouterr().err


def test_a_recorded_fault_the_plan_lacks_is_not_guessed_an_edited_plan_without_a_digest(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With no digest vouching for the history (real clusters), a record naming fault 7 that
    the plan lacks may be a fault taken out of the plan or a record changed: it was said to be
    the former ("fault 7 not as the run executed") though only the record was edited."""
    run = _edited_copy(recorded_run, tmp_path, lambda recorded: recorded["executed"][0].update(number=7))
    (run / "digest.json").unlink()
    assert main(["repro", str(run), "--store", str(tmp_path / "replays")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert any("schedule.json: edited since the run (fault 7 not as its record of executing it says: its plan or "
               "that record changed since the run)" in line for line in lines), lines
    assert not any("not as the run executed" in line for line in lines), lines


def _shifted_alike(recorded: dict[str, Any]) -> None:
    recorded["faults"][0]["start"] = recorded["executed"][0]["start"] = 0.75


@pytest.mark.parametrize("edit", [_shifted_alike])
def test_a_plan_edited_where_the_history_cannot_tell_is_told_by_the_run_s_id(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any) -> None:
    """A start (or seed) edited alike in plan and record, or faults reordered, leave plan and
    record agreeing and the history silent: the replay differed (its run id, derived from the
    plan, at least) and was blamed on nondeterminism or the code. The run's id says."""
    run = _edited_copy(recorded_run, tmp_path, edit)
    assert main(["repro", str(run), "--store", str(tmp_path / "replays")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert any("edited since the run (its faults are not the ones the run's id (in test.yaml) was derived from: "
               "in another order, or edited alike in the record of executing them); replaying it" in line
               for line in lines), lines
    assert not any("nondeterminism" in line or "code changed" in line for line in lines), lines


def test_a_plan_s_faults_reordered_are_told_by_the_run_s_id(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two faults in another order: the same test but another plan, hence another run id in
    the replay's events."""
    folder = tmp_path / "two"
    path = folder / "schedule.json"
    folder.mkdir()
    path.write_text(json.dumps({"time_limit": 2, "faults": [
        {"number": 0, "kind": "kill", "shape": "leader", "start": 0.5, "duration": 0.3, "seed": 1},
        {"number": 1, "kind": "kill", "shape": "leader", "start": 1.2, "duration": 0.3, "seed": 2}]}))
    assert main(["run", "--cluster", "sim", "--seed", "9", *LIGHT, "--nemesis", "kill",
                 "--schedule", str(path), "--store", str(folder / "store")]) == 0
    run = (folder / "store" / "latest").resolve()
    recorded = json.loads((run / "schedule.json").read_text())
    recorded["faults"].reverse()
    (run / "schedule.json").write_text(json.dumps(recorded))
    capsys.readouterr()
    assert main(["repro", str(run), "--store", str(tmp_path / "replays")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert any("(its faults are not the ones the run's id (in test.yaml) was derived from" in line
               for line in lines), lines
    assert not any("nondeterminism" in line or "code changed" in line for line in lines), lines


def test_the_run_s_id_tells_no_edit_when_another_commit_ran_it(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another commit may derive run ids otherwise (a setting added since): an id that differs
    is then no proof of an edit, and the replay that differs says the code changed."""
    run = _edited_copy(recorded_run, tmp_path, _shifted_alike)
    monkeypatch.setattr("floodmark.run.replayed_test.code_version", lambda: "0000000")
    assert main(["repro", str(run), "--store", str(tmp_path / "replays")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert not any("edited since the run" in line for line in lines), lines
