"""A hand-written fault that lasts past the test's time limit, as a Jepsen user expects it:
run, and ended by the final heal-all (Jepsen's time limit wraps the nemesis too, and its
final generator heals what is still in force), but never cut short unseen.

Before, ``kill leader`` written to last 10 s in a 3 s test ran about 5 s (the heal-all comes
once the clients' operations in flight at the limit complete), and nothing said so: the run
printed no word of it, and schedule.json recorded the fault with ``stopped_at`` null and no
stop, although ``run --help`` said its stopped_at says when it ended. Now one line before the
run names the faults so cut (a run's time limit cut by hand in schedule.json, replayed with
repro, says it too), and schedule.json records when the heal-all ended each of them.
A fault that starts at or after the time limit is refused (tests/run/test_schedule_hunt.py).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from floodmark.cli import main
from floodmark.contracts.history import read_history

LIGHT = ("--rate", "50", "--concurrency", "4", "--topics", "1", "--partitions", "2")
NOTE = "the final heal-all ends"


def fault(number: int, start: float, duration: float, kind: str = "kill", shape: str = "leader") -> dict[str, Any]:
    return {"number": number, "kind": kind, "shape": shape, "start": start, "duration": duration, "seed": 1}


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *faults: dict[str, Any]) -> tuple[int, list[str], Path]:
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps({"time_limit": 3, "faults": list(faults)}))
    code = main(["run", "--cluster", "sim", "--seed", "3", *LIGHT, "--nemesis", "kill,partition",
                 "--schedule", str(path), "--store", str(tmp_path / "store")])
    lines = capsys.readouterr().err.splitlines()
    return code, lines, (tmp_path / "store" / "latest").resolve()


@pytest.fixture(scope="module")
def past_the_limit(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, list[str], Path]:
    """A 3 s run of a kill planned from 1 s to 11 s."""
    folder = tmp_path_factory.mktemp("past-the-limit")
    path = folder / "schedule.json"
    path.write_text(json.dumps({"time_limit": 3, "faults": [fault(0, 1.0, 10.0)]}))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["run", "--cluster", "sim", "--seed", "3", *LIGHT, "--nemesis", "kill",
                     "--schedule", str(path), "--store", str(folder / "store")])
    return code, err.getvalue().splitlines(), (folder / "store" / "latest").resolve()


def test_a_fault_lasting_past_the_time_limit_is_said_before_the_run(
        past_the_limit: tuple[int, list[str], Path]) -> None:
    code, lines, _ = past_the_limit
    assert code == 0, lines
    said = [n for n, line in enumerate(lines) if NOTE in line]
    assert len(said) == 1, lines
    line = lines[said[0]]
    assert line.startswith("floodmark: ") and "schedule.json: fault 0 (kill leader) is planned to end at 11 s, after the test's time limit of 3 s: the final heal-all ends it instead" in line
    starting = next(n for n, line in enumerate(lines) if line.startswith("floodmark: starting a sim cluster"))
    assert said[0] < starting, lines


def test_schedule_json_records_when_the_heal_all_ended_it(past_the_limit: tuple[int, list[str], Path]) -> None:
    _, _, run_dir = past_the_limit
    recorded = json.loads((run_dir / "schedule.json").read_text())
    executed = recorded["executed"][0]
    # Healed as its own stop would (the broker restarted), before the heal-all of every kind.
    assert executed["stop_result"] == {"restarted": {"n1": 1002}, "ended_by": "heal-all", "planned_end": 11.0}
    history = read_history(run_dir / "history.jsonl")
    heal_all = [op for op in history if op.f == "heal-all"]
    kill = [op for op in history if op.f == "start-kill"]
    [stop] = [op for op in history if op.f == "stop-kill" and op.type == "ok"]
    assert stop.value == executed["stop_result"] and stop.time <= heal_all[0].time
    ended = (stop.time - kill[0].time) / 1e9 + executed["started_at"]
    assert 3.0 <= executed["stopped_at"] < 11.0
    assert executed["stopped_at"] == pytest.approx(ended, abs=1e-3)
    assert executed["error"] is None


def test_repro_of_a_run_says_it_too(past_the_limit: tuple[int, list[str], Path],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    _, _, run_dir = past_the_limit
    assert main(["repro", str(run_dir)]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert sum(NOTE in line and "fault 0 (kill leader)" in line for line in lines) == 1, lines


def test_a_fault_ending_at_the_time_limit_is_not_said_to_last_past_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, run_dir = run(capsys, tmp_path, fault(0, 1.0, 2.0))
    assert code == 0 and not any("heal-all ends" in line for line in lines), lines


def test_many_faults_past_the_time_limit_are_counted_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    faults = [fault(0, 0.5, 1.0), *(fault(n, 0.5 + n / 10, 5.0, "partition", "isolate-one") for n in range(1, 6))]
    code, lines, _ = run(capsys, tmp_path, *faults)
    said = [line for line in lines if NOTE in line]
    assert code == 0 and len(said) == 1, lines
    assert ": 5 faults are planned to end after the test's time limit of 3 s (fault 1 (partition isolate-one) at 5.6 s, " in said[0]
    assert "and 2 more): the final heal-all ends them" in said[0], said[0]


def test_a_fault_the_heal_all_failed_to_end_records_the_failure(tmp_path: Path) -> None:
    """The heal-all's account of the fault's kind says it failed: the fault's record says so
    too, rather than that it ended. (The heal-all after a failure: the one at the phase's end
    heals each fault in force with its own stop first.)"""
    import asyncio

    from fault_driver_fixtures import kill_driver

    from floodmark.harness.schedule import Fault, Schedule

    driver, recorder, _ = kill_driver(tmp_path, Schedule((Fault(0, "kill", "leader", 0.0, 30.0, 1),), 0.1),
                                      heal_all_result={"kill": {"error": "n2 would not start"}})

    async def past_the_limit() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.1, stop.set)
        await driver.run(recorder.seconds(), stop)
        await driver.heal_all(each=False)

    asyncio.run(past_the_limit())
    recorder.close()
    executed = json.loads((tmp_path / "schedule.json").read_text())["executed"][0]
    assert executed["stop_result"] == {"ended_by": "heal-all", "planned_end": 30.0}
    assert executed["error"] == "heal-all kill: n2 would not start" and executed["stopped_at"] >= 0.1


@pytest.mark.parametrize(("nemesis", "faults", "took_effect"), [
    ("message,pause", [fault(0, 1.0, 30.0, "message", "drop-zookeeper-reply"), fault(1, 1.5, 30.0, "pause", "random-long")],
     "message 1/1, pause 1/1"),
    ("upgrade", [fault(0, 1.0, 30.0, "upgrade", "double-roll")], "upgrade 1/1"),
])
def test_a_fault_the_heal_all_ends_is_judged_by_what_it_did(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], nemesis: str, faults: list[dict[str, Any]],
        took_effect: str) -> None:
    """What a fault did is read from its stop; ended by the heal-all, whose account is per kind,
    it had none, and the run said that a message fault that dropped ZooKeeper replies for 7 s, a long
    pause that cost its broker the session ("ZooKeeper did not answer") and a whole upgrade
    did not take effect. Now each is healed by its own stop, marked as ended by the heal-all."""
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps({"time_limit": 8, "faults": faults}))
    code = main(["run", "--cluster", "sim", "--seed", "3", *LIGHT, "--nemesis", nemesis,
                 "--schedule", str(path), "--store", str(tmp_path / "store")])
    lines = capsys.readouterr().err.splitlines()
    assert code == 0 and f"floodmark: faults that took effect: {took_effect}" in lines, lines
    run_dir = (tmp_path / "store" / "latest").resolve()
    stops = [op for op in read_history(run_dir / "history.jsonl") if op.f.startswith("stop-") and op.type == "ok"]
    assert [(op.value["ended_by"], op.value["planned_end"]) for op in stops] == [("heal-all", f["start"] + 30.0)
                                                                                 for f in faults]
    for executed in json.loads((run_dir / "schedule.json").read_text())["executed"]:
        assert executed["stop_result"]["ended_by"] == "heal-all" and executed["error"] is None, executed
