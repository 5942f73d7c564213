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
