"""A schedule file's name, or a run directory's, is the user's: any characters. Every line
``run --schedule`` and ``repro`` print about one says one thing, so a newline in the name is
shown escaped (``\\n``, and a byte that is not UTF-8 as ``\\xff``), as their errors show it.

Before, the notes (a --time-limit replacing the schedule's, a schedule.json edited since its
run, a fault lasting past the time limit) and the runner's own lines printed the name raw:
``floodmark run: new`` then ``line.json: --time-limit 1 s replaces ...`` on a line of its own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from floodmark.cli import main

LIGHT = ("--rate", "50", "--concurrency", "4", "--topics", "1", "--partitions", "2")
KILL = {"number": 0, "kind": "kill", "shape": "leader", "start": 1.0, "duration": 5.0, "seed": 1}


def said(capsys: pytest.CaptureFixture[str]) -> list[str]:
    out, err = capsys.readouterr()
    return [line for line in (out + err).splitlines() if line.strip()]


@pytest.mark.parametrize("name", [b"new\nline.json", b"bad\xff.json"], ids=["newline", "not-utf8"])
def test_run_s_notes_of_a_schedule_name_it_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       name: bytes) -> None:
    path = os.path.join(os.fsencode(tmp_path), name)
    with open(path, "w") as f:
        json.dump({"time_limit": 3, "faults": [KILL]}, f)
    shown = os.fsdecode(name).replace("\n", "\\n").replace("\udcff", "\\xff")
    code = main(["run", "--cluster", "sim", "--seed", "3", *LIGHT, "--nemesis", "kill", "--time-limit", "2",
                 "--schedule", os.fsdecode(path), "--store", str(tmp_path / "store")])
    lines = said(capsys)
    assert code == 0 and all(line.startswith("floodmark") for line in lines), lines
    notes = [line for line in lines if shown in line]
    assert len(notes) == 2, lines  # the time limit replaced, the fault lasting past it
    assert "--time-limit 2 s replaces the schedule's 3 s" in notes[0]
    assert "fault 0 (kill leader) is planned to end at 6 s" in notes[1]


def test_repro_s_lines_name_a_run_directory_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "st\nore"
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps({"time_limit": 3, "faults": [dict(KILL, duration=1.0)]}))
    assert main(["run", "--cluster", "sim", "--seed", "3", *LIGHT, "--nemesis", "kill", "--schedule", str(schedule),
                 "--store", str(store)]) == 0
    run = (store / "latest").resolve()
    recorded = json.loads((run / "schedule.json").read_text())
    recorded["faults"][0]["duration"] = 1.5  # edited since the run
    (run / "schedule.json").write_text(json.dumps(recorded))
    said(capsys)
    code = main(["repro", str(run)])
    lines = said(capsys)
    assert code == 0 and all(line.startswith("floodmark") for line in lines), lines
    assert any("st\\nore" in line and "edited since the run" in line for line in lines), lines
    assert any(line.startswith("floodmark: replay DIFFERS from ") and "st\\nore" in line for line in lines), lines
