"""Faults a cluster's layout leaves with nothing to do are refused or never drawn.

A bridge on two brokers, a majorities ring of three nodes, a cut from the controller on one
broker, a deaf follower of a single replica, follower fetches with replication factor 1, a
reassignment on one broker, a partition lasting 0 s: each was accepted, planned and ran,
cutting, dropping or moving nothing, and the run's verdict read as if it had been tested
(only the coverage line said "did not take effect"). A hand-written schedule naming one is
refused before the run; a random schedule never draws one, and draws on a layout that allows
every shape exactly the schedule it always drew.
"""

from __future__ import annotations

import random

import pytest

from floodmark.harness.config import ALL_KINDS, TestConfig, make_config
from floodmark.harness.faults import BrokerSlot, ClusterView
from floodmark.harness.schedule import Fault, Schedule
from floodmark.nemesis.base import Layout
from floodmark.nemesis.compose import Composite
from floodmark.nemesis.partition import PartitionNemesis, grudge_for
from floodmark.run.assemble import draw_schedule, kind_without_shapes, make_nemeses, refusals

LAYOUTS = [(brokers, rf) for brokers in range(1, 6) for rf in range(1, min(brokers, 3) + 1)]


def view(brokers: int, rf: int) -> ClusterView:
    """Broker 1 the controller; one partition led by each broker, its replicas from there."""
    slots = tuple(BrokerSlot(f"n{i}", i, ("/data/logdir0",)) for i in range(1, brokers + 1))
    partitions = tuple(("t0", p) for p in range(brokers))
    replicas = {("t0", p): tuple((p + k) % brokers + 1 for k in range(rf)) for p in range(brokers)}
    leaders = {tp: r[0] for tp, r in replicas.items()}
    return ClusterView("zk", slots, partitions, 6.0, 1, leaders, replicas)


@pytest.mark.parametrize(("brokers", "rf"), LAYOUTS)
def test_a_partition_shape_is_refused_exactly_where_its_grudge_would_be_empty(brokers: int, rf: int) -> None:
    nemesis = PartitionNemesis()
    for shape in nemesis.every_shape:
        empty = [not grudge_for(random.Random(seed), view(brokers, rf), shape)[0] for seed in range(30)]
        problem = nemesis.layout_problem(shape, Layout(brokers, rf))
        assert all(empty) if problem is not None else not any(empty), (shape, brokers, rf, problem)


def sim_config(brokers: int, rf: int, nemesis: str = "all", seed: int = 1) -> TestConfig:
    return make_config({"cluster": "sim", "nodes": brokers, "replication_factor": rf, "min_insync_replicas": 1,
                        "nemesis": nemesis, "inter_broker_protocol": "kip-343", "time_limit": 300, "seed": seed})


@pytest.mark.parametrize(("brokers", "rf"), [(1, 1), (2, 1), (2, 2), (3, 1)])
def test_random_schedules_on_small_clusters_draw_only_faults_that_can_act(brokers: int, rf: int) -> None:
    config = sim_config(brokers, rf)
    nemeses = make_nemeses(config)
    assert kind_without_shapes(config, nemeses) is None
    for seed in range(1, 16):
        schedule = draw_schedule(config, nemeses, random.Random(seed))
        assert schedule.faults
        assert refusals("sim", schedule, nemeses, brokers, 6.0, 300, rf) == [], seed
        assert schedule == draw_schedule(config, nemeses, random.Random(seed))


def test_a_layout_that_allows_every_shape_draws_the_schedules_seeds_always_drew() -> None:
    nemeses = Composite(ALL_KINDS)
    for brokers, rf in LAYOUTS:
        if brokers >= 3 and rf >= 3:
            assert nemeses.shapes(Layout(brokers, rf)) == nemeses.shapes(), (brokers, rf)
        elif brokers >= 3 and rf == 2:  # every kind's but the failover patterns aimed at a third replica
            assert nemeses.shapes(Layout(brokers, rf)) == {**nemeses.shapes(), "failover": ("stalled-controller",)}


def test_a_kind_with_no_shape_the_layout_allows_is_refused_naming_why() -> None:
    config = sim_config(1, 1, "kill,failover")
    problem = kind_without_shapes(config, make_nemeses(config))
    assert problem is not None and problem.startswith("--nemesis failover: no failover fault can take effect")
    assert "needs at least 2 brokers, one to fail over to; the test has 1" in problem


def test_two_brokers_draw_the_stalled_controller_which_needs_no_third_replica() -> None:
    # The kind needed 3 brokers whatever its patterns aimed at: a stalled controller, whose
    # session expiry hands control to any other broker, was never drawn on two.
    for rf in (1, 2):
        config = sim_config(2, rf, "failover")
        assert kind_without_shapes(config, make_nemeses(config)) is None
        assert make_nemeses(config).shapes(Layout(2, rf))["failover"] == ("stalled-controller",)


@pytest.mark.parametrize(("kind", "shape", "brokers", "rf", "why"), [
    ("partition", "majorities-ring", 2, 2, "hides no node from any: needs at least 3 brokers; the test has 2"),
    ("partition", "bridge", 2, 2, "need at least 3 brokers; the test has 2"),
    ("partition", "controller-cut", 1, 1, "no broker can be cut from the controller"),
    ("partition", "leader-controller-cut", 1, 1, "no broker can be cut from the controller"),
    ("partition", "follower-deaf", 3, 1, "no partition has a follower"),
    ("message", "drop-fetch-response", 3, 1, "no ReplicaFetchResponse is ever sent"),
    ("message", "delay-epoch-response", 3, 1, "no OffsetForLeaderEpochResponse is ever sent"),
    ("message", "reorder-isr-change-request", 3, 1, "no IsrChangeRequest is ever sent"),
    ("message", "duplicate-heartbeat", 1, 1, "no BrokerHeartbeatRequest crosses the network"),
    ("admin", "reassign-cancel", 1, 1, "nowhere to move"),
    ("admin", "reassign-all", 1, 1, "nowhere to move"),
])
def test_a_hand_written_fault_the_layout_leaves_nothing_to_do_is_refused(
        kind: str, shape: str, brokers: int, rf: int, why: str) -> None:
    schedule = Schedule((Fault(0, kind, shape, 1.0, 2.0, 1),), 10.0)
    nemeses = make_nemeses(sim_config(brokers, rf, "partition,message,admin"))
    [problem] = refusals("sim", schedule, nemeses, brokers, 6.0, 10.0, rf)
    assert problem.startswith(f"fault 0 ({kind}:{shape}): ") and why in problem, problem
    assert refusals("sim", schedule, nemeses, 3, 6.0, 10.0, 3) == []  # on three brokers of three replicas


@pytest.mark.parametrize(("kind", "shape", "refused"), [
    ("partition", "isolate-one", True), ("message", "drop-produce-response", True), ("clock", "strobe", True),
    ("disk", "chmod", True), ("pause", "random-short", True), ("stall", "controller", True),
    ("failover", "lag-successor", True), ("failover", "cut-third-from-successor", True),
    # Acts done once: a crash, a power loss, an expiry, an admin request take effect at any length.
    ("kill", "leader", False), ("power", "random", False), ("session", "leader", False),
    ("admin", "preferred-election", False), ("failover", "kill-leader", False), ("failover", "expire-leader", False),
])
def test_a_fault_held_for_no_time_is_refused_and_an_act_is_not(kind: str, shape: str, refused: bool) -> None:
    nemeses = make_nemeses(sim_config(3, 3, ",".join(k for k in ALL_KINDS if k != "upgrade")))
    problems = refusals("sim", Schedule((Fault(4, kind, shape, 1.0, 0.0, 1),), 10.0), nemeses, 3, 6.0, 10.0, 3)
    assert problems == ([f"fault 4 ({kind}:{shape}): a duration of 0 s heals it as it starts, so it does nothing"]
                        if refused else [])


@pytest.mark.parametrize("duration", [5e-324, 1e-300, 1e-17, 9.99e-10])
@pytest.mark.parametrize(("kind", "shape", "refused"), [
    ("partition", "isolate-one", True), ("pause", "random-short", True), ("message", "drop-fetch-request", True),
    ("clock", "bump-forward", True), ("kill", "leader", False), ("session", "leader", False),
])
def test_a_fault_held_for_less_than_a_nanosecond_is_refused_as_one_held_for_none(
        kind: str, shape: str, refused: bool, duration: float) -> None:
    """Below the history's nanosecond a held fault starts and heals at one instant (5e-324 s
    added to a start of 2 s is 2 s): a pause so long was run and counted as having taken
    effect, though a duration of 0 s is refused for doing nothing."""
    nemeses = make_nemeses(sim_config(3, 3, ",".join(k for k in ALL_KINDS if k != "upgrade")))
    problems = refusals("sim", Schedule((Fault(4, kind, shape, 2.0, duration, 1),), 10.0), nemeses, 3, 6.0, 10.0, 3)
    assert problems == ([f"fault 4 ({kind}:{shape}): a duration of {duration:g} s heals it as it starts, so it "
                         "does nothing (the history counts time in nanoseconds)"] if refused else [])
    held = Schedule((Fault(4, kind, shape, 2.0, 1e-9, 1),), 10.0)  # a nanosecond: in force for one
    assert refusals("sim", held, nemeses, 3, 6.0, 10.0, 3) == []
