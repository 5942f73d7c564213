"""Network partitions: which nodes stop hearing which.

A partition is a *grudge*: for each node, the set of nodes whose packets it drops. The
grudge functions below build one from a shape; the plan (:class:`NetworkCut`) carries it to
the backend, which applies it as iptables rules inside the grudging nodes or as blocked links
in the simulated network. Only traffic between exactly the chosen nodes stops (the harness
still reaches everyone). A symmetric cut is a grudge both ways; a one-way cut is a grudge one
way (dst stops hearing src, while src still hears dst).

Shapes (Jepsen's, plus the ones that matter for a ZooKeeper-era controller):

- isolate-one: one broker cut from every other node, ZooKeeper included;
- halves: all nodes (ZooKeeper too) shuffled into two halves that cannot talk;
- majorities-ring: every node (ZooKeeper too) on a ring, each sees only its neighbours: a
  majority in its own eyes, but a different majority for each;
- bridge: two halves of brokers joined only through one bridge broker;
- isolate-controller / isolate-leader: the controller (from ``/controller``), or the leader
  of a random partition, cut from every other node;
- zookeeper-cut: some brokers cut from ZooKeeper only (they still see each other);
- controller-cut: one broker cut from the controller only, still alive in ZooKeeper (the
  KIP-343 case: the controller must fence it by missing heartbeats);
- one-way: a broker stops hearing some peers while they still hear it.

Shapes aimed at a partition's roles, which schedules name but random ones do not draw
(``named_shapes``: they came after seeds were pinned). Each picks a random partition with a
known leader, and its replicas as ZooKeeper has them:

- leader-controller-cut: the partition's leader cut from the controller only, both still in
  ZooKeeper: a broker that never hears the controller move its partitions on, and keeps
  leading in its old epoch (chosen among partitions the controller does not lead itself);
- follower-deaf: one follower stops hearing the partition's leader, which still hears it:
  the follower's fetches arrive, their responses never do, so it lags inside the ISR;
- followers-deaf: every follower of the partition stops hearing its leader, which still hears
  them, ZooKeeper and the controller: nothing the leader commits from then on reaches them.

Some shapes need more than a small cluster has (:meth:`PartitionNemesis.layout_problem`): a
ring of three nodes in which neighbours are a majority hides nobody, a bridge needs a broker
on each side, a cut from the controller another broker, a deaf follower a second replica.
Their grudge would be empty, so a schedule naming one is refused before the run and a random
one never draws it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from floodmark.harness.faults import ClusterView, NetworkCut
from floodmark.nemesis.base import Choice, Layout, Nemesis, NemesisError, choose_broker, natural

Grudge = dict[str, set[str]]  # node name -> names of the nodes it drops packets from


def cut_between(groups: Iterable[Iterable[str]]) -> Grudge:
    """Symmetric grudge: nobody hears anyone outside their own group."""
    sets = [set(g) for g in groups]
    everyone: set[str] = set().union(*sets)
    grudge: Grudge = {}
    for group in sets:
        for node in group:
            others = everyone - group
            if others:
                grudge.setdefault(node, set()).update(others)
    return grudge


def isolate(node: str, everyone: Iterable[str]) -> Grudge:
    rest = set(everyone) - {node}
    return cut_between([{node}, rest])


def sever(a: str, b: str) -> Grudge:
    """Symmetric cut between two nodes only."""
    return {a: {b}, b: {a}}


def majorities_ring(nodes: Sequence[str]) -> Grudge:
    """Nodes on a ring; each hears only those within ``d`` steps, ``d`` the least that makes
    self + neighbours a majority. Symmetric, and no two nodes see the same majority."""
    n = len(nodes)
    majority = n // 2 + 1
    reach = max(1, -(-(majority - 1) // 2))
    grudge: Grudge = {}
    for i, node in enumerate(nodes):
        visible = {nodes[(i + step) % n] for step in range(-reach, reach + 1)}
        hidden = set(nodes) - visible
        if hidden:
            grudge[node] = hidden
    return grudge


def bridge(nodes: Sequence[str]) -> Grudge:
    """Two halves that meet only at the middle node (which hears and is heard by both)."""
    middle = len(nodes) // 2
    left, right = set(nodes[:middle]), set(nodes[middle + 1:])
    return cut_between([left, right]) if left and right else {}


def as_plan(grudge: Mapping[str, set[str]]) -> NetworkCut:
    """The grudge as a plan: nodes and their sources in natural order, empty grudges left out."""
    return NetworkCut(tuple(
        (node, tuple(sorted(grudge[node], key=natural)))
        for node in sorted(grudge, key=natural) if grudge[node]
    ))


class PartitionNemesis(Nemesis):
    kind = "partition"
    shapes = ("isolate-one", "halves", "majorities-ring", "bridge", "isolate-controller",
              "isolate-leader", "zookeeper-cut", "controller-cut", "one-way")
    named_shapes = ("leader-controller-cut", "follower-deaf", "followers-deaf")

    def layout_problem(self, shape: str, layout: Layout) -> str | None:
        # What each grudge function returns empty for, whichever nodes it draws.
        brokers = layout.brokers
        if shape == "majorities-ring" and brokers < 3:
            return (f"a ring of {brokers + 1} nodes (ZooKeeper too) in which each node's neighbours make a "
                    f"majority hides no node from any: needs at least 3 brokers; the test has {brokers}")
        if shape == "bridge" and brokers < 3:
            return (f"two halves of brokers joined by a bridge broker need at least 3 brokers; "
                    f"the test has {brokers}")
        if shape in ("controller-cut", "leader-controller-cut") and brokers < 2:
            return "a single broker is the controller itself: no broker can be cut from the controller"
        if shape in ("follower-deaf", "followers-deaf") and layout.replication_factor < 2:
            return "with replication factor 1 no partition has a follower to stop hearing its leader"
        return None

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[NetworkCut, Choice]:
        grudge, how = grudge_for(rng, view, self.check_shape(shape))
        return as_plan(grudge), {"shape": shape, **how}


def grudge_for(rng: random.Random, view: ClusterView, shape: str) -> tuple[Grudge, Choice]:
    """Decide who drops whom, and record how the nodes were chosen."""
    brokers = sorted(view.broker_names, key=natural)
    everyone = [view.zookeeper, *brokers]
    how: Choice = {}
    if shape == "isolate-one":
        node = rng.choice(brokers)
        how["node"] = node
        return isolate(node, everyone), how
    if shape == "halves":
        shuffled = rng.sample(everyone, len(everyone))
        half = len(shuffled) // 2
        how["halves"] = [sorted(shuffled[:half], key=natural), sorted(shuffled[half:], key=natural)]
        return cut_between(how["halves"]), how
    if shape == "majorities-ring":
        ring = rng.sample(everyone, len(everyone))
        how["ring"] = ring
        return majorities_ring(ring), how
    if shape == "bridge":
        order = rng.sample(brokers, len(brokers))
        how["order"], how["bridge"] = order, order[len(order) // 2]
        return bridge(order), how
    if shape in ("isolate-controller", "isolate-leader"):
        victim, how = choose_broker(rng, view, "controller" if shape == "isolate-controller" else "leader")
        return isolate(victim.name, everyone), how
    if shape == "zookeeper-cut":
        cut = sorted(rng.sample(brokers, rng.randint(1, len(brokers))), key=natural)
        how["brokers"] = cut
        return cut_between([{view.zookeeper}, set(cut)]), how
    if shape == "controller-cut":
        controller, how = choose_broker(rng, view, "controller")
        others = [b for b in brokers if b != controller.name]
        if not others:
            return {}, {**how, "skipped": "a single broker has no controller to be cut from"}
        cut_off = rng.choice(others)
        how["victim"] = cut_off
        return sever(cut_off, controller.name), how
    if shape == "one-way":
        deaf = rng.choice(brokers)
        unheard = sorted(rng.sample([n for n in everyone if n != deaf],
                                    rng.randint(1, len(everyone) - 1)), key=natural)
        how["deaf"], how["unheard"] = deaf, unheard
        return {deaf: set(unheard)}, how
    if shape in PartitionNemesis.named_shapes:
        return aimed_at_partition(rng, view, shape)
    raise NemesisError(f"partition: unknown shape {shape!r}")


def aimed_at_partition(rng: random.Random, view: ClusterView, shape: str) -> tuple[Grudge, Choice]:
    """The shapes aimed at one partition's leader (see the module docstring)."""
    names = {b.broker_id: b.name for b in view.brokers}
    controller = names.get(view.controller) if view.controller is not None else None
    led = [tp for tp in sorted(view.leaders) if view.leaders[tp] in names]
    if shape == "leader-controller-cut":
        if controller is None:
            return {}, {"skipped": "no controller is known right now"}
        led = [tp for tp in led if names[view.leaders[tp]] != controller]
    if not led:
        return {}, {"skipped": "no partition has a known leader" + (
            " other than the controller" if shape == "leader-controller-cut" else "")}
    topic, partition = rng.choice(led)
    leader = names[view.leaders[(topic, partition)]]
    how: Choice = {"partition": [topic, partition], "leader": leader}
    if controller is not None and shape == "leader-controller-cut":
        how["controller"] = controller
        return sever(leader, controller), how
    followers = [names[r] for r in view.replicas.get((topic, partition), ()) if r in names and names[r] != leader]
    if not followers:
        return {}, {**how, "skipped": "the partition has no follower"}
    deaf = [rng.choice(followers)] if shape == "follower-deaf" else followers
    how["deaf"] = deaf
    return {node: {leader} for node in deaf}, how
