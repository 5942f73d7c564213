"""Tests for floodmark.harness.schedule: seeded generation, rules, JSON round trip."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from floodmark.harness.schedule import (
    GroupRule,
    Schedule,
    ScheduleError,
    ScheduleLog,
    generate,
    load_schedule,
)
from floodmark.harness.seeds import Seeds

KINDS = ("partition", "clock", "pause", "disk", "kill")
SHAPES = {
    "partition": ("isolate-one", "halves", "ring"),
    "clock": ("bump", "strobe"),
    "pause": ("random", "controller"),
    "disk": ("chmod",),
    "kill": ("controller", "leader", "random"),
}


def make(seed: int, kinds=KINDS, time_limit: float = 120.0) -> Schedule:
    return generate(Seeds(seed).schedule(), kinds, SHAPES, time_limit, (3.0, 12.0), (2.0, 6.0))


def test_same_seed_same_schedule() -> None:
    assert make(42) == make(42)
    assert make(42) != make(43)


@pytest.mark.parametrize("seed", range(30))
def test_schedule_rules(seed: int) -> None:
    schedule = make(seed)
    assert schedule.faults, "a 120 s test with faults has some"
    for fault in schedule.faults:
        assert fault.kind in KINDS and fault.shape in SHAPES[fault.kind]
        assert fault.start >= 2.0  # a warm-up quiet period first
        assert 0 < fault.duration <= 12.0
        assert fault.end <= 120.0 + 1e-9  # every fault is healed within the time limit
    # Faults of the same kind never overlap, and every start has its stop, after it.
    actions = schedule.actions()
    assert sum(1 for _, what, _ in actions if what == "start") == len(schedule.faults)
    assert sum(1 for _, what, _ in actions if what == "stop") == len(schedule.faults)
    assert [t for t, _, _ in actions] == sorted(t for t, _, _ in actions)
    active: set[str] = set()
    for _, what, fault in actions:
        if what == "start":
            assert fault.kind not in active
            active.add(fault.kind)
        else:
            active.remove(fault.kind)
    assert not active


def test_quiet_periods_separate_groups_of_faults() -> None:
    for seed in range(20):
        faults = make(seed).faults
        group_end = 0.0
        for fault in faults:
            if fault.start >= group_end:  # a new group: a quiet period of at least 2 s first
                assert fault.start - group_end >= 2.0 - 1e-6
            group_end = max(group_end, fault.end)


def test_faults_compose_sometimes() -> None:
    overlaps = 0
    for seed in range(40):
        faults = make(seed).faults
        overlaps += sum(1 for a, b in zip(faults, faults[1:]) if b.start < a.end)
    assert overlaps > 0


def test_no_kinds_no_faults_and_single_kind() -> None:
    assert make(1, kinds=()).faults == ()
    assert {f.kind for f in make(1, kinds=("kill",)).faults} == {"kill"}


def test_kind_without_shapes_gets_default() -> None:
    schedule = generate(random.Random(1), ("disk",), {}, 60, (3, 5), (1, 2))
    assert {f.shape for f in schedule.faults} == {"default"}


def test_schedule_json_round_trip(tmp_path: Path) -> None:
    schedule = make(9)
    log = ScheduleLog(tmp_path / "schedule.json", 9, schedule)
    executed = log.record(schedule.faults[0])
    executed.started_at, executed.start = 3.1, {"isolated": ["n2"]}
    log.heal_all = {"partition": {"removed": 4}}
    log.save()
    seed, loaded = load_schedule(tmp_path / "schedule.json")
    assert seed == 9 and loaded == schedule
    data = json.loads((tmp_path / "schedule.json").read_text())
    assert data["executed"][0]["start_result"] == {"isolated": ["n2"]}
    assert data["heal_all"] == {"partition": {"removed": 4}}


def test_bad_schedule_files(tmp_path: Path) -> None:
    path = tmp_path / "schedule.json"
    path.write_text("{not json")
    with pytest.raises(ScheduleError, match="not valid JSON"):
        load_schedule(path)
    path.write_text(json.dumps({"faults": [{"kind": "kill"}]}))
    with pytest.raises(ScheduleError, match="fault 0"):
        load_schedule(path)
    with pytest.raises(ScheduleError, match="cannot read"):
        load_schedule(tmp_path / "missing.json")


def test_a_kind_with_a_recovery_time_waits_that_long_after_its_last_fault_healed() -> None:
    kinds = ("power", "kill")
    shapes = {"power": ("leader",), "kill": ("random",)}
    for seed in range(30):
        spaced = generate(random.Random(seed), kinds, shapes, 120, (1, 4), (0.5, 2),
                          recovery=lambda kind, shapes: 20.0 if kind == "power" else 0.0)
        power = [f for f in spaced.faults if f.kind == "power"]
        assert all(later.start >= earlier.end + 20.0 for earlier, later in itertools.pairwise(power))
        # Kinds without a recovery time are planned exactly as before.
        plain = generate(random.Random(seed), ("kill", "disk"), {}, 120, (1, 4), (0.5, 2),
                         recovery=lambda kind, shapes: 0.0)
        assert plain == generate(random.Random(seed), ("kill", "disk"), {}, 120, (1, 4), (0.5, 2))
    unspaced = [generate(random.Random(seed), kinds, shapes, 120, (1, 4), (0.5, 2)) for seed in range(30)]
    assert any(later.start < earlier.end + 20.0
               for s in unspaced for earlier, later in itertools.pairwise([f for f in s.faults if f.kind == "power"]))


# --- hand-written schedules (the hostile-input audit of run --schedule, repro and shrink)

FAULT = {"number": 0, "kind": "partition", "shape": "isolate-one", "start": 1.0, "duration": 2.0, "seed": 1}


def _written(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps(data))
    return path


def test_a_fault_of_no_duration_is_healed_right_after_it_starts_not_at_the_heal_all() -> None:
    """Audit: its stop sorted before its own start (stops first at equal times), so the driver
    skipped the stop of a fault not yet in force and the fault lasted until the heal-all."""
    for duration in (0, 1e-170):  # (the second too small to add to its start)
        zero = Schedule.from_dict({"time_limit": 5, "faults": [{**FAULT, "duration": duration}]})
        assert [what for _, what, _ in zero.actions()] == ["start", "stop"]
    # Other faults keep their order: at equal times a heal still comes before a new fault.
    two = Schedule.from_dict({"time_limit": 5, "faults": [FAULT, {**FAULT, "number": 1, "start": 3.0}]})
    assert [(at, what, f.number) for at, what, f in two.actions()] == [
        (1.0, "start", 0), (3.0, "stop", 0), (3.0, "start", 1), (5.0, "stop", 1)]


@pytest.mark.parametrize(("data", "problem"), [
    ({"time-limit": 3, "faults": [FAULT]}, "unknown key 'time-limit'; did you mean 'time_limit'?"),
    ({"time_limit": 3, "faults": [{**FAULT, "node": "n7"}]},
     "fault 0: unknown key 'node'; known: number, kind, shape, start, duration, seed"),
    ({"time_limit": 3, "faults": [{**FAULT, "durration": 1}]}, "fault 0: unknown key 'durration'; did you mean 'duration'?"),
    ({"time_limit": 3, "faults": [], "x" * 500: 1}, f"unknown key '{'x' * 37}...'; known: seed, time_limit, faults, executed, heal_all"),
])
def test_a_key_the_format_does_not_have_is_refused_not_ignored(tmp_path: Path, data: dict, problem: str) -> None:
    """Audit: ignored silently, so a typo ran another test ("time-limit": 3 ran 60 s)."""
    path = _written(tmp_path, data)
    with pytest.raises(ScheduleError) as refused:
        load_schedule(path)
    assert str(refused.value) == f"{path}: {problem}"


def test_what_a_run_writes_of_its_execution_is_read_as_part_of_the_format(tmp_path: Path) -> None:
    path = _written(tmp_path, {"seed": 3, "time_limit": 3, "faults": [FAULT], "executed": [], "heal_all": None})
    assert load_schedule(path)[0] == 3


@pytest.mark.parametrize("seed", ["42x", -5, 1.5, True, 2**63, [4]])
def test_a_schedule_seed_of_the_wrong_type_is_refused_not_ignored(tmp_path: Path, seed: object) -> None:
    """Audit: read as no seed, so repro did not compare it with test.yaml's."""
    path = _written(tmp_path, {"seed": seed, "time_limit": 3, "faults": []})
    with pytest.raises(ScheduleError) as refused:
        load_schedule(path)
    assert str(refused.value) == f"{path}: seed must be an integer from 0 to 2**63 - 1"


def test_a_schedule_without_a_seed_has_none(tmp_path: Path) -> None:
    assert load_schedule(_written(tmp_path, {"faults": []}))[0] is None
    assert load_schedule(_written(tmp_path, {"seed": None, "faults": []}))[0] is None


def test_more_faults_than_a_run_can_execute_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit: 600,000 faults (61 MB, under the size limit) took 7 GB and over five minutes."""
    from floodmark.harness import schedule as schedule_module

    monkeypatch.setattr(schedule_module, "MAX_SCHEDULE_FAULTS", 2)
    faults = [{**FAULT, "number": n} for n in range(3)]
    path = _written(tmp_path, {"time_limit": 3, "faults": faults})
    with pytest.raises(ScheduleError) as refused:
        load_schedule(path)
    assert str(refused.value).startswith(f"{path}: 3 faults, more than 2: a run cannot execute that many")
    assert len(load_schedule(_written(tmp_path, {"time_limit": 3, "faults": faults[:2]}))[1].faults) == 2


def test_a_byte_that_is_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    """Audit: "not UTF-8 text", nowhere in a file of many lines."""
    path = tmp_path / "schedule.json"
    path.write_bytes(b'{\n "time_limit": 3,\n "faults": [\n  {"kind": "partit\xe9on"}\n ]\n}\n')
    with pytest.raises(ScheduleError) as refused:
        load_schedule(path)
    assert str(refused.value) == f"{path}: not a schedule: not UTF-8 text (line 4: byte 0xe9)"


def test_a_schedule_s_unstated_time_limit_is_one_its_own_file_may_state(tmp_path: Path) -> None:
    """Found by the round-trip property: a schedule stating no time limit whose last fault ends
    past the longest a time limit may be (7 days, from 1 s) took that end as its time limit,
    which schedule.json then stated and reading it back refused ('time_limit must be ...')."""
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps({"faults": [{"number": 0, "kind": "kill", "shape": "leader", "start": 1,
                                            "duration": 604800, "seed": 0}]}))
    _, schedule = load_schedule(path)
    assert schedule.time_limit == 604800 and not schedule.time_limit_stated
    assert Schedule.from_dict(schedule.to_dict()) == schedule


def test_a_drawn_fault_cut_to_end_at_the_time_limit_does_not_last_past_it() -> None:
    """Drawn faults are cut to end at the time limit, to the millisecond: 24 of 5,389 drawn
    over 300 seeds ended a hair past it in floating point (24.603 + 6.097 = 30.700000000000003),
    and a replay of their run would say the heal-all ends them."""
    from floodmark.harness.schedule import Fault

    schedule = Schedule((Fault(0, "message", "duplicate-heartbeat", 24.603, 6.097, 1),
                         Fault(1, "kill", "random", 24.69, 6.011, 2)), 30.7)
    assert [f.number for f in schedule.past(30.7)] == [1]


def test_a_group_is_cut_at_the_time_limit_if_each_of_its_steps_starts_in_time() -> None:
    # What a group lines up is when its steps start against each other: the last one may
    # outlast the test (it is cut at the limit, as a single fault is), but a step that would
    # start within the shortest fault of the limit leaves the group out.
    def group(steps: tuple[tuple[str, float, float], ...]) -> GroupRule:
        return lambda kind, shape, rng: steps

    outlasting = (("first", 0.0, 2.0), ("last", 6.0, 50.0))
    late = (("first", 0.0, 2.0), ("late", 19.5, 0.5))
    for seed in range(20):
        cut = generate(random.Random(seed), ("k",), {"k": ("g",)}, 20.0, (1.0, 2.0), (0.5, 1.0),
                       group=group(outlasting))
        assert [f.shape for f in cut.faults] == ["first", "last"]
        first, last = cut.faults
        assert last.start == round(first.start + 6.0, 3) and last.end == 20.0
        assert not generate(random.Random(seed), ("k",), {"k": ("g",)}, 20.0, (1.0, 2.0), (0.5, 1.0),
                            group=group(late)).faults
