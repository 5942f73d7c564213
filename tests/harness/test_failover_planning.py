"""Failover groups: patterns drawn and expanded into timed steps, each aimed at one partition's
roles, deterministic per seed, and refused by the real backends before a run starts."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from cluster_fixtures import FakeCluster, view_of

from floodmark.backends import node_faults
from floodmark.cli import main
from floodmark.harness.config import ConfigError, make_config
from floodmark.harness.faults import (
    ClusterView,
    MessageFault,
    NetworkCut,
    ProcessCrash,
    SessionExpiry,
    ThreadStall,
)
from floodmark.harness.schedule import Fault, Schedule, generate
from floodmark.harness.seeds import Seeds
from floodmark.nemesis.base import Layout, NemesisError
from floodmark.nemesis.compose import Composite
from floodmark.nemesis.failover import (
    PATTERN_ROLES,
    PATTERNS,
    REPLICA_LAG_TIME,
    ROLES,
    STEP_ROLES,
    STEPS,
    FailoverNemesis,
)
from floodmark.nemesis.kill import PowerNemesis
from floodmark.nemesis.message import messages_sent
from floodmark.run import swarm
from floodmark.run.assemble import refusals


def schedule_for(seed: int, kinds: tuple[str, ...] = ("kill", "failover"), session: float = 6.0,
                 time_limit: float = 60.0) -> Schedule:
    composite = Composite(kinds, messages_sent(isr_change_requests=True))
    return generate(
        Seeds(seed).schedule(), composite.kinds, composite.shapes(), time_limit, (2.0, 8.0), (1.0, 4.0),
        lambda kind, shape, drawn, rng: composite.duration(kind, shape, drawn, session, rng),
        lambda kind, shapes: composite.recovery(kind, session, shapes),
        lambda kind, shape, rng: composite.group(kind, shape, session, rng),
        composite.recovers_as, composite.weights())


def test_every_pattern_expands_into_known_steps_in_time_order() -> None:
    nemesis = FailoverNemesis()
    for pattern in PATTERNS:
        for seed in range(30):
            steps = nemesis.group(pattern, 6.0, random.Random(seed))
            assert steps == nemesis.group(pattern, 6.0, random.Random(seed))  # a function of the seed
            assert len(steps) >= 2, pattern
            assert all(step in STEPS and at >= 0.0 and duration > 0.0 for step, at, duration in steps)
            assert [at for _, at, _ in steps] == sorted(at for _, at, _ in steps)
            assert sum(step == "power-leader" for step, _, _ in steps) <= 1  # the contract's bound
    with pytest.raises(NemesisError, match="unknown pattern"):
        nemesis.group("kill-leader", 6.0, random.Random(1))


def test_the_hand_written_patterns_are_drawn_with_their_timing() -> None:
    nemesis = FailoverNemesis()
    # KAFKA-6361: the second leader dies after the controller learns of the first (one session
    # timeout) and within the lag time of its election; the cut lasts past it.
    for seed in range(20):
        steps = nemesis.group("two-leaders-lost", 6.0, random.Random(seed))
        kills = [at for step, at, _ in steps if step == "kill-leader"]
        cut = next((at, d) for step, at, d in steps if step == "cut-third-from-successor")
        assert len(kills) == 2 and 6.0 < kills[1] - kills[0] < 6.0 + REPLICA_LAG_TIME
        assert cut[0] < kills[0] and cut[0] + cut[1] > kills[1]
    # KAFKA-7128: the leader dies after the lagging third replica left the ISR.
    for seed in range(20):
        steps = dict((step, (at, d)) for step, at, d in nemesis.group("lagging-behind-shrink", 6.0,
                                                                      random.Random(seed)))
        assert steps["kill-leader"][0] > REPLICA_LAG_TIME
        assert steps["lag-third"][0] + steps["lag-third"][1] > steps["kill-leader"][0]
        assert steps["lag-successor"][0] < steps["kill-leader"][0]


def test_steps_aim_at_the_partitions_roles_read_when_they_start() -> None:
    nemesis = FailoverNemesis()
    view = view_of(FakeCluster(4), controller=1, leaders={("t0", 0): 2})  # replicas 1, 2, 3
    plan, how = nemesis.plan(random.Random(1), view, "kill-leader", 5.0)
    assert plan == ProcessCrash("n2", "kill") and how["acts_as"] == "kill"
    assert how["roles"] == {"leader": "n2", "successor": "n1", "third": "n3"}  # assignment order
    assert nemesis.plan(random.Random(1), view, "power-leader", 5.0)[0] == ProcessCrash("n2", "power-loss")
    assert nemesis.plan(random.Random(1), view, "expire-leader", 5.0)[0] == SessionExpiry("n2")
    assert nemesis.plan(random.Random(1), view, "lag-successor", 5.0)[0] == MessageFault(
        "ReplicaFetchResponse", "drop", destination="n1")
    assert nemesis.plan(random.Random(1), view, "lose-leader-and-isr-third", 5.0)[0] == MessageFault(
        "LeaderAndIsrRequest", "drop", destination="n3")
    assert nemesis.plan(random.Random(1), view, "cut-third-from-successor", 5.0)[0] == NetworkCut(
        (("n3", ("n1",)),))
    stall, how = nemesis.plan(random.Random(1), view, "stall-controller", 5.0)
    assert stall == ThreadStall("n1", "controller", expire_session=True) and how["acts_as"] == "stall"
    # Mid-election (no leader): the roles follow assignment order, and the choice says so.
    plan, how = nemesis.plan(random.Random(1), view_of(FakeCluster(4)), "kill-leader", 5.0)
    assert plan == ProcessCrash("n1", "kill") and "fallback" in how
    with pytest.raises(NemesisError, match="unknown shape 'two-leaders-lost'"):
        nemesis.plan(random.Random(1), view, "two-leaders-lost", 5.0)  # a pattern is not a step


def two_replica_view() -> ClusterView:
    """Four brokers, one partition of replicas 3, 2 led by 2: brokers 1 and 4 are no replicas."""
    view = view_of(FakeCluster(4), controller=1, leaders={("t0", 0): 2})
    return dataclasses.replace(view, replicas={("t0", 0): (3, 2)})


def test_roles_are_only_replicas_of_the_aimed_partition() -> None:
    # Replication factor 2 filled the third role from a broker outside the partition: lag-third
    # dropped fetch responses to a broker that fetched nothing of it ("no message matched").
    nemesis = FailoverNemesis(messages_sent(isr_change_requests=True))
    for step, role in STEP_ROLES.items():
        if role == "third":
            with pytest.raises(NemesisError, match=f"{step} aims at the third replica of t0/0, which has 2 known "
                                                   "replicas \\(n2, n3\\)"):
                nemesis.plan(random.Random(1), two_replica_view(), step, 5.0)
            continue
        plan, how = nemesis.plan(random.Random(1), two_replica_view(), step, 5.0)
        assert how["roles"] == {"leader": "n2", "successor": "n3"}  # no third: the choice says so
        assert not {"n1", "n4"} & set(plan.nodes) or step == "stall-controller", (step, plan)
    assert nemesis.plan(random.Random(1), two_replica_view(), "lag-successor", 5.0)[0] == MessageFault(
        "ReplicaFetchResponse", "drop", destination="n3")
    # Replicas not known (ZooKeeper did not answer): no role, rather than brokers by id.
    unknown = dataclasses.replace(two_replica_view(), replicas={})
    with pytest.raises(NemesisError, match="kill-leader aims at the leader replica of t0/0, which has 0 known"):
        nemesis.plan(random.Random(1), unknown, "kill-leader", 5.0)
    plan, how = nemesis.plan(random.Random(1), unknown, "stall-controller", 5.0)
    assert plan == ThreadStall("n1", "controller", expire_session=True) and "not known" in how["fallback"]


def test_a_pattern_declares_the_last_role_its_steps_aim_at() -> None:
    nemesis = FailoverNemesis(messages_sent(isr_change_requests=True))
    for pattern in PATTERNS:
        aimed = {STEP_ROLES[step] for seed in range(200)
                 for step, _, _ in nemesis.group(pattern, 6.0, random.Random(seed))} - {None}
        assert max(aimed, key=ROLES.index) == PATTERN_ROLES.get(pattern, "third"), pattern


def test_steps_and_patterns_aimed_at_a_role_the_layout_lacks_are_refused_or_never_drawn() -> None:
    nemesis = FailoverNemesis(messages_sent(isr_change_requests=True))
    assert nemesis.drawable(Layout(3, 3)) == nemesis.shapes  # the schedules seeds always drew
    assert nemesis.drawable(Layout(5, 2)) == ("stalled-controller",)
    assert nemesis.drawable(Layout(3, 1)) == ("stalled-controller",)
    assert nemesis.layout_problem("lag-third", Layout(3, 2)) == (
        "aims at a partition's third replica: with replication factor 2 no partition has one")
    assert nemesis.layout_problem("lone-survivor", Layout(4, 2)) == nemesis.layout_problem("lag-third", Layout(4, 2))
    assert "successor replica: with replication factor 1" in (nemesis.layout_problem("lag-successor", Layout(3, 1)) or "")
    assert "no IsrChangeRequest is ever sent" in (nemesis.layout_problem("hold-isr-changes", Layout(3, 1)) or "")
    assert [step for step in STEPS if nemesis.layout_problem(step, Layout(3, 2))] == [
        "lag-third", "lose-leader-and-isr-third", "cut-third-from-successor"]
    composite = Composite(("kill", "failover"), messages_sent(isr_change_requests=True))
    schedule = Schedule(tuple(Fault(n, "failover", step, 1.0, 2.0, 7) for n, step in enumerate(STEPS)), 10.0)
    assert [p.split(":")[1].split(")")[0] for p in refusals("sim", schedule, composite, 3, 6.0, 10.0, 2)] == [
        "lag-third", "lose-leader-and-isr-third", "cut-third-from-successor"]
    assert refusals("sim", schedule, composite, 3, 6.0, 10.0, 3) == []


def test_a_run_on_two_replicas_aims_every_step_at_a_replica(tmp_path: Path) -> None:
    # Seed 5 drew lone-survivor here: its lag-third dropped nothing ("no message matched its
    # rule"), aimed at n1, no replica of t0/1, and the verdict read as if it had been tested.
    store = tmp_path / "store"
    assert main(["run", "--cluster", "sim", "--seed", "5", "--nemesis", "failover", "--nodes", "3",
                 "--replication-factor", "2", "--min-insync-replicas", "1", "--rate", "50", "--concurrency", "4",
                 "--topics", "1", "--partitions", "2", "--time-limit", "60", "--store", str(store)]) == 0
    [run] = (store / "queue-failover-default").iterdir()
    done = json.loads((run / "schedule.json").read_text())["executed"]
    assert done and all(e["error"] is None for e in done)
    assert {e["shape"] for e in done} == {"stall-controller", "expire-other-leader"}  # stalled-controller's steps
    assert all(set(e["start_result"]["roles"]) == {"leader", "successor"} for e in done)


def test_a_stalled_controller_group_expires_a_leader_other_than_the_controller() -> None:
    # Its expiry aimed at any partition's leader; where the controller led that partition, the
    # expiry only resigned the stuck controller and the stall never struck (on two brokers, 3
    # of seeds 1-2's 4 stalls: "the thread reached no safepoint while the stall was armed").
    nemesis = FailoverNemesis()
    leaders = {("t0", p): 1 + p % 2 for p in range(6)}  # the controller, broker 1, leads half
    view = view_of(FakeCluster(3), controller=1, leaders=leaders)
    for seed in range(30):
        plan, how = nemesis.plan(random.Random(seed), view, "expire-other-leader", 0.5)
        assert plan == SessionExpiry("n2") and leaders[tuple(how["partition"])] == 2  # type: ignore[index]
        _, stall_how = nemesis.plan(random.Random(seed), view, "stall-controller", 3.0)
        assert stall_how["partition"] == how["partition"]  # one group, one partition
    alone = view_of(FakeCluster(3), controller=1, leaders={("t0", 0): 1})  # no other: as before
    assert nemesis.plan(random.Random(1), alone, "expire-other-leader", 0.5)[0] == SessionExpiry("n1")
    for seed in range(20):
        assert [step for step, _, _ in nemesis.group("stalled-controller", 6.0, random.Random(seed))] == [
            "stall-controller", "expire-other-leader"]


def test_two_brokers_fail_over_a_stalled_controller_and_every_stall_strikes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for seed in (1, 2):
        assert main(["run", "--cluster", "sim", "--seed", str(seed), "--nemesis", "failover", "--nodes", "2",
                     "--replication-factor", "2", "--min-insync-replicas", "1", "--time-limit", "40",
                     "--store", str(store)]) == 0
    executed = [e for run in (store / "queue-failover-default").iterdir()
                for e in json.loads((run / "schedule.json").read_text())["executed"]]
    stalls = [e for e in executed if e["shape"] == "stall-controller"]
    assert len(stalls) >= 4 and all(e["error"] is None for e in executed)
    assert all(e["stop_result"].get("struck_at") is not None for e in stalls), stalls


def test_a_groups_steps_share_a_seed_and_so_aim_at_one_partition() -> None:
    leaders = {("t0", p): 1 + p % 4 for p in range(4)}
    view = view_of(FakeCluster(4), controller=1, leaders=leaders)
    nemesis = FailoverNemesis()
    groups = 0
    for seed in range(40):
        by_seed: dict[int, set[tuple[str, int]]] = {}
        for fault in schedule_for(seed).faults:
            if fault.kind == "failover":
                _, how = nemesis.plan(random.Random(fault.seed), view, fault.shape, fault.duration)
                by_seed.setdefault(fault.seed, set()).add(tuple(how["partition"]))  # type: ignore[arg-type]
        groups += len(by_seed)
        assert all(len(partitions) == 1 for partitions in by_seed.values())
    assert groups >= 40


def test_schedules_with_groups_are_deterministic_dense_and_within_the_time_limit() -> None:
    drawn: Counter[str] = Counter()
    for seed in range(60):
        schedule = schedule_for(seed)
        assert schedule == schedule_for(seed)
        assert [f.number for f in schedule.faults] == list(range(len(schedule.faults)))
        assert [f.start for f in schedule.faults] == sorted(f.start for f in schedule.faults)
        assert all(f.end <= schedule.time_limit + 1e-6 for f in schedule.faults)
        steps = [f.shape for f in schedule.faults if f.kind == "failover"]
        assert set(steps) <= set(STEPS)
        drawn.update(steps)
    assert set(drawn) == set(STEPS)  # every step (so every pattern's) is drawn somewhere


def test_a_group_that_powers_off_waits_for_power_losses_and_they_for_it() -> None:
    recovery = PowerNemesis().recovery(6.0, ("random",))
    sooner = 0  # groups that start within a power loss's recovery of a group without one
    for seed in range(40):
        faults = schedule_for(seed, ("power", "failover")).faults
        groups: dict[int, list[Fault]] = {}
        for fault in faults:
            if fault.kind == "failover":
                groups.setdefault(fault.seed, []).append(fault)
        # (start, end, whether a broker lost power), for each group and each power loss
        spans = sorted([(min(f.start for f in g), max(f.end for f in g), any(f.shape == "power-leader" for f in g))
                        for g in groups.values()] + [(f.start, f.end, True) for f in faults if f.kind == "power"])
        for (_, end, powered), (start, _, _) in itertools.pairwise(spans):
            if powered:  # nothing of either kind starts before the victim is back
                assert start >= end + recovery - 1e-6, (seed, spans)
            else:
                sooner += start < end + recovery
    assert sooner > 5  # kills and expiries lose no synced write: no wait after them


def test_tests_without_groups_keep_their_schedules() -> None:
    # Weights and groups change nothing for a test without a weighted or grouping kind.
    composite = Composite(("kill", "partition"))
    for seed in range(10):
        plain = generate(Seeds(seed).schedule(), composite.kinds, composite.shapes(), 60.0, (2.0, 8.0), (1.0, 4.0))
        assert plain == generate(
            Seeds(seed).schedule(), composite.kinds, composite.shapes(), 60.0, (2.0, 8.0), (1.0, 4.0), None, None,
            lambda kind, shape, rng: composite.group(kind, shape, 6.0, rng), composite.recovers_as,
            composite.weights())


def test_real_backends_refuse_failover_before_the_run() -> None:
    assert "only the simulator" in (node_faults.refuses("failover", "kill-leader") or "")
    with pytest.raises(ConfigError, match="failover"):
        make_config({"cluster": "local", "nemesis": ["kill", "failover"]})
    assert "failover" not in make_config({"cluster": "sim"}).nemesis  # "all" keeps its schedules
    schedule = schedule_for(3)
    problems = refusals("docker", schedule, Composite(("kill", "failover")))
    assert any("failover" in p and "only the simulator" in p for p in problems)
    assert refusals("sim", schedule, Composite(("kill", "failover"))) == []


def test_the_swarm_draws_failover_last_for_the_tests_it_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(swarm, "FOCUS_SHARE", 0.0)  # (groups alone: tests/run/exploration/test_swarm.py)
    seeds = range(1, 301)
    with_groups = [swarm.swarm_config(seed) for seed in seeds]
    expected = swarm.FAILOVER_SHARE
    monkeypatch.setattr(swarm, "FAILOVER_SHARE", 0.0)
    without = [swarm.swarm_config(seed) for seed in seeds]
    fitting = 0
    for grouped, plain in zip(with_groups, without, strict=True):
        # Every earlier draw of the seed is what it was without failover groups.
        assert dataclasses.replace(grouped, nemesis=plain.nemesis) == plain
        assert tuple(k for k in grouped.nemesis if k != "failover") == plain.nemesis
        fits = plain.replication_factor == 3 and plain.zk_session_timeout < 18.0
        fitting += fits
        assert fits or "failover" not in grouped.nemesis
    share = sum("failover" in c.nemesis for c in with_groups) / fitting
    assert abs(share - expected) < 0.08, share


def test_isr_change_requests_are_held_back_only_where_brokers_send_them() -> None:
    kip_343 = FailoverNemesis(messages_sent(isr_change_requests=True))
    held = [seed for seed in range(40)
            if "hold-isr-changes" in {step for step, _, _ in kip_343.group("lagging-follower", 6.0, random.Random(seed))}]
    assert 20 < len(held) < 36
    steps = kip_343.group("lagging-follower", 6.0, random.Random(held[0]))
    hold = next(s for s in steps if s[0] == "hold-isr-changes")
    assert hold[1] == 0.0 and hold[2] > max(at for _, at, _ in steps)  # held through the group
    legacy = FailoverNemesis(messages_sent(heartbeats=False))
    assert all("hold-isr-changes" not in {step for step, _, _ in legacy.group("lagging-follower", 6.0, random.Random(seed))}
               for seed in range(40))
    plan, _ = kip_343.plan(random.Random(1), view_of(FakeCluster(4), leaders={("t0", 0): 1}), "hold-isr-changes", 5.0)
    assert isinstance(plan, MessageFault) and plan.message == "IsrChangeRequest" and plan.action == "delay"
    assert 1.2 * 6.0 <= plan.delay <= 2.5 * 6.0 and plan.destination is None


def test_a_stale_proposal_is_always_held_back_where_brokers_send_them() -> None:
    # KIP-343's shape: the leader proposes an ISR without the lagging third, then loses its
    # session; the proposal must land after its successor leads, so it is always held back.
    kip_343 = FailoverNemesis(messages_sent(isr_change_requests=True))
    legacy = FailoverNemesis(messages_sent(isr_change_requests=False))
    for seed in range(20):
        steps = kip_343.group("stale-proposal", 6.0, random.Random(seed))
        assert {shape for shape, _, _ in steps} == {"lag-third", "hold-isr-changes", "expire-leader"}
        expire = next(at for shape, at, _ in steps if shape == "expire-leader")
        lag = next(duration for shape, _, duration in steps if shape == "lag-third")
        assert REPLICA_LAG_TIME + 1.0 < expire < lag  # once the leader has proposed, the third still lagging
        assert "hold-isr-changes" not in {s for s, _, _ in legacy.group("stale-proposal", 6.0, random.Random(seed))}
