"""Admin operations as faults: what an operator does to a live cluster, drawn like any fault.

Jepsen calls these *membership* faults. Kafka's admin paths (moving replicas, electing
preferred leaders, adding partitions) change who leads and who replicates while clients
write, and they are run in production exactly when something else is going wrong. So the
schedule draws them as one more kind, and they meet the other faults. Shapes:

- ``reassign``: one partition's replicas move to other brokers (or, on a cluster with no
  broker to spare, its preferred order changes); healing leaves the move to finish;
- ``reassign-cancel``: the same, and healing cancels the move if it has not completed
  (KIP-236), so the partition goes back to its original replicas mid-way;
- ``preferred-election``: every partition is led by its first replica again, if it can be;
- ``add-partitions``: a topic gains one or two partitions;
- ``reassign-all`` (named by schedules, never drawn: it came after seeds were pinned): every
  partition's replicas move at once, as in a cluster-wide rebalance, so every partition's
  leader epoch moves on whoever leads it.

A reassignment on a single broker would move nothing (:func:`moved_replicas` keeps the
replicas), so a schedule naming one there is refused and a random one never draws it.

The plan names partitions and broker ids from the cluster's view (its replicas as ZooKeeper
had them when the fault started); the harness performs it through the admin client, on every
backend alike.
"""

from __future__ import annotations

import random

from floodmark.harness.faults import (
    ClusterView,
    FaultPlan,
    PartitionsAdded,
    PreferredElection,
    Reassignment,
)
from floodmark.nemesis.base import Choice, Layout, Nemesis, NemesisError


class AdminNemesis(Nemesis):
    kind = "admin"
    shapes = ("reassign", "reassign-cancel", "preferred-election", "add-partitions")
    named_shapes = ("reassign-all",)

    def layout_problem(self, shape: str, layout: Layout) -> str | None:
        if shape.startswith("reassign") and layout.brokers < 2:
            return "with a single broker a partition's replicas have nowhere to move: it would keep them as they are"
        return None

    def lasts(self, shape: str) -> bool:
        return False  # an operator's request, made once: it takes effect at any length

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[FaultPlan, Choice]:
        self.check_shape(shape)
        if not view.replicas:
            raise NemesisError("admin: no partition's replicas are known (ZooKeeper did not answer)")
        if shape == "preferred-election":
            partitions = tuple(sorted(view.replicas))
            return PreferredElection(partitions), {"shape": shape}
        if shape == "add-partitions":
            counts: dict[str, int] = {}
            for topic, _ in sorted(view.replicas):
                counts[topic] = counts.get(topic, 0) + 1
            topic = rng.choice(sorted(counts))
            count = counts[topic] + rng.randint(1, 2)
            return PartitionsAdded(topic, count), {"shape": shape, "partitions_before": counts[topic]}
        brokers = sorted(b.broker_id for b in view.brokers)
        if shape == "reassign-all":
            moves = tuple((topic, partition, moved_replicas(rng, current, brokers))
                          for (topic, partition), current in sorted(view.replicas.items()))
            return Reassignment(moves, cancel_on_heal=False), {
                "shape": shape, "from": {f"{t}/{p}": list(r) for (t, p), r in sorted(view.replicas.items())}}
        (topic, partition), current = rng.choice(sorted(view.replicas.items()))
        moved = moved_replicas(rng, current, brokers)
        plan = Reassignment(((topic, partition, moved),), cancel_on_heal=shape == "reassign-cancel")
        return plan, {"shape": shape, "from": {f"{topic}/{partition}": list(current)}}


def moved_replicas(rng: random.Random, current: tuple[int, ...], brokers: list[int]) -> tuple[int, ...]:
    """New replicas for a partition, as many as it has: drawn from every broker, and never
    the current list itself (with no broker to spare, the preferred leader changes)."""
    moved = tuple(rng.sample(brokers, len(current))) if len(brokers) >= len(current) else current
    if moved == current and len(current) > 1:
        moved = current[1:] + current[:1]
    elif moved == current:
        spare = [b for b in brokers if b not in current]
        moved = (rng.choice(spare),) if spare else current
    return moved
