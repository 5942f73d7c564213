"""The fault driver: executes a fault schedule against a cluster and records every action.

The schedule (:mod:`floodmark.harness.schedule`) says what should happen when; the nemeses
(:mod:`floodmark.nemesis`) know how to do it. The driver sleeps until each planned start or
stop, calls the nemesis of that kind, and records the action twice in the history, as the
clients' ops are recorded: an ``invoke`` of ``start-<kind>`` or ``stop-<kind>`` saying what was
planned, then a completion whose value is the nemesis's own account of what it did (nodes,
rules, offsets, pids): ``ok`` when it did it, ``info`` when it raised part-way (the fault may
be partly in place). The same account goes into ``schedule.json`` as executed.

A nemesis's start draws its remaining choices from ``random.Random(fault.seed)``, so replaying
the schedule replays them too. Nemeses act through blocking calls (iptables, Docker), so they
run in a worker thread while the clients keep going on the event loop.

``heal_all`` ends everything of every kind, whether or not the driver remembers starting it;
the runner calls it once the fault phase ends, and again (best effort) if anything failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import Any

from floodmark.harness.cluster import Cluster
from floodmark.harness.recorder import Recorder
from floodmark.harness.schedule import Fault, ScheduleLog
from floodmark.history import NEMESIS
from floodmark.nemesis.base import NemesisContext
from floodmark.nemesis.compose import Composite

log = logging.getLogger(__name__)


class FaultDriver:
    def __init__(
        self,
        recorder: Recorder,
        cluster: Cluster,
        nemeses: Composite,
        context: NemesisContext,
        schedule_log: ScheduleLog,
    ) -> None:
        self.recorder = recorder
        self.cluster = cluster
        self.nemeses = nemeses
        self.context = context
        self.schedule_log = schedule_log
        self.active: dict[int, Fault] = {}
        self.errors: list[str] = []

    def current(self) -> list[str]:
        """The faults in force, for the progress line ("partition:isolate-one")."""
        return [f"{f.kind}:{f.shape}" for _, f in sorted(self.active.items())]

    async def run(self, started_at: float, stop: asyncio.Event) -> None:
        """Execute the schedule; ``started_at`` is the recorder's seconds at workload start.

        Returns early (leaving active faults for heal-all) when ``stop`` is set.
        """
        self.schedule_log.save()
        for at, what, fault in self.schedule_log.schedule.actions():
            delay = started_at + at - self.recorder.seconds()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return
            if what == "start":
                await self.start(fault)
            elif fault.number in self.active:
                await self.stop(fault)

    async def start(self, fault: Fault) -> None:
        executed = self.schedule_log.record(fault)
        planned = {"fault": fault.number, "shape": fault.shape, "duration": fault.duration}
        self.recorder.record("invoke", NEMESIS, f"start-{fault.kind}", planned)
        executed.started_at = self.recorder.seconds()
        self.active[fault.number] = fault
        try:
            rng = random.Random(fault.seed)
            result = await asyncio.to_thread(
                self.nemeses.start, fault.kind, rng, self.cluster, self.context, fault.shape)
        except Exception as e:
            executed.error = self._failed(f"start-{fault.kind}", planned, e)
        else:
            executed.start = result
            self.recorder.record("ok", NEMESIS, f"start-{fault.kind}", result)
        self.schedule_log.save()

    async def stop(self, fault: Fault) -> None:
        executed = self.schedule_log.record(fault)
        planned = {"fault": fault.number, "shape": fault.shape}
        self.recorder.record("invoke", NEMESIS, f"stop-{fault.kind}", planned)
        self.active.pop(fault.number, None)
        try:
            result = await asyncio.to_thread(self.nemeses.stop, fault.kind, self.cluster, self.context)
        except Exception as e:
            executed.error = self._failed(f"stop-{fault.kind}", planned, e)
        else:
            executed.stop = result
            self.recorder.record("ok", NEMESIS, f"stop-{fault.kind}", result)
        executed.stopped_at = self.recorder.seconds()
        self.schedule_log.save()

    async def heal_all(self) -> dict[str, Any]:
        """Heal every kind on every node; records one ``heal-all`` op with each nemesis's account."""
        kinds = sorted(self.nemeses.nemeses)
        self.recorder.record("invoke", NEMESIS, "heal-all", {"kinds": kinds})
        try:
            healed = await asyncio.to_thread(self.nemeses.heal_all, self.cluster, self.context)
        except Exception as e:  # the composite reports per-kind errors; this is anything else
            healed = {"error": f"{type(e).__name__}: {e}"}
        errors = {kind: report["error"] for kind, report in healed.items()
                  if isinstance(report, dict) and "error" in report}
        if "error" in healed and isinstance(healed["error"], str):
            errors["all"] = healed["error"]
        self.active.clear()
        if errors:
            self.errors.extend(f"heal-all {k}: {v}" for k, v in errors.items())
            log.error("heal-all failed: %s", errors)
            self.recorder.record("info", NEMESIS, "heal-all", healed, error=errors)
        else:
            self.recorder.record("ok", NEMESIS, "heal-all", healed)
        self.schedule_log.heal_all = healed
        self.schedule_log.save()
        return healed

    def _failed(self, f: str, planned: dict[str, Any], error: Exception) -> str:
        message = f"{type(error).__name__}: {error}"
        log.error("%s failed: %s", f, message)
        self.errors.append(f"{f}: {message}")
        self.recorder.record("info", NEMESIS, f, planned, error=message)
        return message
