"""Offset waiters: requests parked until a partition's watermark reaches an offset.

Two requests wait on a partition instead of polling it: an acks=all produce waits until the
high watermark covers its records (Kafka's produce purgatory), and a long-poll fetch waits
until the log end (follower) or the HW (consumer) moves past its fetch offset. Whoever moves
the watermark calls :meth:`OffsetWaiters.advance`, which wakes exactly the requests whose
offset is now reached, so an acknowledgement costs no timer ticks. A leadership change
calls :meth:`abort`: the waiting requests must re-check the partition's state.

A wait is a future and one timer on it, not ``asyncio.wait_for`` (and, for the change
signal, not ``asyncio.shield``): every fetch and every acks=all produce waits here, and
those wrappers cost extra futures and turns of the event loop on each.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

T = TypeVar("T")


class OffsetWaiters:
    def __init__(self) -> None:
        self._waiting: list[tuple[int, asyncio.Future[bool]]] = []

    def __len__(self) -> int:
        return len(self._waiting)

    async def wait(self, offset: int, timeout: float) -> bool:
        """Wait until ``advance(v)`` with ``v >= offset``: True; False on timeout or abort."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        entry = (offset, future)
        self._waiting.append(entry)
        # The loop's clock is the runtime's (virtual under simulation).
        timer = loop.call_later(max(timeout, 0.0), _settle, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            if not future.done():
                future.cancel()
            # Not contextlib.suppress: every fetch and produce waits, and its context manager
            # cost three calls more per wait than this.
            try:  # noqa: SIM105
                self._waiting.remove(entry)
            except ValueError:
                pass

    def advance(self, value: int) -> None:
        """The watermark is now ``value``: wake everyone waiting for an offset <= value."""
        for offset, future in self._waiting:
            if offset <= value and not future.done():
                future.set_result(True)

    def abort(self) -> None:
        """Wake everyone with False (leadership changed, replica stopped)."""
        for _, future in self._waiting:
            if not future.done():
                future.set_result(False)


class ChangeSignal:
    """Wakes every waiter at the next change of anything (say, any partition's log end).

    A follower's fetch covers many partitions; while none of them has news it waits here
    and then looks at all of them again.
    """

    def __init__(self) -> None:
        self._waiting: list[asyncio.Future[None]] = []  # one future per waiter

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def wait(self, timeout: float) -> None:
        """Return at the next :meth:`notify`, or after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append(future)
        timer = loop.call_later(max(timeout, 0.0), _settle, future, None)
        try:
            await future
        finally:
            timer.cancel()
            if not future.done():
                future.cancel()
            try:  # noqa: SIM105 (as in OffsetWaiters.wait)
                self._waiting.remove(future)
            except ValueError:  # gone already if a notify woke it
                pass

    def notify(self) -> None:
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():
                future.set_result(None)


def _settle(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)
