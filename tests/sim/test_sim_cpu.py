"""The simulated CPU (floodmark.reference.sim.cpu): handling messages takes virtual time, and a
node's work queues behind its earlier work."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from floodmark.reference.protocol import messages as m
from floodmark.reference.sim import SimRuntime, SimWorld
from floodmark.reference.sim.cpu import CpuCosts

COSTS = CpuCosts(per_message=0.001, per_partition=0.0001, per_record=0.00001)


def leader_and_isr(partitions: int) -> m.LeaderAndIsrRequest:
    states = tuple(m.PartitionState("t", p, 1, 1, (1, 2), 0, (1, 2), 1) for p in range(partitions))
    return m.LeaderAndIsrRequest(1, 1, 0, states, ())


async def answer(sender: str, message: Any) -> Any:
    if isinstance(message, m.LeaderAndIsrRequest):
        return m.LeaderAndIsrResponse(None)
    return m.ProduceResponse(None, base_offset=message.partition)


def cpu_world(costs: CpuCosts | None = COSTS) -> tuple[SimWorld, SimRuntime, SimRuntime]:
    world = SimWorld(seed=3, cpu=costs, latency=(0.001, 0.001))
    n1, n2 = world.add_node("n1"), world.add_node("n2")
    world.run(n2.network.serve(answer))
    return world, n1, n2


def test_costs_grow_with_partitions_and_records() -> None:
    costs = CpuCosts()
    assert costs.cost(m.BrokerHeartbeatRequest(1, 0)) == pytest.approx(50e-6)
    assert costs.cost(leader_and_isr(10_000)) == pytest.approx(0.20005)
    assert costs.cost(m.ProduceRequest("t", 0, ("v",) * 100)) == pytest.approx(50e-6 + 20e-6 + 200e-6)
    batch = m.RecordBatch(0, ("a", "b", "c"), (1,), (3,))
    fetched = m.ReplicaFetchResponse(None, (m.PartitionFetchResult("t", 0, m.FetchResponse(None, batch=batch)),) * 2)
    assert costs.cost(fetched) == pytest.approx(50e-6 + 2 * 20e-6 + 6 * 2e-6)
    # Records counted whether they come in a batch or one by one, and partitions with none.
    loose = m.FetchResponse(None, (m.Record(0, 1, "a"), m.Record(1, 1, "b")))
    mixed = m.ReplicaFetchResponse(None, (m.PartitionFetchResult("t", 0, m.FetchResponse(None, batch=batch)),
                                          m.PartitionFetchResult("t", 1, loose),
                                          m.PartitionFetchResult("t", 2, m.FetchResponse(None))))
    assert costs.cost(mixed) == pytest.approx(50e-6 + 3 * 20e-6 + 5 * 2e-6)


def test_without_a_cpu_model_handling_is_instantaneous() -> None:
    world, n1, _ = cpu_world(None)
    with world:
        assert world.cpu("n2") is None
        world.run(n1.network.request("n2", leader_and_isr(10_000), 5.0))
        assert world.now() == pytest.approx(0.002)  # two latencies, nothing else


def test_a_round_trip_costs_both_ends_their_cpu_time() -> None:
    world, n1, _ = cpu_world()
    with world:
        world.run(n1.network.request("n2", leader_and_isr(1000), 5.0))
        request, response = 0.001 + 1000 * 0.0001, 0.001
        # n2 handles the request and builds the response; n1 reads the response.
        assert world.now() == pytest.approx(0.002 + request + response + response)
        cpu = world.cpu("n2")
        assert cpu is not None and cpu.jobs == 2 and cpu.busy == pytest.approx(request + response)
        assert world.cpu("n1").jobs == 1  # type: ignore[union-attr]


def test_handlers_queue_behind_a_big_request() -> None:
    world, n1, _ = cpu_world()
    with world:
        done: dict[str, float] = {}

        async def big_then_small() -> None:
            async def call(name: str, message: Any) -> None:
                await n1.network.request("n2", message, 5.0)
                done[name] = world.now()

            await asyncio.gather(call("big", leader_and_isr(10_000)), call("small", m.ProduceRequest("t", 0, ())))

        world.run(big_then_small())
        # The small request arrived right after the big one and waited a whole second for it.
        assert done["small"] > 1.0 and done["small"] - done["big"] < 0.005
        assert world.cpu("n2").queued > 1.0  # type: ignore[union-attr]


def test_a_node_can_be_exempt_and_a_dead_process_leaves_an_idle_cpu() -> None:
    world = SimWorld(seed=3, cpu=COSTS, latency=(0.001, 0.001))
    with world:
        client = world.add_node("client", cpu=False)
        n2 = world.add_node("n2")
        world.run(n2.network.serve(answer))
        assert world.cpu("client") is None

        requests: list[asyncio.Future[Any]] = []

        async def flood() -> None:
            for i in range(100):
                requests.append(asyncio.ensure_future(
                    client.network.request("n2", m.ProduceRequest("t", i, ()), 5.0)))
            await asyncio.sleep(0.01)

        async def outcomes() -> list[Any]:
            return list(await asyncio.gather(*requests, return_exceptions=True))

        world.run(flood())
        cpu = world.cpu("n2")
        assert cpu is not None and cpu.busy_until > world.now() + 0.1  # plenty of work queued
        world.kill("n2")
        assert cpu.busy_until == world.now()
        assert all(isinstance(o, ConnectionResetError) for o in world.run(outcomes()))
        again = world.restart("n2")
        world.run(again.network.serve(answer))
        start = world.now()
        world.run(client.network.request("n2", m.ProduceRequest("t", 0, ()), 5.0))
        assert world.now() - start == pytest.approx(0.002 + 0.0011 + 0.001)  # no queue


def test_a_node_paused_while_its_cpu_works_handles_the_request_only_on_resume() -> None:
    world, n1, _ = cpu_world()
    with world:
        world.loop.call_later(0.05, world.pause, "n2")  # during the 0.2 s of CPU work
        world.loop.call_later(3.0, world.resume, "n2")
        world.run(n1.network.request("n2", leader_and_isr(2000), 10.0))
        assert 3.0 < world.now() < 3.01


def test_a_response_being_built_when_the_node_pauses_leaves_only_on_resume() -> None:
    world = SimWorld(seed=3, cpu=COSTS, latency=(0.001, 0.001))
    with world:
        n1, n2 = world.add_node("n1"), world.add_node("n2")

        async def big_answer(sender: str, message: Any) -> Any:
            return m.LeaderAndIsrResponse(None, tuple(m.PartitionError("t", p, None) for p in range(2000)))

        world.run(n2.network.serve(big_answer))
        # The request arrives at 0.001 and costs 0.001; building the answer takes 0.201 more.
        world.loop.call_later(0.1, world.pause, "n2")
        world.loop.call_later(3.0, world.resume, "n2")
        world.run(n1.network.request("n2", m.BrokerHeartbeatRequest(1, 0), 10.0))
        # It leaves at 3.0, arrives at 3.001, and n1 reads it for another 0.201 s.
        assert world.now() == pytest.approx(3.0 + 0.001 + 0.201)


def test_a_requester_paused_when_the_response_arrives_reads_it_after_resuming() -> None:
    world, n1, _ = cpu_world()
    with world:
        # The response arrives at 0.004 (two latencies, two jobs of n2); n1 is paused then.
        world.loop.call_later(0.003, world.pause, "n1")
        world.loop.call_later(2.0, world.resume, "n1")
        world.run(n1.network.request("n2", m.ProduceRequest("t", 0, ()), 10.0))
        assert world.now() == pytest.approx(2.0 + 0.001)  # reading it takes 0.001 once resumed
        assert world.cpu("n1").jobs == 1  # type: ignore[union-attr]


def test_a_request_whose_response_arrived_is_not_timed_out_while_the_requester_reads_it() -> None:
    world, n1, _ = cpu_world()
    with world:
        # n1's CPU is busy for 1 s when the response arrives: reading it ends past the timeout,
        # but a response that has arrived is no longer subject to it.
        world.loop.call_later(0.003, lambda: world.cpu("n1").charge(1.0))  # type: ignore[union-attr]
        response = world.run(n1.network.request("n2", m.ProduceRequest("t", 7, ()), 0.5))
        assert response.base_offset == 7
        assert world.now() == pytest.approx(0.003 + 1.0 + 0.001)
