"""Tests for floodmark.run.fault_driver: schedule execution, recording, heal-all."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from cluster_fixtures import FakeCluster, view_of

from floodmark.contracts.history import read_history
from floodmark.harness.faults import ClusterView, DiskFault, FaultPlan
from floodmark.harness.recorder import Recorder
from floodmark.harness.schedule import Fault, Schedule, ScheduleLog
from floodmark.nemesis.compose import Composite
from floodmark.run.fault_driver import FaultDriver


class FakeApplier:
    """Records plans; applying a disk fault raises, healing the disk kind reports an error."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def refuses(self, kind: str, shape: str) -> str | None:
        return None

    async def apply(self, plan: FaultPlan) -> dict[str, Any]:
        if isinstance(plan, DiskFault):
            raise RuntimeError("chmod said no")
        self.calls.append(("apply", plan))
        return {"applied": True}

    async def heal(self, plan: FaultPlan) -> dict[str, Any]:
        self.calls.append(("heal", plan))
        return {"healed": plan.kind}

    async def heal_all(self, kinds: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        self.calls.append(("heal_all", kinds))
        return {k: ({"error": "disk stuck"} if k == "disk" else {"healed": True}) for k in kinds}


VIEW = view_of(FakeCluster(), controller=1, leaders={("t0", 0): 2})


async def observe() -> ClusterView:
    return VIEW


def make_driver(tmp_path: Path, faults: tuple[Fault, ...], kinds: tuple[str, ...],
                time_limit: float = 1.0) -> tuple[FaultDriver, FakeApplier, Recorder]:
    recorder = Recorder(tmp_path / "history.jsonl")
    schedule_log = ScheduleLog(tmp_path / "schedule.json", 5, Schedule(faults, time_limit))
    applier = FakeApplier()
    return FaultDriver(recorder, Composite(kinds), applier, observe, schedule_log), applier, recorder


def drive(tmp_path: Path, faults: tuple[Fault, ...], kinds: tuple[str, ...]) -> Any:
    driver, applier, recorder = make_driver(tmp_path, faults, kinds)

    async def go() -> None:
        await driver.run(recorder.seconds(), asyncio.Event())
        await driver.heal_all()

    asyncio.run(go())
    recorder.close()
    saved = json.loads((tmp_path / "schedule.json").read_text())
    return driver, applier, read_history(tmp_path / "history.jsonl"), saved


def test_executes_in_order_records_and_replays_choices(tmp_path: Path) -> None:
    faults = (Fault(0, "partition", "halves", 0.05, 0.1, 11), Fault(1, "kill", "leader", 0.1, 0.1, 12))
    driver, applier, ops, saved = drive(tmp_path, faults, ("partition", "kill"))
    assert [op.f for op in ops if op.type == "invoke"] == [
        "start-partition", "start-kill", "stop-partition", "stop-kill", "heal-all"]
    assert all(op.process == "nemesis" for op in ops)
    started = [op for op in ops if op.f == "start-partition" and op.type == "ok"][0]
    plan, choice = Composite(["partition"]).plan("partition", random.Random(11), VIEW, "halves", 0.1)
    assert started.value == {**choice, **plan.describe(), "applied": True}  # the fault's own seed
    assert applier.calls[0] == ("apply", plan)
    assert started.time >= 0.05e9
    assert [e["number"] for e in saved["executed"]] == [0, 1]
    assert saved["executed"][0]["start_result"] == started.value
    assert saved["executed"][0]["stop_result"] == {"healed": "partition"}
    assert saved["executed"][0]["stopped_at"] >= saved["executed"][0]["started_at"]
    assert saved["heal_all"] == {"kill": {"healed": True}, "partition": {"healed": True}}
    assert driver.current() == [] and driver.errors == []


def test_failed_start_is_info_its_stop_still_heals_and_heal_errors_are_reported(tmp_path: Path) -> None:
    faults = (Fault(0, "disk", "chmod", 0.0, 0.05, 1),)
    driver, applier, ops, saved = drive(tmp_path, faults, ("disk",))
    start = [op for op in ops if op.f == "start-disk" and op.type != "invoke"][0]
    assert start.type == "info" and "chmod said no" in start.error
    assert saved["executed"][0]["error"].startswith("RuntimeError")
    assert [c[0] for c in applier.calls] == ["heal", "heal_all"]  # a part-applied fault is healed
    heal = [op for op in ops if op.f == "heal-all" and op.type != "invoke"][0]
    assert heal.type == "info" and heal.error == {"disk": "disk stuck"}
    assert any("disk stuck" in e for e in driver.errors)


def test_stop_event_returns_early_leaving_faults_for_heal_all(tmp_path: Path) -> None:
    faults = (Fault(0, "pause", "random-long", 0.0, 30.0, 1), Fault(1, "kill", "random", 40.0, 5.0, 2))
    driver, applier, recorder = make_driver(tmp_path, faults, ("pause", "kill"), time_limit=60.0)

    async def go() -> list[str]:
        stop = asyncio.Event()
        task = asyncio.create_task(driver.run(recorder.seconds(), stop))
        await asyncio.sleep(0.2)
        active = driver.current()
        stop.set()
        await asyncio.wait_for(task, 1.0)
        return active

    assert asyncio.run(go()) == ["pause:random-long"]
    assert [c[0] for c in applier.calls] == ["apply"]
    recorder.close()


def test_a_thousand_faults_rewrite_schedule_json_a_few_times_not_after_each(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Rewritten whole after every action, a schedule of n faults cost n² (80 s for 1,000).
    faults = tuple(Fault(i, "kill", "leader", round(i * 0.0001, 4), 0.01, i) for i in range(1000))
    writes = []
    save = ScheduleLog.save
    monkeypatch.setattr(ScheduleLog, "save", lambda log: writes.append(1) or save(log))
    _, _, ops, saved = drive(tmp_path, faults, ("kill",))
    assert len(saved["executed"]) == 1000 and all(e["stopped_at"] is not None for e in saved["executed"])
    assert saved["heal_all"] is not None
    assert len(writes) < 20


def test_schedule_json_is_written_at_most_about_once_a_second_and_at_the_end(tmp_path: Path) -> None:
    now = [0.0]
    log = ScheduleLog(tmp_path / "schedule.json", 5, Schedule((Fault(0, "kill", "leader", 0, 1, 1),), 2.0),
                      clock=lambda: now[0])
    log.save()
    log.record(log.schedule.faults[0]).started_at = 0.5
    log.changed()  # within the second: not yet written
    assert json.loads((tmp_path / "schedule.json").read_text())["executed"] == []
    now[0] = 1.0
    log.changed()
    assert json.loads((tmp_path / "schedule.json").read_text())["executed"][0]["started_at"] == 0.5
    log.record(log.schedule.faults[0]).stopped_at = 1.5
    log.changed()
    log.flush()  # the run ends: everything is written
    assert json.loads((tmp_path / "schedule.json").read_text())["executed"][0]["stopped_at"] == 1.5


def test_a_fault_whose_start_was_skipped_heals_nothing_at_its_stop(tmp_path: Path) -> None:
    """A kill skipped because another kill had the broker down was healed all the same: its
    heal restarted the broker, cutting the other kill short while that one still said it was
    in force (and a skipped cancelling reassignment cancelled the one in progress)."""
    faults = (Fault(0, "kill", "leader", 0.0, 0.2, 1), Fault(1, "kill", "leader", 0.05, 0.05, 1))
    driver, applier, recorder = make_driver(tmp_path, faults, ("kill",))
    down: list[FaultPlan] = []

    async def apply(plan: FaultPlan) -> dict[str, Any]:
        if plan in down:
            return {"skipped": "n2 is not running"}
        down.append(plan)
        applier.calls.append(("apply", plan))
        return {"applied": True}

    applier.apply = apply  # type: ignore[method-assign]

    async def go() -> None:
        await driver.run(recorder.seconds(), asyncio.Event())

    asyncio.run(go())
    recorder.close()
    assert [c[0] for c in applier.calls] == ["apply", "heal"]  # the heal of fault 0, at 0.2 s
    saved = driver.schedule_log.to_dict()
    assert saved["executed"][1]["stop_result"] == {"skipped": "nothing to heal: its start was skipped "
                                                              "(n2 is not running)"}
    assert saved["executed"][0]["stop_result"] == {"healed": "kill"}
