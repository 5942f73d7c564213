"""Op generation: client workers issuing ops at a bounded rate, under Jepsen's process rules.

The workload decides *what* each op is; this module decides *when* and *as whom*:

* **Concurrency.** ``concurrency`` workers run at once, each issuing one op at a time and
  waiting for its completion, like Jepsen's client threads.
* **Rate.** A limiter shared by all workers spaces invocations ``1/rate`` seconds apart
  overall, so the load does not depend on how fast the cluster answers. A worker whose
  slot falls more than :data:`LAST_SLOT_GRACE` past the workload's end waits no longer
  than that: at a rate of one op a minute over eight workers, the last would otherwise hold
  the run open for eight minutes after its end (and overrun a simulated run's budget).
* **Processes.** Each worker acts as a *process* (an integer in the history). When an op
  ends ``info`` the process may still be acting in the system (its request may land later),
  so it never issues another op: the worker closes its clients, opens new ones and carries on
  as a new process, numbered ``old + concurrency`` as in Jepsen. Worker ``w`` is thus always
  the processes ``w, w + concurrency, w + 2*concurrency, ...``.
* **Deadlines.** An op that does not complete within the worker's op timeout is abandoned:
  ``info`` (unknown) for ops that may have changed state, ``fail`` for reads, which cannot.

Workers draw their choices from their own seeded stream (see :mod:`floodmark.harness.seeds`),
so a run's op choices depend only on the seed and the worker number.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from floodmark.frozen_init import fast_frozen_init
from floodmark.harness.recorder import Recorder

log = logging.getLogger(__name__)

CompletionType = Literal["ok", "fail", "info"]


@fast_frozen_init
@dataclass(frozen=True)
class Invocation:
    """What a worker wants to do next: the op's ``f`` and its invoke value."""

    f: str
    value: Any
    node: str | None = None


@fast_frozen_init
@dataclass(frozen=True)
class Completion:
    """How an op ended, and its completion value."""

    type: CompletionType
    value: Any
    error: Any = None
    node: str | None = None


class Worker(Protocol):
    """One client worker of a workload: its choices, its clients, its memory.

    The worker keeps state across process changes (a consumer's remembered offsets); its
    *clients* belong to the current process and are replaced by :meth:`reopen`.
    """

    def next_op(self) -> Invocation: ...

    async def invoke(self, op: Invocation) -> Completion: ...

    def timeout_type(self, f: str) -> CompletionType:
        """How an op of kind ``f`` that timed out ends: "info" if it may have taken effect."""
        ...

    async def reopen(self) -> None:
        """Close this process's clients and open fresh ones for the next process."""
        ...

    async def close(self) -> None: ...


# How long past the workload's end a worker may still wait for its slot. Far more than a
# slot is ever late at a usable rate (eight workers at 200 ops/s: 40 ms), so what a run does
# at such rates is unchanged; it only bounds the wait of a rate of a few ops a minute.
LAST_SLOT_GRACE = 1.0


class RateLimiter:
    """Spaces acquisitions ``1/rate`` seconds apart across every caller."""

    def __init__(self, rate: float, clock: Callable[[], float] | None = None) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        self.interval = 1.0 / rate
        self._clock = clock  # None: the event loop's clock (virtual in the simulator)
        self._next: float | None = None

    async def acquire(self, latest: float | None = None) -> None:
        """Wait for the caller's slot, but not past ``latest`` (loop time; None: no bound)."""
        now = (self._clock or asyncio.get_running_loop().time)()
        # Never bank unused slots from an idle period: that would allow a burst.
        slot = now if self._next is None or self._next < now else self._next
        self._next = slot + self.interval
        if latest is not None and slot > latest:
            slot = latest
        # Always yield to the loop, even when the slot is due: a worker whose ops complete
        # without waiting would otherwise starve every other task (timers included).
        await asyncio.sleep(max(0.0, slot - now))


class OpDeadline:
    """``asyncio.timeout(delay)`` for the task ``task`` runs, as a plain context manager.

    The same steps as asyncio's, in the same order (one timer that cancels the task; on the
    way out the timer cancelled, and a cancellation that was the timer's own turned into
    ``TimeoutError``), so a simulated run is the same with either; but without asyncio's
    state machine, its two coroutines and its lookup of the current task: every op passes
    here.
    """

    __slots__ = ("_task", "_cancelling", "_handle", "_expired")

    def __init__(self, task: asyncio.Task[Any], delay: float) -> None:
        loop = task.get_loop()
        when = loop.time() + delay
        self._task = task
        self._expired = False
        self._cancelling = task.cancelling()
        self._handle = loop.call_soon(self._expire) if when <= loop.time() else loop.call_at(when, self._expire)

    def _expire(self) -> None:
        self._task.cancel()
        self._expired = True

    def __enter__(self) -> OpDeadline:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self._handle.cancel()
        if self._expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc


@dataclass
class ProcessNumbers:
    """Jepsen's numbering: worker ``w`` is processes w, w+n, w+2n, ... for n workers."""

    concurrency: int
    retired: int = 0

    def first(self, worker: int) -> int:
        return worker

    def next(self, process: int) -> int:
        self.retired += 1
        return process + self.concurrency


class Generator:
    """Runs the workers until stopped, recording every invocation and completion."""

    def __init__(
        self,
        recorder: Recorder,
        workers: list[Worker],
        rate: float,
        op_timeout: float,
        on_first_op: Callable[[], None] | None = None,
    ) -> None:
        self.recorder = recorder
        self.on_first_op = on_first_op
        self.workers = workers
        self.limiter = RateLimiter(rate)
        self.op_timeout = op_timeout
        self.numbers = ProcessNumbers(len(workers))
        self.processes = [self.numbers.first(w) for w in range(len(workers))]
        self._stop = asyncio.Event()
        self._latest_slot: float | None = None  # loop time no worker waits past (see LAST_SLOT_GRACE)
        self.first_op_at: float | None = None  # harness seconds of the first invocation

    def stop(self) -> None:
        """Workers finish the op they are in, then exit."""
        self._stop.set()

    @property
    def highest_process(self) -> int:
        return max(self.processes, default=-1)

    async def run(self, duration: float | None = None) -> None:
        """Run every worker until :meth:`stop` or until ``duration`` seconds have passed."""
        if duration is not None:
            self._latest_slot = asyncio.get_running_loop().time() + duration + LAST_SLOT_GRACE
        tasks = [asyncio.create_task(self._work(w), name=f"worker-{w}") for w in range(len(self.workers))]
        try:
            if duration is None:
                await self._stop.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), duration)
            self._stop.set()
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _work(self, worker_number: int) -> None:
        worker = self.workers[worker_number]
        task = asyncio.current_task()
        assert task is not None  # run() made one per worker
        try:
            while not self._stop.is_set():
                await self.limiter.acquire(self._latest_slot)
                if self._stop.is_set():
                    break
                completion = await self.step(worker_number, task)
                if completion.type == "info":
                    await self._retire(worker_number)
        finally:
            await _quietly(worker.close(), f"closing worker {worker_number}")

    async def step(self, worker_number: int, task: asyncio.Task[Any]) -> Completion:
        """Invoke one op as the worker's current process (``task`` runs it) and record both
        halves."""
        worker = self.workers[worker_number]
        process = self.processes[worker_number]
        op = worker.next_op()
        if self.first_op_at is None:
            self.first_op_at = self.recorder.seconds()
            if self.on_first_op is not None:
                self.on_first_op()
        self.recorder.record("invoke", process, op.f, op.value, node=op.node)
        try:
            # asyncio.timeout's effect, not wait_for: no extra task per op (the hot path).
            with OpDeadline(task, self.op_timeout):
                completion = await worker.invoke(op)
        except TimeoutError:
            completion = Completion(worker.timeout_type(op.f), op.value, error="timeout")
        except Exception as e:  # a bug or an unexpected client error: the outcome is unknown
            log.warning("worker %d: %s %r raised %r", worker_number, op.f, op.value, e)
            completion = Completion("info", op.value, error=f"{type(e).__name__}: {e}")
        self.recorder.record(
            completion.type, process, op.f, completion.value,
            node=completion.node or op.node, error=completion.error,
        )
        return completion

    async def _retire(self, worker_number: int) -> None:
        self.processes[worker_number] = self.numbers.next(self.processes[worker_number])
        await _quietly(self.workers[worker_number].reopen(), f"reopening worker {worker_number}")


async def _quietly(awaitable: Any, what: str) -> None:
    try:
        await awaitable
    except Exception as e:
        log.warning("%s failed: %r", what, e)
