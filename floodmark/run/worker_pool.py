"""Worker processes that outlast a worker's death: a process pool started anew when it breaks.

A worker process that dies outright (SIGKILL, the OOM killer, a segfault) breaks a
``ProcessPoolExecutor``: it fails every task it holds, running or waiting, with
BrokenProcessPool (it cannot tell whose worker died), terminates its other workers and takes
no more tasks. One OOM kill would so end a night's exploration of thousands of seeds.
:class:`WorkerPool` is such an executor that its user goes on submitting to after a break:
the tasks the broken executor held are lost (their futures say BrokenProcessPool, for the
user to report), and the next task is given to a new executor, whose workers are forked then.

A seed, a memory limit or the machine itself may kill every worker as soon as it starts;
restarting for ever would only turn each seed left into a lost one. So after
:data:`MAX_BROKEN_POOLS` executors in a row broke with no task handed back in between, the
pool gives up (:attr:`WorkerPool.gave_up`) and takes no more tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import BaseContext
from types import TracebackType
from typing import Any, TypeVar

from floodmark.backends.interrupts import signals_deferred

T = TypeVar("T")

# One break is an OOM kill or a stray signal; a second in a row may still be chance (the next
# seeds as large); a third with not one task handed back in between means workers die as
# fast as they start, and going on would only report every seed left unknown, a pool's
# worth at a time. Small, for each break costs the seeds its pool held.
MAX_BROKEN_POOLS = 3


class WorkerPool:
    """A ``ProcessPoolExecutor`` of ``workers`` processes, started on the first task and again
    on the first task after one broke, until :data:`MAX_BROKEN_POOLS` broke in a row.

    Its user tells it of a break by :meth:`broke`, with a future that failed with
    BrokenProcessPool; a break found as a task is submitted is dealt with there. Either way
    the broken executor is shut down and its workers waited for before the next one forks:
    then every future it held is done (what a dead worker left behind has an owner that is
    gone, for its user to remove), and no thread of it is left running across the fork."""

    def __init__(self, workers: int, context: BaseContext, initializer: Callable[..., object],
                 initargs: tuple[object, ...]) -> None:
        self.workers = workers
        self._context, self._initializer, self._initargs = context, initializer, initargs
        self._executor: ProcessPoolExecutor | None = None
        self._tasks: set[Future[Any]] = set()  # the live executor's, not yet seen done
        self._handed_back = False  # whether the live executor handed any task back
        self.broken_in_a_row = 0  # executors that broke, none handing a task back since the one before

    @property
    def gave_up(self) -> bool:
        """Whether it broke too often in a row to be started again."""
        return self.broken_in_a_row >= MAX_BROKEN_POOLS

    def submit(self, fn: Callable[..., T], /, *args: object) -> Future[T]:
        """Run ``fn(*args)`` in a worker; BrokenProcessPool if the pool gave up."""
        if self._executor is not None:
            try:
                return self._hold(self._executor.submit(fn, *args))
            except BrokenProcessPool:  # it broke since its last task was handed back
                self._retire()
        if self.gave_up:
            raise BrokenProcessPool(f"{self.broken_in_a_row} worker pools in a row broke, no task handed back")
        # The first task forks every worker (a forking executor starts them all at once).
        with signals_deferred():
            self._executor = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context,
                                                 initializer=self._initializer, initargs=self._initargs)
            return self._hold(self._executor.submit(fn, *args))

    def broke(self, future: Future[Any]) -> None:
        """``future`` failed with BrokenProcessPool: once this returns, the executor that held
        it is gone, its workers too, and every future it held is done. (Idempotent: the
        futures of one break each tell of it, and a break may have been found on a submit.)"""
        if future in self._tasks:
            self._retire()

    def _hold(self, future: Future[T]) -> Future[T]:
        # Those seen done are let go: a night's tasks and their results are not kept here.
        done = {task for task in self._tasks if task.done()}
        self._handed_back = self._handed_back or any(map(_handed_back, done))
        self._tasks -= done
        self._tasks.add(future)
        return future

    def _retire(self) -> None:
        """Shut the broken executor down, waiting for its workers (it terminates them), and
        count the break."""
        assert self._executor is not None
        self._executor.shutdown(wait=True)
        handed_back = self._handed_back or any(map(_handed_back, self._tasks))
        self.broken_in_a_row = 1 if handed_back else self.broken_in_a_row + 1
        self._executor, self._tasks, self._handed_back = None, set(), False

    def shutdown(self, cancel_futures: bool = False) -> None:
        """Shut the live executor down (if one is), waiting for its workers."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=cancel_futures)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.shutdown()


def _handed_back(task: Future[Any]) -> bool:
    """Whether a done task came back from its worker (with a result or the worker's own
    exception), not failed by its executor's break."""
    return not task.cancelled() and not isinstance(task.exception(), BrokenProcessPool)
