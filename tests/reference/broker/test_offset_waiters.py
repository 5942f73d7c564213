"""Offset waiters (floodmark.reference.broker.offset_waiters): wake exactly the reached offsets."""

from __future__ import annotations

import asyncio

from floodmark.reference.broker.offset_waiters import OffsetWaiters
from floodmark.reference.sim.world import SimWorld


def test_advance_wakes_only_reached_offsets_and_timeouts_return_false() -> None:
    with SimWorld(seed=1) as world:
        waiters = OffsetWaiters()

        async def scenario() -> list[bool]:
            low = asyncio.ensure_future(waiters.wait(3, timeout=10.0))
            high = asyncio.ensure_future(waiters.wait(8, timeout=1.0))
            await asyncio.sleep(0.1)
            waiters.advance(5)
            first = await low
            assert not high.done()
            second = await high  # times out after 1 s of virtual time
            return [first, second]

        assert world.run(scenario()) == [True, False]
        assert len(waiters) == 0


def test_abort_wakes_everyone_with_false() -> None:
    with SimWorld(seed=1) as world:
        waiters = OffsetWaiters()

        async def scenario() -> list[bool]:
            tasks = [asyncio.ensure_future(waiters.wait(o, timeout=10.0)) for o in (1, 2)]
            await asyncio.sleep(0.1)
            waiters.abort()
            return list(await asyncio.gather(*tasks))

        assert world.run(scenario()) == [False, False]


def test_change_signal_wakes_every_waiter_once_and_times_out_otherwise() -> None:
    from floodmark.reference.broker.offset_waiters import ChangeSignal

    with SimWorld(seed=1) as world:
        signal = ChangeSignal()

        async def scenario() -> tuple[float, float, float]:
            loop = asyncio.get_running_loop()
            start = loop.time()
            waiters = [asyncio.ensure_future(signal.wait(5.0)) for _ in range(2)]
            await asyncio.sleep(0.5)
            signal.notify()
            await asyncio.gather(*waiters)
            woke = loop.time() - start
            await signal.wait(1.0)  # nothing notifies: returns after the timeout
            timed_out = loop.time() - start - woke
            short = asyncio.ensure_future(signal.wait(0.1))
            long = asyncio.ensure_future(signal.wait(5.0))
            await short  # one waiter's timeout does not cancel the other's wait
            signal.notify()
            await long
            return woke, timed_out, loop.time() - start

        woke, timed_out, total = world.run(scenario())
        assert 0.5 <= woke < 0.6 and 1.0 <= timed_out < 1.1 and total < 2.0


def test_waits_that_time_out_leave_nothing_behind() -> None:
    from floodmark.reference.broker.offset_waiters import ChangeSignal

    with SimWorld(seed=1) as world:
        signal, waiters = ChangeSignal(), OffsetWaiters()

        async def scenario() -> None:
            for _ in range(5):
                await signal.wait(0.1)
                assert await waiters.wait(1, 0.1) is False

        world.run(scenario())
        assert signal.waiting == 0 and len(waiters) == 0
