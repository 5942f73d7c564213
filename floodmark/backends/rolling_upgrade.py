"""Applying an upgrade (a double roll) to a cluster, one broker at a time, with evidence.

An upgrade plan (:class:`~floodmark.harness.faults.DoubleRoll`) lists restarts in order:
roll 1 at each broker's current version, roll 2 at ``kip-343``. Each *step* does what an
operator does for one broker:

1. set the broker's version for its next start (the node's command line on real nodes, its
   ``BrokerConfig`` in the simulator), so every later start, by this roll or by another
   fault's heal (a kill restarted), runs the new version: the upgrade sticks;
2. if another fault holds the broker (killed and not restarted yet, or paused), wait for it,
   at most :data:`HELD_WAIT` seconds. A broker that comes back meanwhile was started by that
   fault's heal, at the new version already, and is not restarted again; one still held
   after the wait is left alone (recorded as ``held``): it starts at the new version
   whenever it starts;
3. otherwise restart it cleanly: SIGTERM (a controlled shutdown moves its leaderships away
   first), then start;
4. wait, at most :data:`REGISTER_WAIT` seconds, until ZooKeeper holds a *new* registration
   of the broker (another incarnation than before the step) carrying the BrokerInfo version
   the new protocol writes (4 for legacy, 5 for kip-343, none for heartbeats). That
   registration, read from ZooKeeper, is the step's evidence (``seen``);
5. wait, at most :data:`ISR_WAIT` seconds, until the broker is back in the ISR of every
   partition assigned to it, as an operator waits for no under-replicated partitions before
   the next broker: restarting the next one earlier leaves partitions below
   min.insync.replicas, refusing acks=all writes for nothing. What was still missing is
   recorded (``out_of_isr``); the roll goes on either way.

The roll runs in the background, as a clock strobe does, so the run's other faults go on
meanwhile; healing the fault waits (at most :data:`FINISH_WAIT` seconds) for the roll to end
and returns every step's evidence. Nothing is undone: an upgrade is not rolled back. If the
roll must be abandoned, a broker it had stopped is started again, so heal-all leaves every
broker running, each at the version it was last set to.

The backends differ only in their hands (:class:`UpgradeHands`); timing comes from the
running loop, so in the simulator every wait is virtual time and the roll is deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from floodmark.harness.faults import DoubleRoll, Evidence
from floodmark.reference.protocol import inter_broker_protocol as ibp
from floodmark.reference.protocol.zk_layout import BrokerRegistration

HELD_WAIT = 15.0  # seconds a step waits for a broker another fault holds
REGISTER_WAIT = 30.0  # seconds a restarted broker gets to register again
ISR_WAIT = 20.0  # seconds a registered broker gets to rejoin its partitions' ISRs
FINISH_WAIT = 120.0  # seconds healing waits for the rest of a roll before abandoning it
POLL = 0.25


class UpgradeHands(Protocol):
    """What a backend does for an upgrade, per broker (by node name)."""

    def configure(self, node: str, version: str) -> None:
        """From its next start on, the broker speaks ``version``."""
        ...

    async def held(self, node: str) -> str | None:
        """Why the broker cannot be restarted now ("not running", "paused"), or None."""
        ...

    async def pid(self, node: str) -> int | None:
        ...

    async def restart(self, node: str) -> None:
        """A clean restart: SIGTERM (controlled shutdown), wait for the exit, start."""
        ...

    async def start_if_down(self, node: str) -> bool:
        """Start the broker if it is not running; whether it did."""
        ...

    async def registration(self, broker_id: int) -> BrokerRegistration | None:
        """The broker's registration in ZooKeeper now (None: absent or unreadable)."""
        ...

    async def out_of_isr(self, broker_id: int) -> list[tuple[str, int]]:
        """The partitions assigned to the broker whose ISR in ZooKeeper lacks it now."""
        ...


class RollingUpgrades:
    """The upgrades of one run: each plan's roll as a background task, and its evidence."""

    def __init__(self, hands: UpgradeHands) -> None:
        self.hands = hands
        self._rolls: dict[DoubleRoll, tuple[asyncio.Task[None], list[Evidence]]] = {}
        self._restarting: set[str] = set()  # brokers the roll stopped and has not started yet

    def start(self, plan: DoubleRoll) -> Evidence:
        steps: list[Evidence] = []
        task = asyncio.get_running_loop().create_task(self._roll(plan, steps), name="upgrade-roll")
        self._rolls[plan] = (task, steps)
        return {"rolling": len(plan.steps)}

    async def finish(self, plan: DoubleRoll) -> Evidence:
        """Wait for the roll to end (bounded) and return what each step did."""
        rolled = self._rolls.pop(plan, None)
        if rolled is None:
            return {"steps": [], "complete": False, "abandoned": "the roll was never started"}
        task, steps = rolled
        evidence: Evidence = {}
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), FINISH_WAIT)
        if not task.done():
            evidence["abandoned"] = await self._abandon(task)
        elif task.cancelled():
            evidence["error"] = "the roll was cancelled"
        elif task.exception() is not None:
            evidence["error"] = f"{type(task.exception()).__name__}: {task.exception()}"
        evidence["steps"] = list(steps)
        evidence["complete"] = len(steps) == len(plan.steps)
        return evidence

    async def finish_all(self) -> Evidence:
        """Heal-all: end every roll still running; each broker is left running."""
        return {"rolls": [await self.finish(plan) for plan in list(self._rolls)]}

    async def _abandon(self, task: asyncio.Task[None]) -> dict[str, bool]:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        started = {node: await self.hands.start_if_down(node) for node in sorted(self._restarting)}
        self._restarting.clear()
        return started

    async def _roll(self, plan: DoubleRoll, steps: list[Evidence]) -> None:
        for roll, node, broker_id, version in plan.steps:
            steps.append(await self._step(roll, node, broker_id, version))

    async def _step(self, roll: int, node: str, broker_id: int, version: str) -> Evidence:
        loop = asyncio.get_running_loop()
        began = loop.time()
        expected = ibp.features(version).registration_version
        step: Evidence = {"roll": roll, "node": node, "version": version, "expected_registration": expected}
        before = await self.hands.registration(broker_id)
        pid_before = await self.hands.pid(node)
        self.hands.configure(node, version)
        held = await self.hands.held(node)
        while held is not None and loop.time() - began < HELD_WAIT:
            await asyncio.sleep(POLL)
            held = await self.hands.held(node)
        if held is not None:
            step.update(held=held, seen=False)
            return step
        pid = await self.hands.pid(node)
        if pid == pid_before:
            self._restarting.add(node)
            await self.hands.restart(node)
            self._restarting.discard(node)
            step["restarted"] = {"pid_before": pid_before, "pid": await self.hands.pid(node)}
        else:  # started again meanwhile by another fault's heal, after the version was set
            step["started_by_another_fault"] = {"pid_before": pid_before, "pid": pid}
        registered = await self._registered_again(broker_id, before, expected)
        step["registration"] = None if registered is None else {
            "info_version": registered.info_version, "incarnation": registered.incarnation}
        step["seen"] = registered is not None and registered.info_version == expected
        if registered is not None:
            missing = await self._rejoined(broker_id)
            step["out_of_isr"] = [list(key) for key in missing]
        step["seconds"] = round(loop.time() - began, 3)
        return step

    async def _rejoined(self, broker_id: int) -> list[tuple[str, int]]:
        """Wait (bounded) until the broker is in every ISR it belongs in; what it still lacks."""
        deadline = asyncio.get_running_loop().time() + ISR_WAIT
        while True:
            missing = await self.hands.out_of_isr(broker_id)
            if not missing or asyncio.get_running_loop().time() >= deadline:
                return missing
            await asyncio.sleep(POLL)

    async def _registered_again(self, broker_id: int, before: BrokerRegistration | None,
                                expected: int | None) -> BrokerRegistration | None:
        """The broker's first registration since ``before`` with the expected version, or
        the last new one seen if none had it within :data:`REGISTER_WAIT` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REGISTER_WAIT
        newest: BrokerRegistration | None = None
        while True:
            now = await self.hands.registration(broker_id)
            if now is not None and (before is None or now.incarnation != before.incarnation):
                newest = now
                if now.info_version == expected:
                    return now
            if loop.time() >= deadline:
                return newest
            await asyncio.sleep(POLL)
