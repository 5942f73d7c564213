"""An interrupt while a backend runs the test's event loop: a cancellation, not an exception.

Ctrl-C raises KeyboardInterrupt wherever the interpreter happens to be, and so does SIGTERM
inside :func:`floodmark.backends.cleanup.interruptible`. Between two lines of the run that
is what teardown needs; inside an event loop it is not. Raised in the middle of a task's
step (halfway through writing ``schedule.json``, say), it leaves that task finished with
the interrupt as its exception and the loop's other tasks waiting on it; when teardown
cancels them they raise it again, and asyncio logs each as "Task exception was never
retrieved", traceback and all. So while a backend runs the run's main task,
:func:`cancelled_on_interrupt` turns the first interrupt into a cancellation of that task:
the run unwinds through its own ``finally`` blocks (clients stopped, faults left to the
heal), and KeyboardInterrupt is raised once the loop has returned, where the runner expects
it. A second interrupt raises at once, as before: whoever presses Ctrl-C twice wants out.
:func:`quiet_about_interrupts` keeps asyncio from logging an interrupt that a task held
anyway (the second one's), which the runner reports in its own words.

Only signals that would raise KeyboardInterrupt are taken over: a process that ignores
SIGINT, or never asked for SIGTERM to interrupt it, keeps what it chose.

Outside the loop, a step that an interrupt must not cut in two runs under
:func:`signals_deferred` (the interrupt lands when the step is done: forking workers, making
a run directory and keeping hold of it, writing a claim), and a cleanup that a second
interrupt must not cut short under :func:`interrupts_held`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """The handler that makes a signal interrupt like Ctrl-C (see ``cleanup.interruptible``)."""
    raise KeyboardInterrupt(f"signal {signum}")


def _interrupts(handler: object) -> bool:
    return handler is signal.default_int_handler or handler is raise_interrupt


@contextlib.contextmanager
def cancelled_on_interrupt(task: asyncio.Future[Any]) -> Iterator[None]:
    """Within the block (the loop running ``task``), the first SIGINT or SIGTERM that would
    raise KeyboardInterrupt cancels ``task`` instead; leaving the block after one raises
    KeyboardInterrupt, however the task ended."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread; nothing to take over
        return
    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if received:
            raise KeyboardInterrupt(f"signal {signum}")
        received.append(signum)
        task.get_loop().call_soon_threadsafe(task.cancel)

    taken = [s for s in (signal.SIGINT, signal.SIGTERM) if _interrupts(signal.getsignal(s))]
    previous = {s: signal.signal(s, on_signal) for s in taken}
    try:
        yield
    except BaseException:
        if received:
            raise KeyboardInterrupt(f"signal {received[0]}") from None
        raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:  # the task ended on its own despite the cancellation: the run was still interrupted
        raise KeyboardInterrupt(f"signal {received[0]}")


def quiet_about_interrupts(loop: asyncio.AbstractEventLoop) -> None:
    """Have ``loop`` not log a task or callback that ended with KeyboardInterrupt."""
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), KeyboardInterrupt):
            return  # an interrupt: the runner says "interrupted", and that is all
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)


@contextlib.contextmanager
def interrupts_held() -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM do not interrupt: each is noted (the list
    yielded) and the block runs to its end. For the cleanup after a first interrupt, which
    a second must not cut in half. Outside the main thread (where no signal lands) it
    changes nothing."""
    with _noted((signal.SIGINT, signal.SIGTERM)) as held:
        yield held


@contextlib.contextmanager
def interrupts_noted() -> Iterator[list[int]]:
    """Within the block, a SIGINT or SIGTERM that would raise KeyboardInterrupt is noted
    instead (the list yielded), for the block to raise where that is safe: between two waits
    on a process pool, not inside one, where it can land while the wait's lock is released
    and not yet taken back, and leave as "RuntimeError: release unlocked lock". A signal the
    process ignores stays ignored."""
    with _noted(tuple(s for s in (signal.SIGINT, signal.SIGTERM) if _interrupts(signal.getsignal(s)))) as noted:
        yield noted


@contextlib.contextmanager
def _noted(signals: tuple[int, ...]) -> Iterator[list[int]]:
    """Within the block, each of ``signals`` is appended to the list yielded, and does
    nothing else; outside the main thread (where no signal lands) nothing changes."""
    noted: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)

    previous = {s: signal.signal(s, note) for s in signals}
    try:
        yield noted
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM wait: each is noted (:func:`interrupts_held`)
    and delivered again, to the handler the block found, when it ends. For steps an
    interrupt must not cut in two: forking workers (an interrupt landing between a fork and
    the worker's own signal set-up runs inside Python's at-fork hooks, which print the
    exception and drop it: the explorer lost the Ctrl-C and ran on, the new worker printed a
    traceback or died and broke the pool), making a run directory and keeping hold of it,
    writing a claim. Noted by a handler, not blocked: a process-directed signal blocked in
    the main thread lands in any other thread that does not block it."""
    try:
        with interrupts_held() as held:
            yield
    finally:  # (after an error too: a Ctrl-C is never lost)
        for signum in dict.fromkeys(held):  # each once, in the order they came
            signal.raise_signal(signum)
