"""Thread stalls: planned on the controller, applied by the simulator with evidence, refused by
real clusters, and judged by fault coverage."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from cluster_fixtures import FakeCluster, view_of

from floodmark.backends.node_faults import refuses
from floodmark.backends.sim import SimBackend
from floodmark.checkers.fault_coverage import fault_coverage
from floodmark.checkers.white_box.epoch_invariants import stale_controller_writes
from floodmark.contracts.history import NEMESIS, Op
from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.config import make_config
from floodmark.harness.faults import SessionExpiry, ThreadStall
from floodmark.nemesis.stall import StallNemesis
from floodmark.reference.controller.controller import event_thread_name
from floodmark.reference.protocol import zk_layout
from floodmark.reference.sim.world import SimWorld
from floodmark.workloads.clients import LibraryClients

SMALL = {"cluster": "sim", "time_limit": 12.0, "rate": 50.0, "concurrency": 4, "topics": 1,
         "partitions": 2, "fault_duration": [2.0, 4.0], "quiet_period": [1.0, 2.0]}


def test_a_stall_is_planned_on_the_controller_and_only_the_simulator_applies_it() -> None:
    view = view_of(FakeCluster(), controller=2, leaders={("t0", 0): 3})
    plan, how = StallNemesis().plan(random.Random(1), view, "controller", 5.0)
    assert plan == ThreadStall("n2", "controller", expire_session=False) and how["target"] == "controller"
    expiring, _ = StallNemesis().plan(random.Random(1), view, "controller-session-expired", 5.0)
    assert expiring == ThreadStall("n2", "controller", expire_session=True)
    leaderless, how = StallNemesis().plan(random.Random(1), view_of(FakeCluster()), "controller", 5.0)
    assert "fallback" in how and leaderless.node == how["node"]
    assert StallNemesis.simulated_only
    assert "only the simulator can apply stall faults" in (refuses("stall", "controller") or "")
    with pytest.raises(ValueError, match="local.*stall|stall.*local"):
        make_config({"cluster": "local", "nemesis": ["stall"]})
    assert "stall" not in make_config({"cluster": "sim"}).nemesis  # "all" keeps its schedules


def test_a_stalled_task_runs_until_its_next_safepoint_then_passes_no_gate_until_released() -> None:
    with SimWorld(seed=1) as world:
        world.add_node("n1")
        node = world.node("n1")
        steps: list[str] = []

        async def thread() -> None:
            await node.gate(0)
            steps.append("read")  # a stall is armed: the thread still runs up to a safepoint
            await node.gate(0, safepoint=True)
            steps.append("decided")
            await node.gate(0)
            steps.append("wrote")

        struck: list[float] = []
        stall = world.stall_task("n1", "worker", lambda: struck.append(world.now()))
        task = world.loop.create_task(thread(), name="n1:worker")
        other = world.loop.create_task(node.gate(0, safepoint=True), name="n1:other")
        world.run_for(1.0)
        assert steps == ["read"] and other.done() and struck == [0.0] and stall.holds == 1
        world.release_stall("n1", stall)
        world.run_for(0.1)
        assert steps == ["read", "decided", "wrote"] and task.done() and not node.stalls


def started(variant: str = "default") -> Any:
    """Three brokers with their topic: the controller has partitions to decide about."""
    sim = SimBackend(make_config({**SMALL, "seed": 3, "nodes": 3, "variant": variant}), ClusterSpec(brokers=3, seed=5))
    sim.setup()
    clients = LibraryClients(sim.config, sim.client_host(), sim.cluster.bootstrap_addresses)
    sim.run(clients.create_topics())
    sim.run(clients.close())
    return sim


@pytest.fixture
def backend() -> Any:
    sim = started()
    yield sim
    sim.force_cleanup()


def controller_node(backend: Any) -> Any:
    backend.run(asyncio.sleep(1.0))  # the cluster settles: one controller
    active = [n for n in backend.cluster.broker_nodes if n.broker.controller.is_active]
    assert len(active) == 1
    return active[0]


def stalled_while(backend: Any, plan: ThreadStall, during: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Apply the stall, give the controller an event (``during``), wait, release."""
    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        evidence = await backend.faults.apply(plan)
        await during()
        await asyncio.sleep(2.0)
        return evidence, await backend.faults.heal(plan)

    return backend.run(both())  # type: ignore[no-any-return]


def test_a_stalled_controller_handles_no_event_and_says_what_waited(backend: Any) -> None:
    controller = controller_node(backend)
    other = next(n for n in backend.cluster.broker_nodes if n is not controller)
    handled = controller.broker.controller.events_handled

    async def a_broker_fails() -> None:  # the controller's next event decides partition states
        await backend.faults.apply(SessionExpiry(other.name))

    applied, released = stalled_while(backend, ThreadStall(controller.name, "controller"), a_broker_fails)
    assert applied == {"stalled": f"{controller.name}:{event_thread_name(controller.broker_id)}",
                       "was_active": True}
    assert released["struck_at"] is not None and released["held"] >= 1
    assert released["events_handled_while_stuck"] == 0 and released["events_waiting"] >= 1
    assert "session" not in released
    backend.run(asyncio.sleep(1.0))  # released: it catches up
    assert controller.broker.controller.events_handled > handled
    assert controller.broker.controller.is_active


@pytest.mark.parametrize("variant", ["default", "no-controller-epoch-check"])
def test_kafka_6082_a_controller_stuck_while_another_takes_over_writes_only_without_the_epoch_check(
        variant: str) -> None:
    backend = started(variant)
    try:
        controller = controller_node(backend)
        other = next(n for n in backend.cluster.broker_nodes if n is not controller)
        world = backend.world

        async def a_broker_fails() -> None:
            await backend.faults.apply(SessionExpiry(other.name))

        plan = ThreadStall(controller.name, "controller", expire_session=True)
        _, released = stalled_while(backend, plan, a_broker_fails)
        assert released["session"]["expired_sessions"]
        assert f"/brokers/ids/{controller.broker_id}" in released["session"]["ephemerals_deleted"]
        assert released["events_handled_while_stuck"] == 0
        # While it was stuck its broker registered again and another broker became controller.
        assert world.zk.exists(zk_layout.broker_path(controller.broker_id)) is not None
        assert controller_node(backend) is not controller
        events = {n.name: world.events(n.name) for n in backend.cluster.broker_nodes}
        stale = stale_controller_writes(events)
        if variant == "default":  # the epoch check fenced what it had decided (the run is the
            assert stale == []    # same as the variant's up to that write)
        else:  # what it decided for its old reign landed after its successor's election
            assert stale and all(a.events[1][0] == controller.name for a in stale)
    finally:
        backend.force_cleanup()


def test_a_stall_that_never_struck_is_not_counted_as_taking_effect(backend: Any) -> None:
    async def nothing() -> None:
        return None

    controller = controller_node(backend)
    _, released = stalled_while(backend, ThreadStall(controller.name, "controller"), nothing)
    assert released == {"struck_at": None, "held": 0}

    def op(index: int, f: str, value: dict[str, Any]) -> Op:
        return Op(index=index, time=index * 10**9, type="ok", process=NEMESIS, f=f, value=value)

    coverage = fault_coverage([
        op(0, "start-stall", {"shape": "controller", "stalled": "n1:controller-1"}),
        op(1, "stop-stall", released),
        op(2, "start-stall", {"shape": "controller-session-expired", "stalled": "n1:controller-1"}),
        op(3, "stop-stall", {"struck_at": 2.5, "held": 3, "events_handled_while_stuck": 0,
                             "events_waiting": 2, "session": {"expired_sessions": ["0x1"]}}),
    ])["stall"]
    assert (coverage.planned, coverage.took_effect) == (2, 1)
    assert "never stuck" in coverage.missed[0] and "decided no partition state" in coverage.missed[0]


def test_a_broker_whose_stalled_controller_never_lets_it_stop_is_killed_after_the_grace(backend: Any) -> None:
    # Explore seed 10097 hung for good: healing a disk fault restarts its broker cleanly, and
    # that broker's controller thread was stalled, so the clean stop never ended and the
    # stall's own heal, next in the schedule, never came. A real harness follows SIGTERM
    # with SIGKILL after a grace period; so does the simulator's.
    controller = controller_node(backend)
    other = next(n for n in backend.cluster.broker_nodes if n is not controller)

    async def stop_while_stalled() -> tuple[bool, float]:
        await backend.faults.apply(ThreadStall(controller.name, "controller"))
        await backend.faults.apply(SessionExpiry(other.name))  # an event to be stuck in
        await asyncio.sleep(1.0)
        started_at = backend.cluster.world.now()
        clean = await controller.shut_down(grace=12.0)
        return clean, backend.cluster.world.now() - started_at

    clean, took = backend.run(stop_while_stalled())
    assert clean is False and 12.0 <= took < 12.5, took
    assert not controller.is_running()
    # A broker that stops within its grace stops cleanly, as before.
    assert backend.run(other.shut_down(grace=12.0)) is True and not other.is_running()
