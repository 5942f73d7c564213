"""repro of a run whose schedule.json was edited by hand in what the run recorded of its
execution (``executed``), not only in its plan: whatever was written there, the replay runs
the plan and says the file was edited, never a traceback.

Before, an executed fault's ``number`` edited into a list or an object ended repro in a
TypeError traceback (exit 1): it was used as a dictionary key to compare with the plan.
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
def test_an_executed_fault_s_number_edited_into_anything_is_said_to_be_edited(
        recorded_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], number: Any, shown: str) -> None:
    run = tmp_path / recorded_run.name
    shutil.copytree(recorded_run, run)
    recorded = json.loads((run / "schedule.json").read_text())
    recorded["executed"][0]["number"] = number
    (run / "schedule.json").write_text(json.dumps(recorded))
    code = main(["repro", str(run), "--store", str(tmp_path / "replays")])
    lines = capsys.readouterr().err.splitlines()
    assert code == 0, lines
    assert any(f"schedule.json: edited since the run ({shown} not as the run executed)" in line for line in lines), lines


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
