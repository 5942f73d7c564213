"""Tests for floodmark.run.fault_driver: schedule execution, recording, heal-all."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

from floodmark.harness.recorder import Recorder
from floodmark.harness.schedule import Fault, Schedule, ScheduleLog
from floodmark.history import read_history
from floodmark.nemesis.base import NemesisContext
from floodmark.run.fault_driver import FaultDriver


class NoView:
    def controller(self) -> int | None:
        return None

    def leader(self, topic: str, partition: int) -> int | None:
        return None


class FakeComposite:
    """Records calls; a start of shape "broken" raises, a heal of kind "disk" reports an error."""

    def __init__(self, kinds: tuple[str, ...]) -> None:
        self.nemeses = {k: object() for k in kinds}
        self.calls: list[tuple[Any, ...]] = []

    def start(self, kind: str, rng: random.Random, cluster: Any, context: Any, shape: str | None = None) -> dict:
        if shape == "broken":
            raise RuntimeError("iptables said no")
        choice = rng.randint(0, 10**6)
        self.calls.append(("start", kind, shape, choice))
        return {"kind": kind, "shape": shape, "choice": choice}

    def stop(self, kind: str, cluster: Any, context: Any) -> dict:
        self.calls.append(("stop", kind))
        return {"healed": kind}

    def heal_all(self, cluster: Any, context: Any) -> dict:
        self.calls.append(("heal_all",))
        return {k: ({"error": "disk stuck"} if k == "disk" else {"healed": True}) for k in self.nemeses}


def drive(tmp_path: Path, faults: tuple[Fault, ...], kinds: tuple[str, ...]):
    recorder = Recorder(tmp_path / "history.jsonl")
    schedule_log = ScheduleLog(tmp_path / "schedule.json", 5, Schedule(faults, 1.0))
    composite = FakeComposite(kinds)
    driver = FaultDriver(recorder, None, composite, NemesisContext(view=NoView()), schedule_log)  # type: ignore[arg-type]

    async def go() -> None:
        stop = asyncio.Event()
        await driver.run(recorder.seconds(), stop)
        await driver.heal_all()

    asyncio.run(go())
    recorder.close()
    return driver, composite, read_history(tmp_path / "history.jsonl"), json.loads((tmp_path / "schedule.json").read_text())


def test_executes_in_order_records_and_replays_choices(tmp_path: Path) -> None:
    faults = (Fault(0, "partition", "halves", 0.05, 0.1, 11), Fault(1, "kill", "leader", 0.1, 0.1, 12))
    driver, composite, ops, saved = drive(tmp_path, faults, ("partition", "kill"))
    assert [op.f for op in ops if op.type == "invoke"] == [
        "start-partition", "start-kill", "stop-partition", "stop-kill", "heal-all"]
    assert all(op.process == "nemesis" for op in ops)
    started = [op for op in ops if op.f == "start-partition" and op.type == "ok"][0]
    assert started.value["choice"] == random.Random(11).randint(0, 10**6)  # rng from the fault's seed
    assert started.time >= 0.05e9
    assert [e["number"] for e in saved["executed"]] == [0, 1]
    assert saved["executed"][0]["start_result"] == started.value
    assert saved["executed"][0]["stop_result"] == {"healed": "partition"}
    assert saved["executed"][0]["stopped_at"] >= saved["executed"][0]["started_at"]
    assert saved["heal_all"] == {"partition": {"healed": True}, "kill": {"healed": True}}
    assert driver.current() == [] and driver.errors == []


def test_failed_start_is_info_and_heal_errors_are_reported(tmp_path: Path) -> None:
    faults = (Fault(0, "disk", "broken", 0.0, 0.05, 1),)
    driver, composite, ops, saved = drive(tmp_path, faults, ("disk",))
    start = [op for op in ops if op.f == "start-disk" and op.type != "invoke"][0]
    assert start.type == "info" and "iptables said no" in start.error
    assert saved["executed"][0]["error"].startswith("RuntimeError")
    heal = [op for op in ops if op.f == "heal-all" and op.type != "invoke"][0]
    assert heal.type == "info" and heal.error == {"disk": "disk stuck"}
    assert any("disk stuck" in e for e in driver.errors)


def test_stop_event_returns_early_leaving_faults_for_heal_all(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "history.jsonl")
    faults = (Fault(0, "pause", "x", 0.0, 30.0, 1), Fault(1, "kill", "y", 40.0, 5.0, 2))
    schedule_log = ScheduleLog(tmp_path / "schedule.json", 5, Schedule(faults, 60.0))
    composite = FakeComposite(("pause", "kill"))
    driver = FaultDriver(recorder, None, composite, NemesisContext(view=NoView()), schedule_log)  # type: ignore[arg-type]

    async def go() -> list[str]:
        stop = asyncio.Event()
        task = asyncio.create_task(driver.run(recorder.seconds(), stop))
        await asyncio.sleep(0.2)
        active = driver.current()
        stop.set()
        await asyncio.wait_for(task, 1.0)
        return active

    assert asyncio.run(go()) == ["pause:x"]
    assert [c[0] for c in composite.calls] == ["start"]
    recorder.close()
