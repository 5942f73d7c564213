"""The worker pool an exploration runs its seeds in (``run.worker_pool``): a worker that dies
outright breaks the executor, and the next task goes to a new one; executors that keep
breaking with no task handed back make it give up.

Before: the exploration's ``ProcessPoolExecutor``, once broken, took no more tasks, and the
explorer started no seed after a worker died (one OOM kill ended a night's exploration).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pytest

from floodmark.run.worker_pool import MAX_BROKEN_POOLS, WorkerPool


def _no_setup() -> None:
    pass


def _die() -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return 0  # (never)


def _pid() -> int:
    return os.getpid()


def _pool(workers: int = 1) -> WorkerPool:
    return WorkerPool(workers, multiprocessing.get_context("fork"), _no_setup, ())


def _broken(future: Future[Any]) -> bool:
    return isinstance(future.exception(timeout=60), BrokenProcessPool)


def test_the_task_after_a_break_runs_in_a_new_pool() -> None:
    with _pool(2) as pool:
        first = pool.submit(_pid)
        old = first.result(timeout=60)
        died = pool.submit(_die)
        assert _broken(died)
        pool.broke(died)
        assert pool.broken_in_a_row == 1 and not pool.gave_up  # a task was handed back before the break
        assert pool.submit(_pid).result(timeout=60) != old  # another worker: the old ones are gone
    assert multiprocessing.active_children() == []


def test_a_break_found_on_submit_starts_a_new_pool_which_its_futures_then_leave_alone() -> None:
    """The explorer may submit to a pool that broke before it saw any of its futures fail:
    the task goes to a new pool, and the old futures' word of the break, when it comes, does
    not end the new one."""
    with _pool() as pool:
        died = pool.submit(_die)
        assert _broken(died)  # the pool broke; nobody said so to it
        later = pool.submit(_pid)
        pool.broke(died)
        assert isinstance(later.result(timeout=60), int)
        assert pool.broken_in_a_row == 1
    assert multiprocessing.active_children() == []


def test_it_gives_up_after_pools_in_a_row_break_with_no_task_handed_back() -> None:
    with _pool() as pool:
        for _ in range(MAX_BROKEN_POOLS):
            assert not pool.gave_up
            died = pool.submit(_die)
            assert _broken(died)
            pool.broke(died)
        assert pool.gave_up and pool.broken_in_a_row == MAX_BROKEN_POOLS
        with pytest.raises(BrokenProcessPool, match=f"{MAX_BROKEN_POOLS} worker pools in a row broke"):
            pool.submit(_pid)
    assert multiprocessing.active_children() == []


def test_a_task_handed_back_between_breaks_keeps_it_going() -> None:
    with _pool() as pool:
        for _ in range(3):
            for _ in range(MAX_BROKEN_POOLS - 1):
                died = pool.submit(_die)
                assert _broken(died)
                pool.broke(died)
            assert not pool.gave_up
            assert isinstance(pool.submit(_pid).result(timeout=60), int)
        died = pool.submit(_die)
        assert _broken(died)
        pool.broke(died)
        assert pool.broken_in_a_row == 1  # the task before it was handed back by the same pool
    assert multiprocessing.active_children() == []
