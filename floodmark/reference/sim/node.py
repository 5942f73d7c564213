"""A simulated machine: whether it is up, paused or crashed, and the tasks it runs.

A node lives through *incarnations*: the death of its process (a kill or a power loss; see
``SimWorld``) ends one and cancels its tasks, a restart begins the next with the same disk,
wall clock and CPU. Each runtime handed out belongs to one incarnation, and every await it
performs passes the node's *gate*:

* on a crashed incarnation the gate cancels the caller, so a dead node's code stops at its
  next await, as a killed process would;
* on a paused node the gate holds the caller until the node resumes, as SIGSTOP or a long
  garbage-collection pause would: timers keep running (the monotonic clock advances), but
  nothing the node does, receives or answers makes progress;
* a *stalled task* (:class:`TaskStall`: one thread of the process, such as the controller's
  event thread, stuck while the rest of the process runs on) is held at its gates from the
  moment the stall *strikes* until it is released. It strikes at the task's next *safepoint*
  (``Runtime.safepoint``, a gate with ``safepoint=True``): a point the protocol code marks
  where a stopped thread does harm, as the JVM stops threads for a collection at safepoints
  (KAFKA-6082: the controller's event thread stopped between deciding partition states and
  writing them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from floodmark.reference.sim.clock import SimClock
from floodmark.reference.sim.cpu import SimCpu
from floodmark.reference.sim.disk import SimDisk


class TaskStall:
    """One task of a node stalled: armed until it strikes, then holding until released.

    Its counters are the evidence that it took effect: when it struck and how many times the
    task was held (each a gate the task could not pass)."""

    def __init__(self, task_name: str, armed_at: float, on_strike: Callable[[], None] | None = None) -> None:
        self.task_name = task_name
        self.armed_at = armed_at
        self.struck_at: float | None = None
        self.holds = 0
        self.released = asyncio.Event()
        self._on_strike = on_strike

    def strike(self, now: float) -> None:
        self.struck_at = now
        if self._on_strike is not None:
            self._on_strike()


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
        self.stalls: dict[str, TaskStall] = {}  # task name -> its stall (armed or holding)

    def is_current(self, incarnation: int) -> bool:
        return self.alive and self.incarnation == incarnation

    def can_act(self, incarnation: int) -> bool:
        """Up, not paused, and still the given incarnation."""
        return self.is_current(incarnation) and not self.paused

    async def gate(self, incarnation: int, *, safepoint: bool = False) -> None:
        """Pass only when the node runs this incarnation, is not paused and the calling task
        is not stalled. ``safepoint``: the caller is at a safepoint, where a stall strikes."""
        while True:
            if not self.is_current(incarnation):
                raise asyncio.CancelledError(f"node {self.name} crashed")
            if self.paused:
                await self._resumed.wait()
                continue
            if not self.stalls:
                return
            stall = self._stall_of_current_task(safepoint)
            if stall is None:
                return
            stall.holds += 1
            await stall.released.wait()

    def _stall_of_current_task(self, safepoint: bool) -> TaskStall | None:
        """The stall holding the calling task now, striking an armed one at a safepoint."""
        task = asyncio.current_task()
        stall = self.stalls.get(task.get_name()) if task is not None else None
        if stall is None or stall.released.is_set():
            return None
        if stall.struck_at is None:
            if not safepoint:
                return None
            stall.strike(asyncio.get_running_loop().time())
        return stall

    def stall(self, task_name: str, now: float, on_strike: Callable[[], None] | None = None) -> TaskStall:
        """Arm a stall of the task named ``task_name`` (replacing one in force)."""
        stall = TaskStall(task_name, now, on_strike)
        previous = self.stalls.get(task_name)
        if previous is not None:
            previous.released.set()
        self.stalls[task_name] = stall
        return stall

    def release(self, stall: TaskStall) -> None:
        """End the stall: the task passes its gate again."""
        stall.released.set()
        if self.stalls.get(stall.task_name) is stall:
            del self.stalls[stall.task_name]

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

        task = loop.create_task(self._gate_first(incarnation, coro) if gated else coro, name=f"{self.name}:{name}")
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

    async def _gate_first(self, incarnation: int, coro: Coroutine[Any, Any, Any]) -> Any:
        await self.gate(incarnation)
        return await coro

    def crash(self) -> int:
        """The process dies, ending this incarnation: cancel everything it runs and return
        how many tasks that was."""
        self.alive = False
        self.paused = False
        self._resumed.set()  # paused tasks wake up and meet the crashed gate
        for stall in list(self.stalls.values()):  # a stall dies with its thread
            self.release(stall)
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        self.tasks.clear()  # all cancelled; a task cancelled before it started cannot forget itself
        if self.cpu is not None:
            self.cpu.process_died()
        return len(tasks)

    def restart(self) -> int:
        self.incarnation += 1
        self.alive = True
        self.paused = False
        self._resumed.set()
        return self.incarnation
