"""An interrupt while the test's loop runs cancels the run's task, then interrupts."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from floodmark.backends.cleanup import interruptible
from floodmark.backends.interrupts import cancelled_on_interrupt, quiet_about_interrupts


def _run(done: list[str], *, insist: bool = False) -> None:
    """Run a task that sends this process SIGTERM (and, ``insist``ing, again as it cleans up);
    ``done`` gets what its cleanup did."""

    async def main() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(10)
        finally:
            done.append("cleaned up")  # the run's own finally runs, on the loop
            if insist:
                os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(0)
            done.append("after an await too")

    loop = asyncio.new_event_loop()
    quiet_about_interrupts(loop)
    try:
        task = loop.create_task(main())
        with interruptible(), cancelled_on_interrupt(task):
            loop.run_until_complete(task)
    finally:
        loop.close()


def test_the_first_interrupt_cancels_the_task_which_cleans_up_then_it_interrupts() -> None:
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt, match="signal 15"):
        _run(done)
    assert done == ["cleaned up", "after an await too"]  # the interrupt did not land inside it
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # given back


def test_a_second_interrupt_raises_at_once() -> None:
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        _run(done, insist=True)
    assert done == ["cleaned up"]


def test_a_process_that_does_not_interrupt_on_sigterm_keeps_its_choice() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        loop = asyncio.new_event_loop()
        task = loop.create_task(asyncio.sleep(0))
        with cancelled_on_interrupt(task):
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            loop.run_until_complete(task)
        loop.close()
    finally:
        signal.signal(signal.SIGTERM, previous)
