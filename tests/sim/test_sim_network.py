"""Tests of the simulated network (floodmark.reference.sim.network) through node runtimes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from floodmark.reference.protocol import messages as m
from floodmark.reference.sim import SimWorld
from floodmark.reference.sim.cpu import CpuCosts, SimCpu
from floodmark.reference.sim.network import UNKNOWN_SERVER_ERROR

pytestmark = pytest.mark.sim_world(seed=11)


async def echo_offsets(sender: str, message: Any) -> Any:
    assert isinstance(message, m.ProduceRequest)
    return m.ProduceResponse(None, base_offset=len(message.values), high_watermark=int(sender[1:]))


def start_three(world: SimWorld) -> tuple[Any, Any, Any]:
    runtimes = tuple(world.add_node(n) for n in ("n1", "n2", "n3"))
    for rt in runtimes:
        world.run(rt.network.serve(echo_offsets))
    return runtimes  # type: ignore[return-value]


def ask(world: SimWorld, rt: Any, to: str, timeout: float = 1.0) -> Any:
    async def go() -> Any:
        try:
            return await rt.network.request(to, m.ProduceRequest("t", 0, ("a", "b", "c")), timeout)
        except (ConnectionError, TimeoutError) as e:
            return e

    return world.run(go())


def test_request_gets_the_handlers_response_with_small_latency(world: SimWorld) -> None:
    n1, _, _ = start_three(world)
    start = world.now()
    response = ask(world, n1, "n2")
    assert response == m.ProduceResponse(None, base_offset=3, high_watermark=1)
    assert 0 < world.now() - start < 0.01


def test_partition_makes_requests_time_out_both_ways_and_heal_restores(world: SimWorld) -> None:
    n1, n2, n3 = start_three(world)
    world.partition({"n1"}, {"n2"})
    start = world.now()
    assert isinstance(ask(world, n1, "n2", timeout=2.0), TimeoutError)
    assert world.now() - start == pytest.approx(2.0)
    assert isinstance(ask(world, n2, "n1"), TimeoutError)
    assert isinstance(ask(world, n1, "n3"), m.ProduceResponse)  # other links unaffected
    world.heal()
    assert isinstance(ask(world, n1, "n2"), m.ProduceResponse)


def test_one_way_cut_loses_the_responses_but_the_request_is_handled(world: SimWorld) -> None:
    n1, n2, _ = start_three(world)
    handled: list[str] = []

    async def counting(sender: str, message: Any) -> Any:
        handled.append(sender)
        return await echo_offsets(sender, message)

    world.run(n2.network.serve(counting))
    world.cut("n2", "n1")  # n1 -> n2 still works, the answer is lost
    assert isinstance(ask(world, n1, "n2"), TimeoutError)
    assert handled == ["n1"]
    assert isinstance(ask(world, n2, "n1"), TimeoutError)  # n2's request to n1 is lost


def test_crashed_node_refuses_and_breaks_requests_in_flight(world: SimWorld) -> None:
    n1, n2, _ = start_three(world)

    async def slow(sender: str, message: Any) -> Any:
        await n2.sleep(5.0)
        return await echo_offsets(sender, message)

    world.run(n2.network.serve(slow))

    async def crash_during_request() -> Any:
        pending = asyncio.ensure_future(
            n1.network.request("n2", m.ProduceRequest("t", 0, ("x",)), 10.0))
        await asyncio.sleep(1.0)
        world.crash("n2")
        try:
            return await pending
        except ConnectionError as e:
            return e

    outcome = world.run(crash_during_request())
    assert isinstance(outcome, ConnectionResetError)
    assert world.now() < 1.1  # broken at once, not after the timeout
    assert isinstance(ask(world, n1, "n2"), ConnectionRefusedError)


def test_paused_node_answers_only_after_resume(world: SimWorld) -> None:
    n1, _, _ = start_three(world)
    world.pause("n2")
    assert isinstance(ask(world, n1, "n2", timeout=3.0), TimeoutError)

    async def resume_later() -> Any:
        world.loop.call_later(2.0, world.resume, "n2")
        return await n1.network.request("n2", m.ProduceRequest("t", 0, ("x",)), 10.0)

    start = world.now()
    assert isinstance(world.run(resume_later()), m.ProduceResponse)
    assert world.now() - start == pytest.approx(2.0, abs=0.01)


def test_handler_failure_becomes_an_error_response_and_is_recorded(world: SimWorld) -> None:
    n1, n2, _ = start_three(world)

    async def broken(sender: str, message: Any) -> Any:
        raise KeyError("boom")

    world.run(n2.network.serve(broken))
    response = ask(world, n1, "n2")
    assert isinstance(response, m.ErrorResponse) and response.error == UNKNOWN_SERVER_ERROR
    assert [(node, type(e)) for node, _, e in world.failures] == [("n2", KeyError)]


def test_messages_are_checked_by_the_wire_codec(world: SimWorld) -> None:
    n1, _, _ = start_three(world)

    async def send_garbage() -> None:
        await n1.network.request("n2", {"not": "a message"}, 1.0)

    with pytest.raises(ValueError, match="not a message type"):
        world.run(send_garbage())


def test_delivery_on_a_link_is_fifo(world: SimWorld) -> None:
    n1, n2, _ = start_three(world)
    arrived: list[int] = []

    async def record(sender: str, message: Any) -> Any:
        arrived.append(message.partition)
        return m.ProduceResponse(None)

    world.run(n2.network.serve(record))

    async def burst() -> None:
        await asyncio.gather(*(n1.network.request("n2", m.ProduceRequest("t", i, ()), 1.0)
                               for i in range(50)))

    world.run(burst())
    assert arrived == list(range(50))


def test_closing_the_network_stops_serving_and_breaks_calls_in_progress(world: SimWorld) -> None:
    n1, n2, _ = start_three(world)

    async def slow(sender: str, message: Any) -> Any:
        await n2.sleep(5.0)
        return m.ProduceResponse(None)

    world.run(n2.network.serve(slow))

    async def close_during_request() -> Any:
        pending = asyncio.ensure_future(n1.network.request("n2", m.ProduceRequest("t", 0, ()), 10.0))
        await asyncio.sleep(1.0)
        await n2.network.close()
        try:
            return await pending
        except ConnectionError as e:
            return e

    assert isinstance(world.run(close_during_request()), ConnectionResetError)
    assert isinstance(ask(world, n1, "n2"), ConnectionRefusedError)
    world.run_for(10.0)
    assert world.failures == []


# ------------------------------------------------------------------ link faults healed one by one


def test_overlapping_link_faults_heal_independently(world: SimWorld) -> None:
    n1, n2, n3 = start_three(world)
    split = world.partition({"n1"}, {"n2", "n3"})
    cut = world.cut("n1", "n2")
    assert split.links == (("n1", "n2"), ("n2", "n1"), ("n1", "n3"), ("n3", "n1"))
    world.restore(split)  # n1 -> n2 is still cut by the other fault
    assert isinstance(ask(world, n1, "n2"), TimeoutError)
    assert isinstance(ask(world, n2, "n1"), TimeoutError)  # the answer travels n1 -> n2
    assert isinstance(ask(world, n1, "n3"), m.ProduceResponse)
    assert isinstance(ask(world, n3, "n1"), m.ProduceResponse)
    assert world.network.blocked == {("n1", "n2")}
    world.restore(cut)
    assert world.network.blocked == frozenset()
    assert isinstance(ask(world, n1, "n2"), m.ProduceResponse)


def test_uncut_removes_exactly_one_cut_of_a_link(world: SimWorld) -> None:
    n1, _, _ = start_three(world)
    world.cut("n1", "n2")
    world.cut("n1", "n2")
    world.uncut("n1", "n2")
    assert isinstance(ask(world, n1, "n2"), TimeoutError)  # one cut left
    world.uncut("n1", "n2")
    assert isinstance(ask(world, n1, "n2"), m.ProduceResponse)
    with pytest.raises(ValueError, match="not cut"):
        world.uncut("n1", "n2")


def test_heal_lifts_every_link_fault_and_lost_messages_are_counted(world: SimWorld) -> None:
    n1, _, _ = start_three(world)
    world.partition({"n1"}, {"n2"})
    world.cut("n1", "n2")
    world.cut("n3", "n1")
    assert isinstance(ask(world, n1, "n2"), TimeoutError)
    assert world.network.lost == {("n1", "n2"): 1}  # the request died on the blocked link
    world.heal()
    assert world.network.blocked == frozenset()
    assert isinstance(ask(world, n1, "n2"), m.ProduceResponse)
    assert world.network.lost == {("n1", "n2"): 1}


# ------------------------------------------------------------------ handler tasks


def test_a_handled_request_leaves_no_task_behind_on_either_side(world: SimWorld) -> None:
    n1, _, _ = start_three(world)
    for _ in range(3):
        assert isinstance(ask(world, n1, "n2"), m.ProduceResponse)
    world.run_for(0.1)
    assert world.node("n2").tasks == {}
    assert all(not tasks for tasks in world.network._handling.values())


def slow_server_with_a_cpu(world: SimWorld, started: list[str]) -> tuple[Any, SimCpu]:
    """n1 and a server n2 whose handler sleeps 5 s (noting who it started for), and n2's CPU."""
    n1, n2, _ = start_three(world)

    async def slow(sender: str, message: Any) -> Any:
        started.append(sender)
        await n2.sleep(5.0)
        return m.ProduceResponse(None)

    world.run(n2.network.serve(slow))
    cpu = world.cpu("n2")
    assert cpu is not None
    return n1, cpu


async def when_the_cpu_is_done_with_the_next_request(world: SimWorld, cpu: SimCpu,
                                                     action: Callable[..., object], *args: Any) -> None:
    """Set ``action(*args)`` for the moment n2's CPU is done with the next request to reach it:
    just after that request's handler task is made (its timer was set first), before the task
    takes its first step (a turn later)."""
    jobs = cpu.jobs
    while cpu.jobs == jobs:
        await asyncio.sleep(1e-6)
    world.loop.call_at(cpu.busy_until, action, *args)


def test_a_crash_cancels_and_counts_handlers_that_have_not_started() -> None:
    # A crash timed for that moment meets a handler that has not started, which cannot
    # forget itself: the crash must.
    with SimWorld(seed=11, cpu=CpuCosts()) as world:
        started: list[str] = []
        n1, cpu = slow_server_with_a_cpu(world, started)

        async def crash_as_the_handler_begins() -> Any:
            pending = asyncio.ensure_future(n1.network.request("n2", m.ProduceRequest("t", 0, ("x",)), 10.0))
            await when_the_cpu_is_done_with_the_next_request(world, cpu, world.crash, "n2")
            return await asyncio.gather(pending, return_exceptions=True)

        outcomes = world.run(crash_as_the_handler_begins())
        assert started == []  # the handler never ran
        assert isinstance(outcomes[0], ConnectionResetError)
        assert world.node("n2").tasks == {}
        world.run_for(1.0)
        assert world.failures == []


def test_closing_the_network_forgets_the_handlers_it_cancelled() -> None:
    with SimWorld(seed=11, cpu=CpuCosts()) as world:
        started: list[str] = []
        n1, cpu = slow_server_with_a_cpu(world, started)

        async def close_with_handlers_asleep_and_one_not_started() -> Any:
            pending = [asyncio.ensure_future(n1.network.request("n2", m.ProduceRequest("t", 0, ()), 10.0))
                       for _ in range(2)]
            await asyncio.sleep(1.0)
            assert len(world.node("n2").tasks) == 2  # both handlers asleep in their handler
            pending.append(asyncio.ensure_future(n1.network.request("n2", m.ProduceRequest("t", 0, ()), 10.0)))
            await when_the_cpu_is_done_with_the_next_request(world, cpu, world.network.close_node, "n2", 0)
            return await asyncio.gather(*pending, return_exceptions=True)

        outcomes = world.run(close_with_handlers_asleep_and_one_not_started())
        assert world.now() < 1.1  # broken at the close, not by a timeout
        assert started == ["n1", "n1"]  # the third handler never ran
        assert all(isinstance(o, ConnectionResetError) for o in outcomes)
        assert world.node("n2").tasks == {}
        world.run_for(10.0)
        assert world.failures == []
