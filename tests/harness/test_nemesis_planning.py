"""Nemeses plan: who a fault hits and what happens to it, a pure function of seed and snapshot."""

from __future__ import annotations

import itertools
import random

import pytest
from cluster_fixtures import FakeCluster, view_of

from floodmark.harness.config import ALL_KINDS, make_config
from floodmark.harness.faults import (
    ClockSkew,
    ClockStrobe,
    DiskFault,
    MessageFault,
    NetworkCut,
    ProcessCrash,
    ProcessPause,
    SessionExpiry,
)
from floodmark.nemesis.base import NemesisError
from floodmark.nemesis.clock import MAX_BUMP, RATES, ClockNemesis
from floodmark.nemesis.compose import KINDS, Composite
from floodmark.nemesis.disk import DiskNemesis
from floodmark.nemesis.kill import KillNemesis, PowerNemesis
from floodmark.nemesis.message import MESSAGES, MessageNemesis, messages_sent
from floodmark.nemesis.partition import (
    PartitionNemesis,
    as_plan,
    bridge,
    cut_between,
    grudge_for,
    isolate,
    majorities_ring,
)
from floodmark.nemesis.pause import LONG, SHORT, PauseNemesis
from floodmark.nemesis.session import SessionNemesis
from floodmark.run.assemble import make_nemeses


def hears(grudge: dict[str, set[str]], a: str, b: str) -> bool:
    return b not in grudge.get(a, set())


def test_cut_between_is_symmetric_and_total() -> None:
    grudge = cut_between([{"a"}, {"b", "c"}])
    assert grudge == {"a": {"b", "c"}, "b": {"a"}, "c": {"a"}}
    assert isolate("b", ["a", "b", "c"]) == {"b": {"a", "c"}, "a": {"b"}, "c": {"b"}}


@pytest.mark.parametrize("n", [4, 5, 6, 7, 10])
def test_majorities_ring_gives_each_node_a_different_majority(n: int) -> None:
    nodes = [f"x{i}" for i in range(n)]
    grudge = majorities_ring(nodes)
    views = []
    for node in nodes:
        visible = frozenset(other for other in nodes if hears(grudge, node, other))
        assert len(visible) > n // 2, f"{node} sees only {sorted(visible)}"
        assert len(visible) < n, f"{node} sees everyone: no partition"
        views.append(visible)
    assert len(set(views)) == n
    for a, b in itertools.permutations(nodes, 2):
        assert hears(grudge, a, b) == hears(grudge, b, a)


def test_bridge_node_hears_both_halves_which_do_not_hear_each_other() -> None:
    grudge = bridge(["a", "b", "c", "d", "e"])
    assert "c" not in grudge
    assert not hears(grudge, "a", "d") and not hears(grudge, "e", "b")
    assert hears(grudge, "a", "b") and hears(grudge, "a", "c") and hears(grudge, "e", "c")


def test_a_plan_lists_grudges_in_natural_order_and_its_links() -> None:
    plan = as_plan({"n10": {"n2", "zk"}, "n2": {"n10"}, "n3": set()})
    assert plan.drops == (("n2", ("n10",)), ("n10", ("n2", "zk")))
    assert sorted(plan.links()) == [("n10", "n2"), ("n2", "n10"), ("zk", "n10")]
    assert plan.describe() == {"drops": {"n2": ["n10"], "n10": ["n2", "zk"]}}


def test_isolate_controller_targets_the_controller_from_the_snapshot() -> None:
    grudge, how = grudge_for(random.Random(1), view_of(FakeCluster(), controller=2), "isolate-controller")
    assert how["node"] == "n2" and how["target"] == "controller"
    assert grudge["n2"] == {"zk", "n1", "n3"}


def test_isolate_leader_targets_the_partition_leader() -> None:
    grudge, how = grudge_for(random.Random(1), view_of(FakeCluster(), 2, {("t0", 0): 3}), "isolate-leader")
    assert how["node"] == "n3" and how["partition"] == ["t0", 0]
    assert grudge["n3"] == {"zk", "n1", "n2"}


def test_a_missing_role_falls_back_to_a_random_broker_and_says_so() -> None:
    plan, how = KillNemesis().plan(random.Random(1), view_of(FakeCluster()), "controller", 5.0)
    assert "fallback" in how and isinstance(plan, ProcessCrash) and plan.node == how["node"]


def test_controller_cut_severs_one_broker_from_the_controller_only() -> None:
    grudge, how = grudge_for(random.Random(5), view_of(FakeCluster(5), controller=2), "controller-cut")
    victim = how["victim"]
    assert victim != "n2"
    assert grudge == {victim: {"n2"}, "n2": {victim}}


def test_leader_controller_cut_severs_a_partition_leader_from_the_controller_only() -> None:
    leaders = {("t0", 0): 2, ("t0", 1): 3, ("t0", 2): 1}
    for seed in range(10):
        grudge, how = grudge_for(random.Random(seed), view_of(FakeCluster(), 2, leaders), "leader-controller-cut")
        assert how["controller"] == "n2" and how["partition"] != ["t0", 0], "never a partition it leads"
        assert how["leader"] == f"n{leaders[tuple(how['partition'])]}"
        assert grudge == {how["leader"]: {"n2"}, "n2": {how["leader"]}}


def test_leader_controller_cut_without_a_leader_apart_from_the_controller_cuts_nothing() -> None:
    grudge, how = grudge_for(random.Random(1), view_of(FakeCluster(), 2, {("t0", 0): 2}), "leader-controller-cut")
    assert grudge == {} and "other than the controller" in how["skipped"]
    grudge, how = grudge_for(random.Random(1), view_of(FakeCluster(), None, {("t0", 0): 2}), "leader-controller-cut")
    assert grudge == {} and "no controller" in how["skipped"]


def test_follower_deaf_stops_one_follower_hearing_its_leader_one_way() -> None:
    view = view_of(FakeCluster(5), 1, {("t0", 0): 2})  # replicas of t0/0: brokers 1, 2, 3
    deaf = set()
    for seed in range(20):
        grudge, how = grudge_for(random.Random(seed), view, "follower-deaf")
        (follower,) = how["deaf"]
        assert how["leader"] == "n2" and follower in ("n1", "n3")
        assert grudge == {follower: {"n2"}}, "the leader still hears it, and nobody else is cut"
        deaf.add(follower)
    assert deaf == {"n1", "n3"}, "either follower may be the one"


def test_followers_deaf_stops_every_follower_hearing_its_leader_one_way() -> None:
    grudge, how = grudge_for(random.Random(3), view_of(FakeCluster(5), 1, {("t0", 0): 2}), "followers-deaf")
    assert how["leader"] == "n2" and how["deaf"] == ["n1", "n3"]
    assert grudge == {"n1": {"n2"}, "n3": {"n2"}}
    assert "n2" not in grudge and "zk" not in grudge, "the leader hears its followers and ZooKeeper"


def test_shapes_aimed_at_a_partition_need_a_known_leader() -> None:
    for shape in ("follower-deaf", "followers-deaf"):
        grudge, how = grudge_for(random.Random(1), view_of(FakeCluster(), 1), shape)
        assert grudge == {} and "known leader" in how["skipped"]


def test_named_only_shapes_are_planned_when_named_and_never_drawn() -> None:
    named = {"partition": ("leader-controller-cut", "follower-deaf", "followers-deaf"), "admin": ("reassign-all",)}
    composite = Composite(ALL_KINDS)
    view = view_of(FakeCluster(5), controller=1, leaders={("t0", 0): 2})
    for kind, shapes in named.items():
        assert not set(shapes) & set(composite.shapes()[kind]), "random schedules draw only the others"
        for shape in shapes:
            plan, choice = composite.plan(kind, random.Random(42), view, shape, 5.0)
            assert choice["shape"] == shape and plan.describe()
            assert composite.plan(kind, random.Random(42), view, shape, 5.0) == (plan, choice)
    with pytest.raises(NemesisError, match="unknown shape"):
        composite.plan("partition", random.Random(1), view, "reassign-all", 5.0)


def test_zookeeper_cut_involves_zookeeper_only() -> None:
    grudge, how = grudge_for(random.Random(3), view_of(FakeCluster(5)), "zookeeper-cut")
    assert grudge["zk"] == set(how["brokers"])
    for broker in how["brokers"]:
        assert grudge[broker] == {"zk"}


def test_one_way_cut_grudges_on_one_side_only() -> None:
    grudge, how = grudge_for(random.Random(4), view_of(FakeCluster()), "one-way")
    assert list(grudge) == [how["deaf"]]
    assert grudge[how["deaf"]] == set(how["unheard"])


def test_planning_is_deterministic_for_a_seed() -> None:
    view = view_of(FakeCluster(5), controller=1, leaders={("t0", 0): 2})
    composite = Composite(ALL_KINDS)
    for kind in composite.kinds:
        for shape in composite.get(kind).every_shape:
            first = composite.plan(kind, random.Random(42), view, shape, 5.0)
            assert composite.plan(kind, random.Random(42), view, shape, 5.0) == first, (kind, shape)


def test_every_kind_plans_every_shape_aimed_at_nodes_of_the_cluster() -> None:
    cluster = FakeCluster(5)
    view = view_of(cluster, controller=1, leaders={("t0", 0): 2})
    names = {n.name for n in cluster.nodes}
    composite = Composite(ALL_KINDS)
    assert set(composite.shapes()) == set(ALL_KINDS) == set(KINDS)
    for kind, shapes in composite.shapes().items():
        assert shapes, kind
        for shape in composite.get(kind).every_shape:  # a failover's steps, not its patterns
            plan, choice = composite.plan(kind, random.Random(0), view, shape, 5.0)
            assert plan.kind in (kind, "kill", choice.get("acts_as")), (kind, plan)
            assert choice["shape"] == shape
            assert set(plan.nodes) <= names, (kind, shape, plan)
            assert plan.describe()


def test_pauses_last_on_the_promised_side_of_the_session_timeout_by_construction() -> None:
    nemesis = PauseNemesis()
    for seed in range(20):
        rng = random.Random(seed)
        short = nemesis.duration("random-short", 30.0, 6.0, rng)
        long = nemesis.duration("controller-long", 1.0, 6.0, rng)
        assert SHORT[0] * 6.0 <= short <= SHORT[1] * 6.0 < 6.0
        assert 6.0 < LONG[0] * 6.0 <= long <= LONG[1] * 6.0
    plan, how = nemesis.plan(random.Random(9), view_of(FakeCluster(), controller=3), "controller-long", 12.5)
    assert plan == ProcessPause("n3", 12.5, 6.0) and how["longer_than_session"]


def test_clock_plans_record_offsets_and_rates() -> None:
    view = view_of(FakeCluster(5))
    bump, choice = ClockNemesis().plan(random.Random(8), view, "bump-backward", 5.0)
    assert isinstance(bump, ClockSkew) and [n for n, _, _ in bump.clocks] == choice["nodes"]
    assert all(-MAX_BUMP <= offset <= -1.0 and rate == 1.0 for _, offset, rate in bump.clocks)
    rate, _ = ClockNemesis().plan(random.Random(8), view, "rate", 5.0)
    assert isinstance(rate, ClockSkew) and all(o == 0.0 and r in RATES for _, o, r in rate.clocks)
    strobe, _ = ClockNemesis().plan(random.Random(8), view, "strobe", 5.0)
    assert isinstance(strobe, ClockStrobe) and 1.0 <= abs(strobe.delta) <= MAX_BUMP


def test_disk_kill_power_session_and_message_plans() -> None:
    view = view_of(FakeCluster(), controller=2, leaders={("t0", 0): 3})
    disk, _ = DiskNemesis().plan(random.Random(1), view, "replace-with-file", 5.0)
    assert isinstance(disk, DiskFault) and disk.directory in view.slot(disk.node).log_dirs
    assert disk.mode == "replace-with-file"
    assert KillNemesis().plan(random.Random(1), view, "clean-restart", 5.0)[0].mode == "terminate"
    assert PowerNemesis().plan(random.Random(1), view, "controller", 5.0)[0] == ProcessCrash("n2", "power-loss")
    assert SessionNemesis().plan(random.Random(1), view, "leader", 5.0)[0] == SessionExpiry("n3")
    message, how = MessageNemesis().plan(random.Random(1), view, "delay-leader-and-isr", 5.0)
    assert isinstance(message, MessageFault) and message.message == MESSAGES["leader-and-isr"]
    assert message.action == "delay" and 0 < message.delay <= 2 * view.session_timeout
    assert message.destination == how["node"]
    assert PowerNemesis.simulated_only and not KillNemesis.simulated_only


def test_unknown_shapes_and_kinds_are_clear_errors() -> None:
    with pytest.raises(NemesisError, match="unknown shape 'moat'"):
        PartitionNemesis().plan(random.Random(1), view_of(FakeCluster()), "moat", 5.0)
    with pytest.raises(NemesisError, match="no 'clock' nemesis"):
        Composite(["kill"]).get("clock")
    with pytest.raises(NemesisError, match="unknown fault kind 'flood'"):
        Composite(["flood"])


def test_a_plan_is_a_frozen_value() -> None:
    plan = NetworkCut((("n1", ("zk",)),))
    with pytest.raises(AttributeError):
        plan.drops = ()  # type: ignore[misc]
    assert {plan: 1}[NetworkCut((("n1", ("zk",)),))] == 1


def test_only_power_losses_wait_for_the_last_victim_to_recover() -> None:
    # Its old session must expire (one timeout, from when the power went), then it catches up.
    assert PowerNemesis().recovery(8.0, ("random",)) > 2 * 8.0
    assert Composite(["power", "kill"]).recovery("power", 4.0, ("leader",)) == PowerNemesis().recovery(4.0, ("leader",))
    # An upgrade happens once a run (see test_upgrade_fault); every other kind needs no recovery.
    # A failover group that powers a leader off shares the power losses' recovery; one that
    # only kills, expires sessions or loses messages needs none.
    powered = ("lag-successor", "power-leader")
    assert Composite(["failover"]).recovery("failover", 4.0, powered) == PowerNemesis().recovery(4.0, ("leader",))
    assert Composite(["failover"]).recovery("failover", 4.0, ("lag-third", "kill-leader")) == 0.0
    assert Composite(["failover"]).recovers_as("failover") == "power"
    assert all(Composite(KINDS).recovery(kind, 8.0, Composite(KINDS).get(kind).shapes) == 0.0 for kind in KINDS
               if kind not in ("power", "upgrade", "failover"))


def test_message_faults_aim_only_at_messages_the_cluster_sends() -> None:
    legacy = MessageNemesis(messages_sent(heartbeats=False, isr_change_requests=False))
    assert "drop-heartbeat" not in legacy.shapes and "delay-isr-change-request" not in legacy.shapes
    assert MessageNemesis().shapes == MessageNemesis(messages_sent(heartbeats=True)).shapes
    assert "delay-isr-change-request" not in MessageNemesis().shapes
    kip_343 = Composite(["message"], messages_sent(heartbeats=True, isr_change_requests=True))
    plan, _ = kip_343.plan("message", random.Random(1), view_of(FakeCluster(3), 1), "delay-isr-change-request", 5.0)
    assert isinstance(plan, MessageFault) and plan.message == "IsrChangeRequest" and plan.delay > 0
    with pytest.raises(NemesisError, match="unknown shape 'delay-isr-change-request'"):
        Composite(["message"]).plan("message", random.Random(1), view_of(FakeCluster(3), 1),
                                    "delay-isr-change-request", 5.0)


def test_no_offsets_for_leader_epoch_faults_where_no_broker_asks_for_epoch_ends() -> None:
    # Brokers at truncate-on-fetch truncate on the fetch's answer and never send
    # OffsetsForLeaderEpoch, so its answers are nothing to aim at; an upgrade from there is
    # impossible (it targets kip-343), so every broker of such a run is one of them.
    def shapes(protocol: str) -> tuple[str, ...]:
        config = make_config({"cluster": "sim", "nemesis": ["message"], "inter_broker_protocol": protocol})
        return make_nemeses(config).nemeses["message"].shapes
    assert "drop-epoch-response" in shapes("kip-343") and "drop-epoch-response" in shapes("heartbeats")
    at_fetch = shapes("truncate-on-fetch")
    assert "drop-epoch-response" not in at_fetch and "delay-isr-change-request" in at_fetch
    assert not [s for s in at_fetch if s.endswith("epoch-response")]
