"""Network partitions: iptables rules inside nodes that drop packets from chosen peers.

A partition is a *grudge*: for each node, the set of nodes whose packets it drops. A node
holding a grudge against a peer gets one rule in its own INPUT chain,
``-s <peer ip> -j DROP`` tagged with a ``floodmark`` comment, so only traffic between exactly
the chosen nodes stops (the harness, on the host, still reaches everyone). A symmetric cut is
a grudge both ways; a one-way cut is a grudge one way (dst stops hearing src; TCP between
them then stalls, but src still hears dst's datagrams and the cut is one-sided in the rules).

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

``stop`` deletes exactly the rules it added; ``heal_all`` deletes every floodmark rule on
every node.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from floodmark.harness.cluster import Cluster, Node
from floodmark.nemesis.base import Action, Nemesis, NemesisContext, NemesisError, choose_broker

COMMENT = "floodmark"
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


def iptables_rule(sources: Iterable[str]) -> list[str]:
    """The INPUT rule (without -A/-D) dropping packets from ``sources`` (ip addresses)."""
    return ["INPUT", "-s", ",".join(sorted(sources)), "-m", "comment", "--comment", COMMENT,
            "-j", "DROP"]


class PartitionNemesis(Nemesis):
    kind = "partition"
    shapes = ("isolate-one", "halves", "majorities-ring", "bridge", "isolate-controller",
              "isolate-leader", "zookeeper-cut", "controller-cut", "one-way")

    def __init__(self) -> None:
        self._applied: dict[str, list[str]] = {}  # node -> the rule we appended there

    def grudge_for(self, rng: random.Random, cluster: Cluster, context: NemesisContext,
                   shape: str) -> tuple[Grudge, Action]:
        """Decide who drops whom, and record how the nodes were chosen."""
        brokers = sorted((b.name for b in cluster.brokers), key=_natural)
        everyone = [cluster.zookeeper.name, *brokers]
        how: Action = {}
        if shape == "isolate-one":
            node = rng.choice(brokers)
            how["node"] = node
            return isolate(node, everyone), how
        if shape == "halves":
            shuffled = rng.sample(everyone, len(everyone))
            half = len(shuffled) // 2
            how["halves"] = [sorted(shuffled[:half], key=_natural), sorted(shuffled[half:], key=_natural)]
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
            victim, how = choose_broker(rng, cluster, context,
                                        "controller" if shape == "isolate-controller" else "leader")
            return isolate(victim.name, everyone), how
        if shape == "zookeeper-cut":
            cut = sorted(rng.sample(brokers, rng.randint(1, len(brokers))), key=_natural)
            how["brokers"] = cut
            return cut_between([{cluster.zookeeper.name}, set(cut)]) if cut else {}, how
        if shape == "controller-cut":
            controller, how = choose_broker(rng, cluster, context, "controller")
            others = [b for b in brokers if b != controller.name]
            if not others:
                return {}, {**how, "skipped": "a single broker has no controller to be cut from"}
            cut_off = rng.choice(others)
            how["victim"] = cut_off
            return sever(cut_off, controller.name), how
        if shape == "one-way":
            deaf = rng.choice(brokers)
            unheard = sorted(rng.sample([n for n in everyone if n != deaf],
                                        rng.randint(1, len(everyone) - 1)), key=_natural)
            how["deaf"], how["unheard"] = deaf, unheard
            return {deaf: set(unheard)}, how
        raise NemesisError(f"partition: unknown shape {shape!r}")

    def start(self, rng: random.Random, cluster: Cluster, context: NemesisContext,
              shape: str | None = None) -> Action:
        if self._applied:
            raise NemesisError("partition: a partition is already active; stop it first")
        shape = self.choose_shape(rng, shape)
        grudge, how = self.grudge_for(rng, cluster, context, shape)
        rules = self.apply(cluster, grudge)
        return {"shape": shape, **how,
                "drops": {node: sorted(srcs, key=_natural) for node, srcs in sorted(grudge.items())},
                "rules": rules}

    def apply(self, cluster: Cluster, grudge: Mapping[str, set[str]]) -> dict[str, list[str]]:
        """Append one rule per grudging node; returns node -> the rule added."""
        added: dict[str, list[str]] = {}
        for name in sorted(grudge, key=_natural):
            if not grudge[name]:
                continue
            node = cluster.node(name)
            rule = iptables_rule(cluster.node(src).ip for src in grudge[name])
            _iptables(node, ["-A", *rule])
            self._applied[name] = rule
            added[name] = rule
        return added

    def stop(self, cluster: Cluster, context: NemesisContext) -> Action:
        removed = {}
        for name, rule in sorted(self._applied.items()):
            _iptables(cluster.node(name), ["-D", *rule])
            removed[name] = rule
        self._applied = {}
        return {"removed": removed}

    def heal_all(self, cluster: Cluster, context: NemesisContext) -> Action:
        self._applied = {}
        removed: dict[str, list[list[str]]] = {}
        for node in cluster.nodes:
            for rule in floodmark_rules(node):
                _iptables(node, ["-D", *rule])
                removed.setdefault(node.name, []).append(rule)
        return {"removed": removed}


def floodmark_rules(node: Node) -> list[list[str]]:
    """The floodmark rules currently in the node's INPUT chain (as -D arguments)."""
    result = node.exec(["iptables", "-w", "-S", "INPUT"])
    if not result.ok:
        raise NemesisError(f"{node.name}: iptables -S INPUT failed: {result.stderr.strip()}")
    rules = []
    for line in result.stdout.splitlines():
        words = line.split()
        if words[:2] == ["-A", "INPUT"] and COMMENT in words:
            rules.append(words[1:])
    return rules


def _iptables(node: Node, args: list[str]) -> None:
    result = node.exec(["iptables", "-w", *args])
    if not result.ok:
        raise NemesisError(f"{node.name}: iptables {' '.join(args)} failed: {result.stderr.strip()}")


def _natural(name: str) -> tuple[str, int]:
    """n2 before n10."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1
