"""Node events of another run are refused, not judged: ``check``, ``report`` and ``analyze``
read a run's events as that run's only when every ``started`` event names its id.

The gap: an event file carries no run identity, and the one guard, ``digest.json``, is what
the product tells a user to remove to check edited files. One node's file of another
simulated run of the same test (seed 4 for seed 3), copied in, made a valid run INVALID
(343 isr-member-lacks-committed and as many replica-diverges-below-hw). Everything here goes
through the commands and files a user has, so that it runs against any version of them.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from floodmark.cli import main

TEST = ["run", "--cluster", "sim", "--nemesis", "none", "--time-limit", "5"]
RUN_ID_LINE = re.compile(r"^run_id: .*\n", re.MULTILINE)
RUN_ID_FIELD = re.compile(r',"run_id":"[^"]*"')


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Two simulated runs of one test, seeds 3 and 4, each valid."""
    store = tmp_path_factory.mktemp("store")
    made = {}
    for seed in (3, 4):
        assert main([*TEST, "--seed", str(seed), "--store", str(store)]) == 0
        made[seed] = (store / "latest").resolve()
    return made


def copy_of(run: Path, where: Path) -> Path:
    """The run as a user edits it: copied, and its digest removed, as ``check`` advises."""
    copy = where / "run"
    shutil.copytree(run, copy)
    (copy / "digest.json").unlink()
    return copy


def verdict_of(run: Path) -> object:
    return json.loads((run / "results.json").read_text())["valid"]


def test_a_node_s_events_from_another_run_of_the_same_test_are_refused_naming_the_file_and_line(
        runs: dict[int, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mixed = copy_of(runs[3], tmp_path)
    shutil.copyfile(runs[4] / "events" / "n2.jsonl", mixed / "events" / "n2.jsonl")
    capsys.readouterr()
    assert main(["check", str(mixed)]) == 254
    err = capsys.readouterr().err
    (said,) = err.splitlines()
    assert said.startswith(f"floodmark check: error: {mixed / 'events' / 'n2.jsonl'}:1: started names run id ")
    assert said.endswith(f"but {mixed / 'test.yaml'} states run id {run_id_of(runs[3])!r}: these events are "
                         "another run's")
    assert run_id_of(runs[4]) in said and run_id_of(runs[4]) != run_id_of(runs[3])


def test_the_run_s_own_events_keep_its_verdict(runs: dict[int, Path], tmp_path: Path) -> None:
    same = copy_of(runs[3], tmp_path)
    assert main(["check", str(same)]) == 0
    assert verdict_of(same) is True is verdict_of(runs[3])


def test_a_run_from_before_run_ids_is_judged_as_before(runs: dict[int, Path], tmp_path: Path) -> None:
    """No run id in test.yaml nor in any started event: the run of an older harness."""
    old = copy_of(runs[3], tmp_path)
    without_ids(old)
    assert main(["check", str(old)]) == 0
    assert verdict_of(old) is True


def test_started_events_without_an_id_in_a_run_that_states_one_are_another_run_s(
        runs: dict[int, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The harness that wrote test.yaml gave every broker the id: a started event without
    one was written by a broker an older harness started, for another run."""
    mixed = copy_of(runs[3], tmp_path)
    events = mixed / "events" / "n1.jsonl"
    events.write_text(RUN_ID_FIELD.sub("", events.read_text()))
    capsys.readouterr()
    assert main(["check", str(mixed)]) == 254
    assert (f"{events}:1: started names no run id, but {mixed / 'test.yaml'} states run id "
            f"{run_id_of(runs[3])!r}: these events are another run's") in capsys.readouterr().err


def test_a_run_from_before_run_ids_with_a_newer_run_s_events_is_refused(
        runs: dict[int, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = copy_of(runs[3], tmp_path)
    (old / "test.yaml").write_text(RUN_ID_LINE.sub("", (old / "test.yaml").read_text()))
    capsys.readouterr()
    assert main(["check", str(old)]) == 254
    assert (f"{old / 'events' / 'n1.jsonl'}:1: started names run id {run_id_of(runs[3])!r}, but "
            f"{old / 'test.yaml'} states no run id") in capsys.readouterr().err


def test_the_report_and_analyze_leave_another_run_s_events_out_naming_them(
        runs: dict[int, Path], tmp_path: Path) -> None:
    from floodmark.pipeline.records import RunRejected, read_run
    from floodmark.reports.run_data import load_run

    mixed = copy_of(runs[3], tmp_path)
    shutil.copyfile(runs[4] / "events" / "n2.jsonl", mixed / "events" / "n2.jsonl")
    shown = load_run(mixed)
    assert set(shown.events) == {"n1", "n3"}
    assert any(w.startswith(f"node events not shown: {mixed / 'events' / 'n2.jsonl'}:1: started names run id ")
               for w in shown.warnings)
    with pytest.raises(RunRejected, match=re.escape(f"{mixed / 'events' / 'n2.jsonl'}:1: started names run id ")):
        read_run(mixed, tmp_path)


def test_a_replay_has_the_run_s_id_and_its_events_byte_for_byte(
        runs: dict[int, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The simulator's id is the seed's, configuration's and schedule's, not the directory's
    or the time's: ``repro`` writes the same started events, and says so."""
    capsys.readouterr()
    assert main(["repro", str(runs[3])]) == 0
    assert f"replay identical to {runs[3]}" in capsys.readouterr().err
    replay = (runs[3].parent.parent / "latest").resolve()
    assert replay != runs[3] and run_id_of(replay) == run_id_of(runs[3])


def run_id_of(run: Path) -> str:
    (found,) = re.findall(r"^run_id: (\S+)$", (run / "test.yaml").read_text(), re.MULTILINE)
    return found.strip("'\"")


def without_ids(run: Path) -> None:
    """As a harness before run ids wrote the run: no id in test.yaml, none in its events."""
    (run / "test.yaml").write_text(RUN_ID_LINE.sub("", (run / "test.yaml").read_text()))
    for events in (run / "events").glob("*.jsonl"):
        events.write_text(RUN_ID_FIELD.sub("", events.read_text()))
