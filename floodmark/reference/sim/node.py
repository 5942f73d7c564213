"""A simulated machine: whether it is up, paused or crashed, and the tasks it runs.

A node lives through *incarnations*: the death of its process (a kill or a power loss; see
``SimWorld``) ends one and cancels its tasks, a restart begins the next with the same disk,
wall clock and CPU. Each runtime handed out belongs to one incarnation, and every await it
performs passes the node's *gate*:

* on a crashed incarnation the gate cancels the caller, so a dead node's code stops at its
  next await, as a killed process would;
* on a paused node the gate holds the caller until the node resumes, as SIGSTOP or a long
  garbage-collection pause would: timers keep running (the monotonic clock advances), but
  nothing the node does, receives or answers makes progress.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from floodmark.reference.sim.clock import SimClock
from floodmark.reference.sim.cpu import SimCpu
from floodmark.reference.sim.disk import SimDisk


class SimNode:
    def __init__(self, name: str, disk: SimDisk, cpu: SimCpu | None = None) -> None:
        self.name = name
        self.disk = disk
        self.cpu = cpu  # None: handling messages takes no virtual time
        self.clock = SimClock()
        self.incarnation = 0
        self.alive = True
        self.paused = False
        self._resumed = asyncio.Event()
        self._resumed.set()
        # Insertion-ordered, so a crash cancels tasks in a deterministic order.
        self.tasks: dict[asyncio.Task[Any], None] = {}

    def is_current(self, incarnation: int) -> bool:
        return self.alive and self.incarnation == incarnation

    def can_act(self, incarnation: int) -> bool:
        """Up, not paused, and still the given incarnation."""
        return self.is_current(incarnation) and not self.paused

    async def gate(self, incarnation: int) -> None:
        """Pass only when the node runs this incarnation and is not paused."""
        while True:
            if not self.is_current(incarnation):
                raise asyncio.CancelledError(f"node {self.name} crashed")
            if not self.paused:
                return
            await self._resumed.wait()

    def pause(self) -> None:
        self.paused = True
        self._resumed.clear()

    def resume(self) -> None:
        self.paused = False
        self._resumed.set()

    def start_task(
        self, loop: asyncio.AbstractEventLoop, incarnation: int,
        coro: Coroutine[Any, Any, Any], name: str,
        on_done: Callable[[asyncio.Task[Any]], None] | None = None, *, gated: bool = True,
    ) -> asyncio.Task[Any]:
        """Run ``coro`` as one of this incarnation's tasks, once the gate lets it;
        ``on_done(task)`` runs when it has finished. ``gated=False``: ``coro`` passes the
        gate itself before it does anything (saves a wrapping coroutine on hot paths)."""

        async def gate_first() -> Any:
            await self.gate(incarnation)
            return await coro

        task = loop.create_task(gate_first() if gated else coro, name=f"{self.name}:{name}")
        current = self.is_current(incarnation)
        tasks = self.tasks

        def finished(done: asyncio.Task[Any]) -> None:
            # One callback for all the bookkeeping, not one each: every request handled is
            # a task, and each done callback is a turn of the loop's ready queue.
            # If the task ended before it started ``coro`` (a crash, a cancel), close ``coro``
            # so Python does not warn that it was never awaited; closing a finished one is
            # harmless.
            coro.close()
            if current:
                tasks.pop(done, None)
            if on_done is not None:
                on_done(done)

        task.add_done_callback(finished)
        if not current:
            task.cancel()
            return task
        tasks[task] = None
        return task

    def crash(self) -> int:
        """The process dies, ending this incarnation: cancel everything it runs and return
        how many tasks that was."""
        self.alive = False
        self.paused = False
        self._resumed.set()  # paused tasks wake up and meet the crashed gate
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if self.cpu is not None:
            self.cpu.process_died()
        return len(tasks)

    def restart(self) -> int:
        self.incarnation += 1
        self.alive = True
        self.paused = False
        self._resumed.set()
        return self.incarnation
