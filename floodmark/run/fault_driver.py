"""The fault driver: executes a fault schedule against a cluster and records every action.

The schedule (:mod:`floodmark.harness.schedule`) says what should happen when; the nemeses
(:mod:`floodmark.nemesis`) plan each fault from a snapshot of the cluster; the backend's
applier (:class:`~floodmark.harness.faults.FaultApplier`) puts it in place and heals it. The
driver sleeps until each planned start or stop and records the action twice in the history,
as the clients' ops are recorded: an ``invoke`` of ``start-<kind>`` or ``stop-<kind>`` saying
what was planned, then a completion whose value says what was done: how the nemesis chose
(the role it aimed at, what it saw), the plan (nodes, links, offsets) and the backend's
evidence (rules, pids, what it verified). ``ok`` when it did it, ``info`` when it raised
part-way (the fault may be partly in place). A fault whose start was skipped (a kill of a
broker another fault has down already) has nothing in place, and its stop heals nothing: its
heal would undo the other fault early. The same account goes into ``schedule.json``
(written as :class:`~floodmark.harness.schedule.ScheduleLog` decides: not after every action).

A fault whose healing waits for long work (an upgrade's roll finishing) is healed in the
background: its ``stop-<kind>`` completion is recorded when the work ends, while the
schedule goes on; heal-all waits for such heals before it heals everything.

The driver does one thing at a time, so a fault whose start is due while an earlier one is
still being applied (an admin operation waiting for a controller a partition cut off) starts
late, and one still waiting when the fault phase ends never starts. Such a fault is not left
out of the record: it gets a ``start-<kind>`` invocation and a ``fail`` completion saying so,
in the history (the fault coverage counts it as planned, not applied) and in
``schedule.json`` (one an interrupt stopped the phase before was never due: not recorded).
The times ``schedule.json`` gives (``started_at``, ``stopped_at``) are, as
a fault's planned ``start``, seconds after the workload started.

A nemesis plans with ``random.Random(fault.seed)``, so replaying the schedule replays its
choices too. ``heal_all`` ends everything of every kind, whether or not the driver remembers
starting it; the runner calls it once the fault phase ends, and again (best effort) if
anything failed. At the phase's end it first heals each fault still in force (one planned to
last past the time limit) with its own stop, so its evidence is recorded as any fault's is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from floodmark.contracts.history import NEMESIS
from floodmark.harness.faults import ClusterView, FaultApplier, FaultPlan
from floodmark.harness.recorder import Recorder
from floodmark.harness.schedule import Fault, ScheduleLog
from floodmark.nemesis.compose import Composite

log = logging.getLogger(__name__)


class FaultDriver:
    def __init__(
        self,
        recorder: Recorder,
        nemeses: Composite,
        applier: FaultApplier,
        observe: Callable[[], Awaitable[ClusterView]],
        schedule_log: ScheduleLog,
    ) -> None:
        self.recorder = recorder
        self.nemeses = nemeses
        self.applier = applier
        self.observe = observe  # a snapshot of the cluster for planning, taken when a fault starts
        self.schedule_log = schedule_log
        self.active: dict[int, Fault] = {}
        self.plans: dict[int, FaultPlan] = {}
        self.errors: list[str] = []
        self.healing: list[asyncio.Task[None]] = []  # heals running in the background
        self.began = 0.0  # the recorder's seconds when the workload started (see run)

    def current(self) -> list[str]:
        """The faults in force, for the progress line ("partition:isolate-one")."""
        return [f"{f.kind}:{f.shape}" for _, f in sorted(self.active.items())]

    async def run(self, started_at: float, stop: asyncio.Event) -> None:
        """Execute the schedule; ``started_at`` is the recorder's seconds at workload start.

        Returns early (leaving active faults for heal-all) when ``stop`` is set.
        """
        self.began = started_at
        self.schedule_log.save()
        actions = self.schedule_log.schedule.actions()
        for done, (at, what, fault) in enumerate(actions):
            delay = started_at + at - self.recorder.seconds()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                self._never_started([f for _, action, f in actions[done:] if action == "start"])
                return
            if what == "start":
                await self.start(fault)
            elif fault.number in self.active:
                plan = self.plans.get(fault.number)
                if plan is not None and plan.heals_in_background:
                    self.healing.append(asyncio.get_running_loop().create_task(
                        self.stop(fault), name=f"stop-{fault.kind}-{fault.number}"))
                else:
                    await self.stop(fault)

    async def start(self, fault: Fault) -> None:
        executed = self.schedule_log.record(fault)
        planned = _planned(fault)
        self.recorder.record("invoke", NEMESIS, f"start-{fault.kind}", planned)
        executed.started_at = self._elapsed()
        self.active[fault.number] = fault
        try:
            view = await self.observe()
            plan, choice = self.nemeses.plan(fault.kind, random.Random(fault.seed), view,
                                             fault.shape, fault.duration)
            self.plans[fault.number] = plan  # even if applying fails part-way, stop heals it
            evidence = await self.applier.apply(plan)
        except Exception as e:
            executed.error = self._failed(f"start-{fault.kind}", planned, e)
        else:
            result = {**choice, **plan.describe(), **evidence}
            executed.start = result
            self.recorder.record("ok", NEMESIS, f"start-{fault.kind}", result)
        self.schedule_log.changed()

    async def stop(self, fault: Fault, ended_early: dict[str, Any] | None = None) -> None:
        """Heal ``fault`` and record it; ``ended_early`` (said in the stop's invocation and
        completion too) when the heal-all, not its planned end, ends it."""
        executed = self.schedule_log.record(fault)
        planned = {"fault": fault.number, "shape": fault.shape, **(ended_early or {})}
        self.recorder.record("invoke", NEMESIS, f"stop-{fault.kind}", planned)
        self.active.pop(fault.number, None)
        plan = self.plans.pop(fault.number, None)
        skipped = executed.start.get("skipped") if isinstance(executed.start, dict) else None
        try:
            if plan is None:
                result: dict[str, Any] = {"skipped": "the fault was never planned"}
            elif skipped is not None:
                # Nothing of it is in place, and healing would undo another fault's: a kill
                # skipped because another kill has the broker down restarted it, cutting that
                # kill short; a skipped cancelling reassignment cancelled the one in progress.
                result = {"skipped": f"nothing to heal: its start was skipped ({skipped})"}
            else:
                result = await self.applier.heal(plan)
        except Exception as e:
            executed.error = self._failed(f"stop-{fault.kind}", planned, e)
        else:
            executed.stop = result = {**result, **(ended_early or {})}
            self.recorder.record("ok", NEMESIS, f"stop-{fault.kind}", result)
        executed.stopped_at = self._elapsed()
        self.schedule_log.changed()

    def _elapsed(self) -> float:
        """Seconds since the workload started, as a fault's planned start counts them."""
        return round(self.recorder.seconds() - self.began, 9)  # (a difference of floats: 0.49999999999999994)

    def _never_started(self, faults: list[Fault]) -> None:
        """Record the faults that were due but still waiting when the fault phase ended: each
        as a start that failed, saying why, so that neither the history nor schedule.json
        passes over them. (Those not yet due were never promised: a phase cut short by an
        interrupt says so in interrupted.json, and records nothing after it.)"""
        ended = self._elapsed()
        faults = [fault for fault in faults if fault.start <= ended]
        if not faults:
            return
        for fault in faults:
            why = (f"not started: the fault phase ended at {ended:.3f} s, before the fault driver, "
                   f"applying one fault at a time, reached this one (planned at {fault.start:g} s)")
            planned = _planned(fault)
            self.recorder.record("invoke", NEMESIS, f"start-{fault.kind}", planned)
            self.recorder.record("fail", NEMESIS, f"start-{fault.kind}", planned, error=why)
            self.schedule_log.record(fault).error = why
        log.debug("%d planned faults never started: the fault phase ended first", len(faults))
        self.schedule_log.changed()

    async def heal_all(self, each: bool = True) -> dict[str, Any]:
        """Heal every kind on every node; records one ``heal-all`` op with each kind's account.

        With ``each`` (the run's end, not the best effort after a failure), every fault still in
        force is first healed as its own stop would (:meth:`_end_in_force`)."""
        kinds = tuple(sorted(self.nemeses.kinds))
        loop = asyncio.get_running_loop()  # a best-effort heal-all after a failure runs on a new loop
        healing, self.healing = [t for t in self.healing if t.get_loop() is loop], []
        await asyncio.gather(*healing, return_exceptions=True)  # each records its own end
        if each:
            await self._end_in_force()
        self.recorder.record("invoke", NEMESIS, "heal-all", {"kinds": list(kinds)})
        healed: dict[str, Any]
        try:
            healed = dict(await self.applier.heal_all(kinds))
        except Exception as e:  # the applier reports per-kind errors; this is anything else
            healed = {"error": f"{type(e).__name__}: {e}"}
        errors = {kind: report["error"] for kind, report in healed.items()
                  if isinstance(report, dict) and "error" in report}
        if "error" in healed and isinstance(healed["error"], str):
            errors["all"] = healed["error"]
        self._ended_by_heal_all(errors)
        self.active.clear()
        self.plans.clear()
        if errors:
            self.errors.extend(f"heal-all {k}: {v}" for k, v in errors.items())
            log.error("heal-all failed: %s", errors)
            self.recorder.record("info", NEMESIS, "heal-all", healed, error=errors)
        else:
            self.recorder.record("ok", NEMESIS, "heal-all", healed)
        self.schedule_log.heal_all = healed
        self.schedule_log.save()
        return healed

    async def _end_in_force(self) -> None:
        """Heal each fault still in force (one planned to last past the time limit), in the
        order of its planned end, as its stop would have, marked as ended by the heal-all.

        What a fault did is read from its stop (a message rule's counts, a long pause's lost
        session, an upgrade's steps, a stall's strike): ended only by the heal-all, whose
        account is per kind, such a fault had none, and the run said a message fault that
        dropped hundreds of fetches, or a long pause that cost its broker the session, did
        not take effect ("ZooKeeper did not answer")."""
        for fault in sorted(self.active.values(), key=lambda f: (f.end, f.number)):
            await self.stop(fault, {"ended_by": "heal-all", "planned_end": fault.end})

    def _ended_by_heal_all(self, errors: dict[str, Any]) -> None:
        """Record, in schedule.json, when the heal-all ended each fault still in force (in
        force when the run failed or was interrupted: at the phase's end none is, see
        :meth:`_end_in_force`), and how: its stop never came, and without this its record
        said nothing of its end."""
        ended = self._elapsed()
        for fault in self.active.values():
            executed = self.schedule_log.record(fault)
            executed.stopped_at = ended
            executed.stop = {"ended_by": "heal-all", "planned_end": fault.end}
            failed = errors.get(fault.kind, errors.get("all"))
            if failed is not None and executed.error is None:
                executed.error = f"heal-all {fault.kind}: {failed}"

    def _failed(self, f: str, planned: dict[str, Any], error: Exception) -> str:
        message = f"{type(error).__name__}: {error}"
        log.error("%s failed: %s", f, message)
        self.errors.append(f"{f}: {message}")
        self.recorder.record("info", NEMESIS, f, planned, error=message)
        return message


def _planned(fault: Fault) -> dict[str, Any]:
    """What a ``start-<kind>`` invocation says of its fault: which, its shape, how long."""
    return {"fault": fault.number, "shape": fault.shape, "duration": fault.duration}
