"""Simulated faults do what their names say, heal independently, and claim no more than they did.

Each test reads the world's own state (blocked links, paused nodes, clocks, processes) or
the evidence a fault left, never only the applier's word: two equal faults in force at once
each heal their own; a pause, a clock fault, a message fault only claims what happened; a
heal-all heals a disk the way a single heal does; and every message shape can strike.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import pytest

from floodmark.backends.sim import SimBackend
from floodmark.checkers.fault_coverage import fault_coverage
from floodmark.contracts.history import NEMESIS, Op
from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.config import make_config
from floodmark.harness.faults import (
    BrokerSlot,
    ClockSkew,
    ClusterView,
    DiskFault,
    MessageFault,
    NetworkCut,
    ProcessPause,
)
from floodmark.nemesis.message import MessageNemesis

SMALL = {"cluster": "sim", "time_limit": 12.0, "rate": 50.0, "concurrency": 4, "topics": 1, "partitions": 2}


@pytest.fixture(scope="module")
def backend() -> Iterator[Any]:
    sim = SimBackend(make_config({**SMALL, "seed": 3}), ClusterSpec(brokers=3, seed=5))
    sim.setup()
    yield sim
    sim.force_cleanup()


def test_two_equal_cuts_in_force_at_once_each_heal_their_own(backend: Any) -> None:
    cut = NetworkCut((("n1", ("n2",)),))
    network = backend.world.network

    async def twice() -> list[dict[str, Any]]:
        await backend.faults.apply(cut)
        await backend.faults.apply(cut)
        first = await backend.faults.heal(cut)
        assert network.blocked == {("n2", "n1")}  # the other cut is still in force
        return [first, await backend.faults.heal(cut)]

    first, second = backend.run(twice())
    assert network.blocked == frozenset()  # old code: n2 -> n1 stayed cut for the rest of the run
    assert first == {"links_up": 0, "links": 1} and second == {"links_up": 1, "links": 1}


def test_two_equal_message_rules_each_heal_their_own(backend: Any) -> None:
    rule = MessageFault("ReplicaFetchResponse", "drop", destination="n2")

    async def twice() -> list[dict[str, Any]]:
        await backend.faults.apply(rule)
        await backend.faults.apply(rule)
        return [await backend.faults.heal(rule), await backend.faults.heal(rule)]

    first, second = backend.run(twice())
    assert "rule" in first and "rule" in second  # old code: the second heal found nothing to remove
    assert backend.world.network.message_faults.rules == []


def test_a_broker_two_pauses_hold_stays_paused_until_the_last_heals(backend: Any) -> None:
    node = backend.cluster.broker_node("n1")
    outer, inner = ProcessPause("n1", 5.0, 6.0), ProcessPause("n1", 2.0, 6.0)

    async def nested() -> tuple[dict[str, Any], bool, dict[str, Any]]:
        await backend.faults.apply(outer)
        await asyncio.sleep(1.0)
        await backend.faults.apply(inner)
        await asyncio.sleep(2.0)
        healed_inner = await backend.faults.heal(inner)
        paused = node.is_paused()
        await asyncio.sleep(2.0)
        return healed_inner, paused, await backend.faults.heal(outer)

    healed_inner, paused, healed_outer = backend.run(nested())
    assert paused  # old code: the inner pause's heal resumed a broker the outer one still held
    assert healed_inner["resumed"]["still_paused"] is True
    assert healed_outer["resumed"]["paused_for"] == 5.0 and not node.is_paused()


@pytest.mark.parametrize("other", [DiskFault("n2", "/data/logdir1", "chmod"),
                                   MessageFault("ReplicaFetchResponse", "drop", destination="n3"),
                                   NetworkCut((("n2", ("n3",)),))],
                         ids=["disk", "message", "cut"])
def test_a_pause_heals_while_another_kind_of_fault_is_in_force(backend: Any, other: Any) -> None:
    # Explore seed 87: a pause healed while a disk fault was in force failed ("cannot unpack
    # non-iterable DiskFault object"), and its broker stayed paused until the final heal-all.
    node = backend.cluster.broker_node("n1")
    pause = ProcessPause("n1", 2.0, 6.0)

    async def overlapping() -> dict[str, Any]:
        await backend.faults.apply(pause)
        await backend.faults.apply(other)
        await asyncio.sleep(2.0)
        healed = await backend.faults.heal(pause)
        await backend.faults.heal(other)
        return healed

    healed = backend.run(overlapping())
    assert healed["resumed"]["paused_for"] == 2.0 and "still_paused" not in healed["resumed"]
    assert not node.is_paused()


def test_overlapping_clock_faults_heal_independently(backend: Any) -> None:
    world = backend.world
    bump, rate = ClockSkew((("n1", 30.0, 1.0),)), ClockSkew((("n1", 0.0, 2.0),))

    async def overlapping() -> tuple[float, dict[str, Any]]:
        await backend.faults.apply(bump)
        applied = await backend.faults.apply(rate)
        await backend.faults.heal(bump)  # the earlier fault ends; the rate fault is still in force
        await asyncio.sleep(2.0)
        skew = world.clock_skew("n1")
        await backend.faults.heal(rate)
        return skew, applied

    skew, applied = backend.run(overlapping())
    assert skew == pytest.approx(2.0)  # old code: 0.0, the rate fault undone by the other's heal
    assert world.clock_skew("n1") == 0.0
    assert applied["rate"] == {"n1": 2.0}  # a rate moves no clock at once: it is read back instead


def test_heal_all_restarts_a_broker_whose_disk_it_healed(backend: Any) -> None:
    node = backend.cluster.broker_node("n3")
    pid = node.pid()

    async def left_to_heal_all() -> dict[str, Any]:
        await backend.faults.apply(DiskFault("n3", "/data/logdir0", "chmod"))
        await asyncio.sleep(1.0)
        return await backend.faults.heal_all(("disk",))  # type: ignore[no-any-return]

    healed = backend.run(left_to_heal_all())["disk"]
    # Old code healed the disk and left the broker running with the directory offline.
    assert healed["healed"] == {"n3": 1} and healed["restarted"]["n3"]["pid"] == node.pid() != pid


def nemesis_ops(*steps: tuple[str, dict[str, Any]]) -> list[Op]:
    ops: list[Op] = []
    for second, (f, value) in enumerate(steps):
        ops.append(Op(len(ops), second * 10**9, "invoke", NEMESIS, f, None))
        ops.append(Op(len(ops), second * 10**9 + 1, "ok", NEMESIS, f, value))
    return ops


def test_a_fault_is_not_counted_for_what_its_evidence_does_not_show() -> None:
    coverage = fault_coverage(nemesis_ops(
        # A rule that matched messages and, at probability 0.1, acted on none of them.
        ("start-message", {"shape": "drop-heartbeat", "probability": 0.1, "rule": "in force"}),
        ("stop-message", {"rule": {"action": "drop", "matched": 8, "dropped": 0}}),
        # A clock fault whose evidence shows no clock moved and no rate changed.
        ("start-clock", {"shape": "rate", "skew": {"n1": 0.0}}),
        # A "long" pause that a hand-written schedule made as long as the session timeout.
        ("start-pause", {"shape": "random-long", "stopped": True, "longer_than_session": False,
                         "seconds": 6.0, "session_timeout": 6.0}),
        ("stop-pause", {"resumed": {"node": "n2", "paused_for": 6.0}}),
        ("start-pause", {"shape": "leader-short", "stopped": True, "longer_than_session": True,
                         "seconds": 9.0, "session_timeout": 6.0}),
        ("stop-pause", {"resumed": {"node": "n2", "paused_for": 9.0, "session_expired": True}}),
    ))
    assert {kind: c.took_effect for kind, c in coverage.items()} == {"clock": 0, "message": 0, "pause": 0}
    assert coverage["message"].missed == ["drop-heartbeat at 0.0 s: 8 messages matched its rule, none was dropped"]
    assert coverage["pause"].missed == [
        "random-long at 3.0 s: a long pause lasted 6.0 s, not past the session timeout",
        "leader-short at 5.0 s: a short pause lasted 9.0 s, not less than the session timeout (6.0 s)"]
    rate = fault_coverage(nemesis_ops(("start-clock", {"shape": "rate", "skew": {"n1": 0.0}, "rate": {"n1": 2.0}})))
    assert rate["clock"].took_effect == 1


VIEW = ClusterView("zk", tuple(BrokerSlot(f"n{i}", i, ("/data/logdir0",)) for i in (1, 2, 3)),
                   (("t0", 0),), 6.0, controller=1, leaders={("t0", 0): 2})


@pytest.mark.parametrize("message", ["produce-response", "heartbeat"])
def test_a_message_fault_aims_where_its_messages_go(message: str) -> None:
    # Produce responses go to clients and heartbeats to the controller: a rule on those sent
    # *to* another broker matches nothing (old code: every produce-response fault, and every
    # heartbeat fault aimed at a broker other than the controller, could never strike).
    nemesis = MessageNemesis()
    for seed in range(30):
        plan, how = nemesis.plan(random.Random(seed), VIEW, f"drop-{message}", 4.0)
        assert isinstance(plan, MessageFault)
        to_controller = message == "heartbeat" and how["broker_id"] == VIEW.controller
        assert (plan.source, plan.destination) == ((None, how["node"]) if to_controller else (how["node"], None))
