"""Partitions: who drops whom for every shape, and real iptables cuts on both backends."""

from __future__ import annotations

import itertools
import random

import pytest
from cluster_fixtures import (
    BACKENDS,
    FakeCluster,
    FakeView,
    ask,
    can_connect,
    standin_cluster,
)

from floodmark.nemesis.base import NemesisContext
from floodmark.nemesis.partition import (
    PartitionNemesis,
    bridge,
    cut_between,
    floodmark_rules,
    isolate,
    majorities_ring,
)


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


def context(controller: int | None = 2, leader: int = 3) -> NemesisContext:
    return NemesisContext(view=FakeView(controller, {("t0", 0): leader}), partitions=[("t0", 0)])


def test_isolate_controller_targets_the_controller_from_zookeeper() -> None:
    grudge, how = PartitionNemesis().grudge_for(random.Random(1), FakeCluster(), context(2),
                                                "isolate-controller")
    assert how["node"] == "n2" and how["target"] == "controller"
    assert grudge["n2"] == {"zk", "n1", "n3"}


def test_isolate_leader_targets_the_partition_leader() -> None:
    grudge, how = PartitionNemesis().grudge_for(random.Random(1), FakeCluster(), context(2, 3),
                                                "isolate-leader")
    assert how["node"] == "n3" and how["partition"] == ["t0", 0]
    assert grudge["n3"] == {"zk", "n1", "n2"}


def test_controller_cut_severs_one_broker_from_the_controller_only() -> None:
    grudge, how = PartitionNemesis().grudge_for(random.Random(5), FakeCluster(5), context(2),
                                                "controller-cut")
    victim = how["victim"]
    assert victim != "n2"
    assert grudge == {victim: {"n2"}, "n2": {victim}}


def test_zookeeper_cut_involves_zookeeper_only() -> None:
    grudge, how = PartitionNemesis().grudge_for(random.Random(3), FakeCluster(5), context(),
                                                "zookeeper-cut")
    assert grudge["zk"] == set(how["brokers"])
    for broker in how["brokers"]:
        assert grudge[broker] == {"zk"}


def test_one_way_cut_has_rules_on_one_side_only() -> None:
    grudge, how = PartitionNemesis().grudge_for(random.Random(4), FakeCluster(), context(),
                                                "one-way")
    assert list(grudge) == [how["deaf"]]
    assert grudge[how["deaf"]] == set(how["unheard"])


def test_start_is_deterministic_for_a_seed_and_stop_deletes_exactly_what_it_added() -> None:
    actions = []
    for _ in range(2):
        cluster = FakeCluster(5)
        nemesis = PartitionNemesis()
        action = nemesis.start(random.Random(42), cluster, context(), "halves")
        actions.append(action)
        added = {n.name: [c for c, _ in n.commands] for n in cluster.nodes if n.commands}
        stopped = nemesis.stop(cluster, context())
        assert stopped["removed"] == action["rules"]
        for name, commands in added.items():
            deletes = [c for c, _ in cluster.node(name).commands if "-D" in c]
            assert [c[c.index("-A") + 1:] for c in commands] == [d[d.index("-D") + 1:] for d in deletes]
    assert actions[0] == actions[1]


def test_unknown_shape_is_a_clear_error() -> None:
    with pytest.raises(Exception, match="unknown shape 'moat'"):
        PartitionNemesis().start(random.Random(1), FakeCluster(), context(), "moat")


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request):  # type: ignore[no-untyped-def]
    with standin_cluster(request.param) as running:
        yield running


def connectivity(cluster) -> dict[tuple[str, str], bool]:  # type: ignore[no-untyped-def]
    return {(a.name, b.name): can_connect(a, b)
            for a, b in itertools.permutations(cluster.nodes, 2)}


def test_isolating_a_node_cuts_exactly_its_traffic_and_heals(cluster) -> None:  # type: ignore[no-untyped-def]
    nemesis = PartitionNemesis()
    ctx = NemesisContext(view=FakeView())
    assert all(connectivity(cluster).values())
    action = nemesis.start(random.Random(7), cluster, ctx, "isolate-one")
    isolated = action["node"]
    try:
        during = connectivity(cluster)
        for (a, b), ok in during.items():
            assert ok == (isolated not in (a, b)), f"{a}->{b} connected={ok} with {isolated} isolated"
        assert ask(cluster.node(isolated).address) is not None, "the harness must still reach it"
    finally:
        nemesis.stop(cluster, ctx)
    assert all(connectivity(cluster).values())
    assert all(floodmark_rules(node) == [] for node in cluster.nodes)


def test_zookeeper_cut_leaves_brokers_talking_to_each_other(cluster) -> None:  # type: ignore[no-untyped-def]
    nemesis = PartitionNemesis()
    ctx = NemesisContext(view=FakeView())
    action = nemesis.start(random.Random(11), cluster, ctx, "zookeeper-cut")
    try:
        cut = set(action["brokers"])
        during = connectivity(cluster)
        for (a, b), ok in during.items():
            severed = (a == "zk" and b in cut) or (b == "zk" and a in cut)
            assert ok == (not severed), f"{a}->{b} connected={ok}, cut={cut}"
    finally:
        nemesis.stop(cluster, ctx)


def test_heal_all_removes_rules_a_lost_nemesis_left(cluster) -> None:  # type: ignore[no-untyped-def]
    ctx = NemesisContext(view=FakeView())
    PartitionNemesis().start(random.Random(3), cluster, ctx, "halves")  # its stop never runs
    assert any(floodmark_rules(node) for node in cluster.nodes)
    healed = PartitionNemesis().heal_all(cluster, ctx)
    assert healed["removed"]
    assert all(floodmark_rules(node) == [] for node in cluster.nodes)
    assert all(connectivity(cluster).values())


def test_a_one_way_cut_puts_rules_only_on_the_deaf_node(cluster) -> None:  # type: ignore[no-untyped-def]
    nemesis = PartitionNemesis()
    ctx = NemesisContext(view=FakeView())
    action = nemesis.start(random.Random(12), cluster, ctx, "one-way")
    deaf, unheard = action["deaf"], set(action["unheard"])
    try:
        for node in cluster.nodes:
            rules = floodmark_rules(node)
            assert bool(rules) == (node.name == deaf), (node.name, rules)
        # iptables stores "-s a,b" as one rule per source.
        sources = {rule[rule.index("-s") + 1] for rule in floodmark_rules(cluster.node(deaf))}
        assert sources == {f"{cluster.node(n).ip}/32" for n in unheard}
        for (a, b), ok in connectivity(cluster).items():
            # TCP needs both directions, so a one-way drop stalls connections either way.
            involved = {a, b} & {deaf} and {a, b} & unheard
            assert ok == (not involved), f"{a}->{b} connected={ok}"
    finally:
        nemesis.stop(cluster, ctx)
    assert all(floodmark_rules(node) == [] for node in cluster.nodes)
