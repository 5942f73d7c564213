"""Properties of the schedule.json reader over generated schedules, as a user hands them over.

Any schedule the format allows (faults of any names, numbers in any order, starts and
durations anywhere in range, seeds up to 2**63 - 1, a time limit stated or not) is read back
exactly as written, and exactly as a run writes it (:class:`ScheduleLog`). Any one field made
wrong (a boolean for a number, a number out of range, NaN, text for a number, a name too long,
a field missing, a key unknown or named twice) is refused with one line naming the file and
the fault's position, never read as something else; ``run --schedule`` refuses it (exit 254,
that one line) before making a run directory. The byte-level mutations of the same format
are the fuzz target ``schedule-json`` (tests/fixtures/fuzz_readers.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.cli import main
from floodmark.harness.schedule import (
    MAX_SCHEDULE_SECONDS,
    Fault,
    Schedule,
    ScheduleError,
    ScheduleLog,
    load_schedule,
)

SECONDS = st.one_of(st.floats(0, MAX_SCHEDULE_SECONDS), st.integers(0, int(MAX_SCHEDULE_SECONDS)),
                    st.sampled_from([0, 0.0, -0.0, 5e-324, MAX_SCHEDULE_SECONDS]))
WHOLE = st.one_of(st.integers(0, 2**63 - 1), st.sampled_from([0, 2**63 - 1]))
NAME = st.text(min_size=1, max_size=100)
PROPERTY = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@st.composite
def schedules(draw: Any) -> dict[str, Any]:
    """A schedule.json the format allows, as a user may write it."""
    numbers = draw(st.lists(WHOLE, unique=True, max_size=6))
    faults = [{"number": n, "kind": draw(NAME), "shape": draw(NAME), "start": draw(SECONDS),
               "duration": draw(SECONDS), "seed": draw(WHOLE)} for n in numbers]
    data: dict[str, Any] = {"faults": faults}
    if draw(st.booleans()):
        data["time_limit"] = draw(SECONDS)
    if draw(st.booleans()):
        data["seed"] = draw(st.one_of(st.none(), WHOLE))
    return data


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "schedule.json"
    path.write_text(text, encoding="utf-8")
    return path


@PROPERTY
@given(schedules())
def test_a_schedule_the_format_allows_is_read_exactly_as_written(tmp_path: Path, data: dict[str, Any]) -> None:
    seed, schedule = load_schedule(write(tmp_path, json.dumps(data)))
    assert seed == data.get("seed")
    assert [f.to_dict() for f in schedule.faults] == data["faults"]  # (1 == 1.0: the same seconds)
    for fault in schedule.faults:
        assert type(fault.start) is float and type(fault.duration) is float and type(fault.seed) is int
    stated = "time_limit" in data
    assert schedule.time_limit_stated is stated
    last = min(max((f.end for f in schedule.faults), default=0), MAX_SCHEDULE_SECONDS)  # (at most a time limit)
    assert schedule.time_limit == (data["time_limit"] if stated else last)


@PROPERTY
@given(schedules(), WHOLE)
def test_what_a_run_writes_is_read_back_as_the_same_schedule(tmp_path: Path, data: dict[str, Any], seed: int) -> None:
    _, schedule = load_schedule(write(tmp_path, json.dumps(data)))
    log = ScheduleLog(tmp_path / "run-schedule.json", seed, schedule)
    for fault in schedule.faults[:2]:  # with what the run recorded of executing some
        log.record(fault).started_at = fault.start
    log.save()
    again_seed, again = load_schedule(tmp_path / "run-schedule.json")
    assert again_seed == seed and again == schedule and again.time_limit_stated
    assert Schedule.from_dict(schedule.to_dict()) == schedule


NOT_WHOLE = [True, False, None, -1, 2**63, 1.5, 1.0, "0", [0], {}, math.nan, math.inf]
NOT_NAME = ["", "x" * 101, 5, None, True, ["kill"], {}]
NOT_SECONDS = [True, False, None, -1, -1e-300, MAX_SCHEDULE_SECONDS + 1, 1e308, "1", [1], {}, math.nan, math.inf,
               -math.inf]
WRONG = {"number": NOT_WHOLE, "seed": NOT_WHOLE, "kind": NOT_NAME, "shape": NOT_NAME, "start": NOT_SECONDS,
         "duration": NOT_SECONDS}


@st.composite
def one_field_wrong(draw: Any) -> tuple[str, str]:
    """A schedule's JSON text with one thing wrong, and what the refusal must name."""
    data = draw(schedules().filter(lambda d: d["faults"]))
    position = draw(st.integers(0, len(data["faults"]) - 1))
    fault = data["faults"][position]
    how = draw(st.sampled_from(["value", "missing", "unknown key", "twice", "time limit", "seed"]))
    if how == "value":
        key = draw(st.sampled_from(sorted(WRONG)))
        fault[key] = draw(st.sampled_from(WRONG[key]))
        return json.dumps(data), f"fault {position}: "
    if how == "missing":
        key = draw(st.sampled_from(sorted(WRONG)))
        del fault[key]
        return json.dumps(data), f"fault {position}: missing field '{key}'"
    if how == "unknown key":
        fault[draw(st.sampled_from(["time_limit", "Start", "duration_s", "node", ""]))] = 1
        return json.dumps(data), f"fault {position}: unknown key"
    if how == "twice":  # the key again, the same value or not: which one was meant?
        key = draw(st.sampled_from(sorted(WRONG)))
        text = json.dumps(fault)
        again = json.dumps({key: draw(st.sampled_from([fault[key], 1]))})[1:-1]
        data["faults"][position] = "@"
        return json.dumps(data).replace('"@"', text[:-1] + ", " + again + "}"), f"the key '{key}' twice"
    if how == "time limit":
        data["time_limit"] = draw(st.sampled_from(NOT_SECONDS))
        return json.dumps(data), "time_limit"
    data["seed"] = draw(st.sampled_from([v for v in NOT_WHOLE if v is not None]))
    return json.dumps(data), "seed"


def said(path: Path, problem: str, message: str) -> None:
    assert "\n" not in message and message.startswith(f"{path}: "), message
    if problem != "time_limit":  # (NaN and infinity are named as such, not as a time limit)
        assert problem in message or "not a finite number" in message, (problem, message)


@PROPERTY
@given(one_field_wrong())
def test_a_schedule_with_one_thing_wrong_is_refused_naming_it(tmp_path: Path, wrong: tuple[str, str]) -> None:
    text, problem = wrong
    path = write(tmp_path, text)
    with pytest.raises(ScheduleError) as refused:
        load_schedule(path)
    said(path, problem, str(refused.value))


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(one_field_wrong())
def test_run_refuses_it_in_one_line_before_making_a_run_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], wrong: tuple[str, str]) -> None:
    text, problem = wrong
    path = write(tmp_path, text)
    store = tmp_path / "store"
    code = main(["run", "--cluster", "sim", "--schedule", str(path), "--store", str(store)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 254 and len(lines) == 1, lines
    assert lines[0].startswith("floodmark run: error: "), lines
    said(path, problem, lines[0].removeprefix("floodmark run: error: "))
    assert not store.exists() or not any(store.iterdir())


def test_a_fault_s_fields_are_the_format_s() -> None:
    """The strategies above name every field a fault has (a new one must be drawn too)."""
    assert sorted(WRONG) == sorted(Fault(0, "k", "s", 0.0, 0.0, 0).to_dict())


# What a run records of its execution ("executed", "heal_all"): read as a run writes it, and
# of any other shape refused naming the key and the entry, never read as recording nothing.
# (The fault an entry copies from the plan is repro's to compare: an edited one is said to be
# edited, tests/run/test_repro_of_edited_schedules.py.)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=5), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
RECORD = st.one_of(JSON, st.lists(st.one_of(JSON, st.dictionaries(st.sampled_from(
    ["number", "kind", "shape", "start", "duration", "seed", "started_at", "start_result", "stopped_at",
     "stop_result", "error", "node"]), JSON, max_size=12)), max_size=3))


@PROPERTY
@given(schedules(), WHOLE, st.data())
def test_a_run_s_record_of_its_execution_is_read_back(tmp_path: Path, data: dict[str, Any], seed: int,
                                                      draw: st.DataObject) -> None:
    _, schedule = load_schedule(write(tmp_path, json.dumps(data)))
    log = ScheduleLog(tmp_path / "run-schedule.json", seed, schedule)
    for fault in schedule.faults:
        executed = log.record(fault)
        executed.started_at = draw.draw(st.one_of(st.none(), SECONDS))
        executed.start = draw.draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=5), JSON, max_size=3)))
        executed.stopped_at = draw.draw(st.one_of(st.none(), SECONDS))
        executed.stop = draw.draw(st.one_of(st.none(), st.just({"ended_by": "heal-all", "planned_end": fault.end})))
        executed.error = draw.draw(st.one_of(st.none(), st.text(max_size=20)))
    log.heal_all = draw.draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=5), JSON, max_size=3)))
    log.save()
    assert load_schedule(tmp_path / "run-schedule.json") == (seed, schedule)


@PROPERTY
@given(schedules(), st.sampled_from(["executed", "heal_all"]), RECORD)
def test_any_json_recorded_is_read_or_refused_naming_it(tmp_path: Path, data: dict[str, Any], key: str,
                                                        value: Any) -> None:
    data[key] = value
    path = write(tmp_path, json.dumps(data))
    try:
        assert load_schedule(path)[1] == Schedule.from_dict({k: v for k, v in data.items() if k != key})
    except ScheduleError as e:
        message = str(e)
        assert "\n" not in message and message.startswith(f"{path}: {key}"), message
        return
    # Read: of the shape a run writes (each entry a fault, then what was done of it).
    assert value is None or (key == "heal_all" and isinstance(value, dict)) or (
        key == "executed" and isinstance(value, list) and all(isinstance(e, dict) for e in value))


@pytest.mark.parametrize(("record", "said"), [
    ({"executed": 5}, "executed: expected a list"),
    ({"executed": ["fault 0"]}, "executed[0]: expected an object"),
    ({"executed": [{"number": 0, "started-at": 1.0}]}, "executed[0]: unknown key 'started-at'; did you mean "
                                                        "'started_at'?"),
    ({"executed": [{**Fault(0, "kill", "leader", 1.0, 2.0, 3).to_dict(), "started_at": "soon"}]},
     "executed[0]: started_at must be a number of seconds or null"),
    ({"executed": [{**Fault(0, "kill", "leader", 1.0, 2.0, 3).to_dict(), "start_result": [1]}]},
     "executed[0]: start_result must be an object or null"),
    ({"heal_all": "x"}, "heal_all: expected an object"),
    ({"executed": [{"number": 2}, {"number": 1}, {"number": 2}]},
     "executed[2]: fault 2 is recorded again (first at executed[0]): a run records each fault once"),
])
def test_run_refuses_a_record_no_run_writes_naming_where(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         record: dict[str, Any], said: str) -> None:
    path = write(tmp_path, json.dumps({"time_limit": 5, "faults": [], **record}))
    code = main(["run", "--cluster", "sim", "--schedule", str(path), "--store", str(tmp_path / "store")])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 254 and len(lines) == 1 and lines[0].startswith(f"floodmark run: error: {path}: {said}"), lines
