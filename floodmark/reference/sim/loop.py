"""Virtual time: an asyncio event loop whose clock only moves when nothing else can happen.

An ordinary asyncio loop waits in its selector until the next timer is due. This loop's
selector never waits: when the loop would wait, it polls the real file descriptors without
blocking (only the loop's own wake-up pipe is registered) and, when nothing is ready, moves
the virtual clock forward to the next timer instead of sleeping. ``loop.time()`` is that virtual clock. So a simulated
six-second ZooKeeper session timeout passes in microseconds of real time, and since asyncio
runs ready callbacks in FIFO order and timers in (time, insertion) order, the same program
with the same seed runs the same way every time.

When no callback is ready and no timer is pending, nothing can ever happen again: the loop
raises :class:`SimulationDeadlock` rather than hang.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any


class SimulationDeadlock(RuntimeError):
    """The simulation is waiting for something that no timer or task will ever provide."""


class VirtualClock:
    """Seconds of simulated time since the simulation began."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self.now += seconds


class VirtualTimeSelector(selectors.BaseSelector):
    """A selector that polls without blocking and advances the virtual clock instead."""

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout == 0:
            # Callbacks are ready: run them first. The real descriptors (only the loop's
            # wake-up pipe) can wait until the loop would otherwise move the clock; a
            # callback another thread adds is in the ready queue already. One system call
            # less per loop iteration.
            return []
        ready = self._real.select(0)
        if ready:
            return ready
        if timeout is None:
            raise SimulationDeadlock(
                "no task can make progress and no timer is pending "
                "(a coroutine awaits something nothing will ever deliver)"
            )
        self._clock.advance(timeout)
        return []

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop running on a :class:`VirtualClock`."""

    def __init__(self) -> None:
        self.clock = VirtualClock()
        super().__init__(VirtualTimeSelector(self.clock))

    def time(self) -> float:
        return self.clock.now
