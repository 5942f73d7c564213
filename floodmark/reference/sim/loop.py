"""Virtual time: an asyncio event loop whose clock only moves when nothing else can happen.

An ordinary asyncio loop waits in its selector until the next timer is due. This loop never
waits: when no callback is ready it moves the virtual clock forward to the next timer
instead of sleeping. ``loop.time()`` is that virtual clock. So a simulated six-second
ZooKeeper session timeout passes in microseconds of real time.

The loop promises an order, so the same program with the same seed runs the same way every
time: ready callbacks run first in, first out; timers run by time, and timers due at the
same time in the order they were set (each carries a sequence number). When no callback is
ready and no timer is pending, nothing can ever happen again: the loop raises
:class:`SimulationDeadlock` rather than hang.

A simulated run turns the loop hundreds of thousands of times a minute, so the loop keeps
its own timers and its own turn instead of asyncio's: timers sit in a heap of
``(when, sequence, handle)`` tuples, compared in C, and a turn polls the real file
descriptors (the loop's wake-up pipe, and whatever a test registers) only when it must: when
something besides the wake-up pipe is registered, every :data:`WAKEUP_POLL_INTERVAL` moves
of the clock (so a signal's wake-up byte is read promptly), and before declaring a deadlock.
A callback another thread adds (``call_soon_threadsafe``) goes straight into the ready queue
and needs no poll.

Most timers of a run are the simulator's own plumbing (a message's arrival, the end of a CPU
job): never cancelled, and nothing reads their handle. :meth:`VirtualTimeLoop.plain_call_at`
sets such a timer as a bare ``(callback, args)`` pair, in the same heap and sequence as
every other timer (so the order of what runs is the same), without building a handle and
copying the context for it; it runs in the loop's context, which no part of the simulator
can tell apart (none uses context variables). The wake-ups and done callbacks that asyncio's
C tasks and futures queue with ``call_soon`` (a hundred thousand a simulated minute) take the
same form, ``(context.run, (callback, *args))``: they pass their context and drop the handle,
so none is built for them.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import heapq
import itertools
import selectors
from asyncio import events
from collections.abc import Callable
from typing import Any, TypeVarTuple

_Ts = TypeVarTuple("_Ts")
# A plain timer's entry (see plain_call_at): what to call and its arguments.
_Plain = tuple[Callable[..., object], tuple[Any, ...]]

WAKEUP_POLL_INTERVAL = 64  # clock moves between polls of the wake-up pipe alone
_CLEANUP_MINIMUM = 100  # cancelled timers before the heap is worth rebuilding


class SimulationDeadlock(RuntimeError):
    """The simulation is waiting for something that no timer or task will ever provide."""


class VirtualClock:
    """Seconds of simulated time since the simulation began."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0.0  # only the loop moves it, and only forward


class VirtualTimeSelector(selectors.BaseSelector):
    """A selector that never blocks: the loop moves the virtual clock instead of waiting."""

    def __init__(self) -> None:
        self._real = selectors.DefaultSelector()
        self.registered = 0  # file objects registered, counted here: the loop asks every turn

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = self._real.register(fileobj, events, data)
        self.registered += 1
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        key = self._real.unregister(fileobj)
        self.registered -= 1
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        return self._real.select(0)

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()


class _Timer(events.TimerHandle):
    """asyncio's timer handle, set up without the debug bookkeeping (checked by the caller)."""

    __slots__ = ()
    # asyncio's own slots, which typeshed does not declare.
    _scheduled: bool
    _cancelled: bool
    _callback: Callable[..., object]
    _args: tuple[Any, ...]
    _context: contextvars.Context

    def __init__(self, when: float, callback: Callable[..., object], args: tuple[Any, ...],
                 loop: VirtualTimeLoop, context: contextvars.Context | None) -> None:
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._loop = loop
        self._source_traceback = None
        self._repr = None
        self._context = context if context is not None else contextvars.copy_context()
        self._when = when
        self._scheduled = True

    def cancel(self) -> None:
        # TimerHandle.cancel without its two extra calls (a request's timeout, a long poll's
        # wait: most timers are cancelled).
        if not self._cancelled:
            self._cancelled = True
            if self._scheduled:
                self._loop._cancelled_timers += 1  # type: ignore[attr-defined]
            self._callback = None  # type: ignore[assignment]
            self._args = None  # type: ignore[assignment]


class _Ready(events.Handle):
    """asyncio's handle for a ready callback, set up without the debug bookkeeping."""

    __slots__ = ()
    _cancelled: bool
    _callback: Callable[..., object]
    _args: tuple[Any, ...]
    _context: contextvars.Context

    def __init__(self, callback: Callable[..., object], args: tuple[Any, ...],
                 loop: VirtualTimeLoop, context: contextvars.Context | None) -> None:
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._loop = loop
        self._source_traceback = None
        self._repr = None
        self._context = context if context is not None else contextvars.copy_context()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop running on a :class:`VirtualClock`."""

    # asyncio.BaseEventLoop's own state and helpers, which typeshed does not declare.
    _ready: collections.deque[_Ready | _Timer | _Plain]
    _stopping: bool
    _closed: bool
    _debug: bool
    _task_factory: Any
    _process_events: Callable[[list[tuple[selectors.SelectorKey, int]]], None]
    _check_thread: Callable[[], None]
    _check_callback: Callable[[Callable[..., object], str], None]

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self._timers: list[tuple[float, int, _Timer | _Plain]] = []
        self._timer_sequence = itertools.count()
        self._cancelled_timers = 0
        self._moves_until_poll = WAKEUP_POLL_INTERVAL
        self._virtual_selector = VirtualTimeSelector()
        super().__init__(self._virtual_selector)
        self._wakeup_only = self._virtual_selector.registered  # the wake-up pipe
        # create_future, as a C callable: every request and wait makes a future (some 1,000
        # a simulated second), and asyncio's is a Python method that only makes this call.
        self.create_future = functools.partial(asyncio.Future, loop=self)  # type: ignore[method-assign]

    def time(self) -> float:
        return self.clock.now

    # ------------------------------------------------------------------ futures

    def set_debug(self, enabled: bool) -> None:
        super().set_debug(enabled)
        # asyncio's C futures and tasks ask their loop get_debug() as each is made (some
        # 1,600 a simulated second); a C callable answers without a Python frame. Set again
        # on every change, so it always says what asyncio's own get_debug would.
        self.get_debug = bool(self._debug).__bool__  # type: ignore[method-assign]

    # ------------------------------------------------------------------ scheduling

    def call_soon(self, callback: Callable[[*_Ts], object], *args: *_Ts,  # type: ignore[override]
                  context: contextvars.Context | None = None) -> events.Handle | None:
        """As asyncio's, except that a call with an explicit ``context`` returns no handle
        (None): it queues a plain entry that runs ``callback`` in that context. Only asyncio's
        own C futures and tasks pass a context, for every wake-up and done callback, and they
        drop the handle; everything else gets a cancellable handle as usual."""
        if self._debug:
            return super().call_soon(callback, *args, context=context)
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if context is not None:
            self._ready.append((context.run, (callback, *args)))
            return None
        handle = _Ready(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def create_task(self, coro: Any, *, name: str | None = None,  # type: ignore[override]
                    context: contextvars.Context | None = None) -> asyncio.Task[Any]:
        """As asyncio's, without its checks for debug mode and a task factory when neither
        applies: a simulated run starts a task for every request a node handles."""
        if self._debug or self._task_factory is not None:
            return super().create_task(coro, name=name, context=context)
        if self._closed:
            raise RuntimeError("Event loop is closed")
        return asyncio.Task(coro, loop=self, name=name, context=context)

    def call_later(self, delay: float, callback: Callable[[*_Ts], object], *args: *_Ts,
                   context: contextvars.Context | None = None) -> events.TimerHandle:
        if delay is None:
            raise TypeError("delay must not be None")
        if self._debug or self._closed:
            return self.call_at(self.clock.now + delay, callback, *args, context=context)
        # call_at's own steps, without its call: every sleep and wait sets one.
        when = self.clock.now + delay
        timer = _Timer(when, callback, args, self, context)
        heapq.heappush(self._timers, (when, next(self._timer_sequence), timer))
        return timer

    def call_at(self, when: float, callback: Callable[[*_Ts], object], *args: *_Ts,
                context: contextvars.Context | None = None) -> events.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._debug:
            self._check_thread()
            self._check_callback(callback, "call_at")
        timer = _Timer(when, callback, args, self, context)
        heapq.heappush(self._timers, (when, next(self._timer_sequence), timer))
        return timer

    def plain_call_at(self, when: float, callback: Callable[[*_Ts], object], *args: *_Ts) -> None:
        """Run ``callback(*args)`` at ``when``, in order with every other timer, like
        ``call_at``; but the timer cannot be cancelled, there is no handle, and it runs in the
        loop's context, not a copy of the caller's. For the simulator's own plumbing."""
        if self._closed:
            raise RuntimeError("Event loop is closed")
        heapq.heappush(self._timers, (when, next(self._timer_sequence), (callback, args)))

    def _timer_handle_cancelled(self, handle: _Timer) -> None:
        if handle._scheduled:
            self._cancelled_timers += 1

    def pending_timers(self) -> int:
        """Timers set and neither run nor cancelled."""
        return len(self._timers) - self._cancelled_timers

    # ------------------------------------------------------------------ one turn

    def _run_once(self) -> None:
        """Turn the loop until it is asked to stop (``run_forever`` calls this once per
        turn and checks ``_stopping`` after it: turning here saves a call per turn)."""
        ready = self._ready
        timers = self._timers
        clock = self.clock
        heappop = heapq.heappop
        popleft = ready.popleft
        selector = self._virtual_selector
        wakeup_only = self._wakeup_only
        while True:
            if self._cancelled_timers > _CLEANUP_MINIMUM and 2 * self._cancelled_timers > len(timers):
                self._drop_cancelled_timers()
            if not ready and not self._stopping:
                # _advance's common case inline (it runs every turn): the next timer is live,
                # no poll is due and nothing but the wake-up pipe is registered.
                head = timers[0] if timers else None
                if (head is not None and self._moves_until_poll > 1 and selector.registered == wakeup_only
                        and (head[2].__class__ is tuple or not head[2]._cancelled)):  # type: ignore[union-attr]
                    self._moves_until_poll -= 1
                    if head[0] > clock.now:
                        clock.now = head[0]
                else:
                    self._advance()
            now = clock.now
            while timers and timers[0][0] <= now:
                timer = heappop(timers)[2]
                if isinstance(timer, tuple):  # a plain timer: never cancelled
                    ready.append(timer)
                    continue
                timer._scheduled = False
                if timer._cancelled:
                    self._cancelled_timers -= 1
                else:
                    ready.append(timer)
            # Only what is ready now: callbacks these add run on the next turn, as in asyncio.
            for _ in range(len(ready)):
                handle = popleft()
                if isinstance(handle, tuple):
                    try:
                        handle[0](*handle[1])
                    except (SystemExit, KeyboardInterrupt):
                        raise
                    except BaseException as exc:
                        self._plain_entry_failed(handle, exc)
                    continue
                if handle._cancelled:
                    continue
                try:  # Handle._run, without its frame
                    handle._context.run(handle._callback, *handle._args)
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    self._callback_failed(handle, exc)
            if self._stopping:
                return

    def _callback_failed(self, handle: _Ready | _Timer, exc: BaseException) -> None:
        """What ``Handle._run`` does when a callback raises: hand it to the exception handler."""
        self.call_exception_handler({
            "message": f"Exception in callback {handle._callback!r}",
            "exception": exc,
            "handle": handle,
        })

    def _plain_entry_failed(self, entry: _Plain, exc: BaseException) -> None:
        callback, args = entry
        if isinstance(getattr(callback, "__self__", None), contextvars.Context) and args:
            callback = args[0]  # a callback queued with its context (see call_soon): name it
        self.call_exception_handler({"message": f"Exception in callback {callback!r}", "exception": exc})

    def _advance(self) -> None:
        """Nothing is ready: poll the real descriptors if due, else move the clock to the
        next timer; raise SimulationDeadlock if there is none."""
        timers = self._timers
        while timers and _cancelled(timers[0][2]):
            heapq.heappop(timers)[2]._scheduled = False  # type: ignore[union-attr]
            self._cancelled_timers -= 1
        self._moves_until_poll -= 1
        if (self._moves_until_poll <= 0 or not timers
                or self._virtual_selector.registered > self._wakeup_only):
            self._moves_until_poll = WAKEUP_POLL_INTERVAL
            self._process_events(self._virtual_selector.select(0))
            if self._ready:
                return
        if not timers:
            raise SimulationDeadlock(
                "no task can make progress and no timer is pending "
                "(a coroutine awaits something nothing will ever deliver)"
            )
        when = timers[0][0]
        if when > self.clock.now:
            self.clock.now = when

    def _drop_cancelled_timers(self) -> None:
        live = []
        for entry in self._timers:
            timer = entry[2]
            # _cancelled(timer), inline: this looks at every timer of the heap.
            if timer.__class__ is not tuple and timer._cancelled:  # type: ignore[union-attr]
                timer._scheduled = False  # type: ignore[union-attr]
            else:
                live.append(entry)
        heapq.heapify(live)
        self._timers[:] = live  # in place: callers hold the list
        self._cancelled_timers = 0

    def close(self) -> None:
        super().close()
        for _, _, timer in self._timers:
            if not isinstance(timer, tuple):
                timer._scheduled = False
        self._timers.clear()
        self._cancelled_timers = 0


def _cancelled(timer: _Timer | _Plain) -> bool:
    return not isinstance(timer, tuple) and timer._cancelled
