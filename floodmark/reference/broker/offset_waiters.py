"""Offset waiters: requests parked until a partition's watermark reaches an offset.

Two requests wait on a partition instead of polling it: an acks=all produce waits until the
high watermark covers its records (Kafka's produce purgatory), and a long-poll fetch waits
until the log end (follower) or the HW (consumer) moves past its fetch offset. Whoever moves
the watermark calls :meth:`OffsetWaiters.advance`, which wakes exactly the requests whose
offset is now reached, so an acknowledgement costs no timer ticks. A leadership change
calls :meth:`abort`: the waiting requests must re-check the partition's state.
"""

from __future__ import annotations

import asyncio
import contextlib


class OffsetWaiters:
    def __init__(self) -> None:
        self._waiting: list[tuple[int, asyncio.Future[bool]]] = []

    def __len__(self) -> int:
        return len(self._waiting)

    async def wait(self, offset: int, timeout: float) -> bool:
        """Wait until ``advance(v)`` with ``v >= offset``: True; False on timeout or abort."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        entry = (offset, future)
        self._waiting.append(entry)
        try:
            # The loop's clock is the runtime's (virtual under simulation).
            return await asyncio.wait_for(future, max(timeout, 0.0))
        except TimeoutError:
            return False
        finally:
            if not future.done():
                future.cancel()
            with contextlib.suppress(ValueError):
                self._waiting.remove(entry)

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
        self._future: asyncio.Future[None] | None = None

    async def wait(self, timeout: float) -> None:
        """Return at the next :meth:`notify`, or after ``timeout`` seconds."""
        if self._future is None or self._future.done():
            self._future = asyncio.get_running_loop().create_future()
        # Shielded: one waiter timing out must not cancel the future the others wait on.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._future), max(timeout, 0.0))

    def notify(self) -> None:
        future, self._future = self._future, None
        if future is not None and not future.done():
            future.set_result(None)
