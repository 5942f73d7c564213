"""Tests of the virtual-time event loop (floodmark.reference.sim.loop)."""

from __future__ import annotations

import asyncio
import time

import pytest

from floodmark.reference.sim.loop import SimulationDeadlock, VirtualTimeLoop


@pytest.fixture
def loop():
    loop = VirtualTimeLoop()
    yield loop
    loop.close()


def test_virtual_time_advances_without_real_waiting(loop: VirtualTimeLoop) -> None:
    async def sleeper() -> float:
        start = loop.time()
        await asyncio.sleep(3600)
        return loop.time() - start

    real_start = time.monotonic()
    elapsed = loop.run_until_complete(sleeper())
    assert elapsed == pytest.approx(3600)
    assert time.monotonic() - real_start < 1.0


def test_timers_fire_in_time_order_at_their_virtual_time(loop: VirtualTimeLoop) -> None:
    fired: list[tuple[str, float]] = []
    for name, delay in [("c", 3.0), ("a", 1.0), ("b", 2.0), ("d", 0.0)]:
        loop.call_later(delay, lambda n=name: fired.append((n, loop.time())))
    loop.run_until_complete(asyncio.sleep(5))
    assert [n for n, _ in fired] == ["d", "a", "b", "c"]
    assert [t for _, t in fired] == pytest.approx([0.0, 1.0, 2.0, 3.0])


def test_wait_for_times_out_in_virtual_time(loop: VirtualTimeLoop) -> None:
    async def slow() -> None:
        await asyncio.wait_for(asyncio.sleep(100), timeout=2.5)

    with pytest.raises(TimeoutError):
        loop.run_until_complete(slow())
    assert loop.time() == pytest.approx(2.5)


def test_waiting_forever_is_reported_as_a_deadlock(loop: VirtualTimeLoop) -> None:
    with pytest.raises(SimulationDeadlock):
        loop.run_until_complete(loop.create_future())
    # The loop stays usable after reporting the deadlock.
    assert loop.run_until_complete(asyncio.sleep(1, result="still alive")) == "still alive"


def test_call_soon_threadsafe_wakes_the_loop(loop: VirtualTimeLoop) -> None:
    import threading

    async def wait_for_thread() -> str:
        future: asyncio.Future[str] = loop.create_future()
        threading.Thread(target=lambda: loop.call_soon_threadsafe(future.set_result, "from thread")).start()
        # A timer keeps the loop from declaring a deadlock while the thread runs.
        while not future.done():
            await asyncio.sleep(0.001)
        return future.result()

    assert loop.run_until_complete(wait_for_thread()) == "from thread"


def test_timers_due_at_the_same_time_run_in_the_order_they_were_set(loop: VirtualTimeLoop) -> None:
    fired: list[int] = []
    # Interleave two due times so the heap's shape differs from the insertion order.
    for n in range(40):
        loop.call_at(2.0 if n % 3 else 1.0, fired.append, n)
    loop.run_until_complete(asyncio.sleep(3))
    assert fired == [n for n in range(40) if n % 3 == 0] + [n for n in range(40) if n % 3]


def test_ready_callbacks_run_first_in_first_out_before_the_clock_moves(loop: VirtualTimeLoop) -> None:
    order: list[tuple[str, float]] = []

    def first() -> None:
        order.append(("first", loop.time()))
        loop.call_soon(lambda: order.append(("added by first", loop.time())))

    loop.call_later(0.5, lambda: order.append(("timer", loop.time())))
    loop.call_soon(first)
    loop.call_soon(lambda: order.append(("second", loop.time())))
    loop.run_until_complete(asyncio.sleep(1))
    assert order == [("first", 0.0), ("second", 0.0), ("added by first", 0.0), ("timer", 0.5)]


def test_cancelled_timers_never_run_and_the_others_run_exactly_once(loop: VirtualTimeLoop) -> None:
    fired: list[int] = []
    timers = [loop.call_at(float(n), fired.append, n) for n in range(1, 301)]

    def cancel_most() -> None:
        # Enough cancelled timers that the loop rebuilds its heap on its next turn, the turn
        # that also runs the first live timer.
        for n, timer in enumerate(timers, start=1):
            if n % 3:
                timer.cancel()

    loop.call_at(0.5, cancel_most)
    assert loop.pending_timers() == 301
    loop.run_until_complete(asyncio.sleep(400))
    assert fired == [n for n in range(1, 301) if n % 3 == 0]
    assert loop.pending_timers() == 0


def test_a_registered_descriptor_is_served_before_the_clock_moves(loop: VirtualTimeLoop) -> None:
    import socket

    reader, writer = socket.socketpair()
    heard: list[float] = []
    loop.add_reader(reader.fileno(), lambda: (heard.append(loop.time()), reader.recv(1)))
    try:
        writer.send(b"x")
        loop.run_until_complete(asyncio.sleep(10))
    finally:
        loop.remove_reader(reader.fileno())
        reader.close()
        writer.close()
    assert heard == [0.0]


def test_a_failing_callback_goes_to_the_exception_handler_and_the_loop_goes_on(loop: VirtualTimeLoop) -> None:
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))

    def broken() -> None:
        raise ValueError("boom")

    loop.call_soon(broken)
    loop.call_later(1.0, broken)
    assert loop.run_until_complete(asyncio.sleep(2, result="on")) == "on"
    assert [type(c["exception"]) for c in reported] == [ValueError, ValueError]
    assert all("broken" in str(c["message"]) for c in reported)


def test_plain_timers_run_in_order_with_the_others_and_count_as_pending(loop: VirtualTimeLoop) -> None:
    fired: list[tuple[str, float]] = []
    loop.call_at(1.0, lambda: fired.append(("handle", loop.time())))
    loop.plain_call_at(1.0, lambda name: fired.append((name, loop.time())), "plain")  # same time: set after
    loop.plain_call_at(0.5, lambda: fired.append(("early", loop.time())))
    cancelled = loop.call_at(0.7, lambda: fired.append(("cancelled", loop.time())))
    loop.call_at(1.0, lambda: fired.append(("handle again", loop.time())))
    cancelled.cancel()
    assert loop.pending_timers() == 4
    loop.run_until_complete(asyncio.sleep(2))
    assert fired == [("early", 0.5), ("handle", 1.0), ("plain", 1.0), ("handle again", 1.0)]
    assert loop.pending_timers() == 0


def test_a_plain_timer_at_the_head_of_the_heap_neither_hides_nor_fakes_cancelled_ones(loop: VirtualTimeLoop) -> None:
    fired: list[int] = []
    timers = [loop.call_at(float(n), fired.append, n) for n in range(1, 301)]
    for n in range(1, 301):
        loop.plain_call_at(n + 0.5, fired.append, -n)

    def cancel_most() -> None:  # enough that the next turn rebuilds the heap, plain timers included
        for n, timer in enumerate(timers, start=1):
            if n % 3:
                timer.cancel()

    loop.call_at(0.25, cancel_most)
    loop.run_until_complete(asyncio.sleep(400))
    assert fired == [x for n in range(1, 301) for x in ((n,) if n % 3 == 0 else ()) + (-n,)]
    assert loop.pending_timers() == 0


def test_a_failing_plain_timer_goes_to_the_exception_handler(loop: VirtualTimeLoop) -> None:
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))

    def broken() -> None:
        raise ValueError("boom")

    loop.plain_call_at(1.0, broken)
    assert loop.run_until_complete(asyncio.sleep(2, result="on")) == "on"
    assert [type(c["exception"]) for c in reported] == [ValueError]
    assert "broken" in str(reported[0]["message"])


def test_a_closed_loop_refuses_plain_timers_and_closing_drops_them() -> None:
    loop = VirtualTimeLoop()
    loop.plain_call_at(5.0, print)
    loop.close()
    assert loop.pending_timers() == 0
    with pytest.raises(RuntimeError):
        loop.plain_call_at(6.0, print)


def test_a_callback_queued_with_its_context_runs_in_it_in_order_and_has_no_handle(loop: VirtualTimeLoop) -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="loop's")
    order: list[tuple[str, str]] = []
    context = contextvars.copy_context()
    context.run(var.set, "its own")
    handle = loop.call_soon(lambda: order.append(("plain", var.get())))
    assert loop.call_soon(lambda name: order.append((name, var.get())), "with context", context=context) is None
    assert handle is not None
    loop.call_soon(lambda: order.append(("last", var.get())))
    loop.run_until_complete(asyncio.sleep(0))
    assert order == [("plain", "loop's"), ("with context", "its own"), ("last", "loop's")]


def test_a_failing_callback_queued_with_a_context_is_reported_by_its_own_name(loop: VirtualTimeLoop) -> None:
    import contextvars

    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))

    def broken_with_context() -> None:
        raise ValueError("boom")

    loop.call_soon(broken_with_context, context=contextvars.copy_context())
    assert loop.run_until_complete(asyncio.sleep(1, result="on")) == "on"
    assert [type(c["exception"]) for c in reported] == [ValueError]
    assert "broken_with_context" in str(reported[0]["message"])


def test_tasks_and_futures_wake_up_through_the_loop_in_order(loop: VirtualTimeLoop) -> None:
    order: list[str] = []

    async def waiter(name: str, future: asyncio.Future[None]) -> None:
        await future
        order.append(name)

    async def main() -> None:
        futures = [loop.create_future() for _ in range(3)]
        tasks = [loop.create_task(waiter(f"w{n}", f), name=f"w{n}") for n, f in enumerate(futures)]
        await asyncio.sleep(0)
        for future in reversed(futures):
            future.set_result(None)
        await asyncio.gather(*tasks)
        assert [t.get_name() for t in tasks] == ["w0", "w1", "w2"]

    loop.run_until_complete(main())
    assert order == ["w2", "w1", "w0"]
