"""A nemesis: the part of the harness that breaks things on purpose, and then repairs them.

Each kind of fault (partition, clock, pause, disk, kill) is one nemesis. It offers named
*shapes* (the schedule picks one per fault, see ``floodmark.harness.schedule``), and three
actions, each returning a JSON-able dict that says exactly what was done (which nodes, which
iptables rules, which clock offsets, which pids), because that dict becomes the value of the
nemesis op in the history and the only record a reader has of the fault:

- ``start(rng, cluster, context, shape)`` applies one fault; every choice it makes comes
  from ``rng`` or from the cluster's state at that moment (the controller, a leader), which
  it records;
- ``stop(cluster, context)`` heals the fault it started, and only that;
- ``heal_all(cluster, context)`` repairs everything of its kind on every node, whether or not
  the harness remembers starting it (after an error, before the final reads).

A nemesis drives nodes only through the node-control interface (``floodmark.harness.cluster``),
so it works the same on every cluster backend.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from floodmark.harness.cluster import Cluster, Node

Action = dict[str, Any]


class NemesisError(RuntimeError):
    """A fault could not be applied or healed; says which node and why."""


class ClusterView(Protocol):
    """What a nemesis may ask about the cluster's current state (read from ZooKeeper)."""

    def controller(self) -> int | None: ...
    def leader(self, topic: str, partition: int) -> int | None: ...


@dataclass
class NemesisContext:
    """What a nemesis needs besides the nodes: the cluster's state and the test's layout."""

    view: ClusterView
    partitions: Sequence[tuple[str, int]] = ()
    zk_session_timeout: float = 6.0
    extra: dict[str, Any] = field(default_factory=dict)


class Nemesis(ABC):
    """One kind of fault. Subclasses set ``kind`` and ``shapes``."""

    kind: ClassVar[str]
    shapes: ClassVar[tuple[str, ...]]

    @abstractmethod
    def start(self, rng: random.Random, cluster: Cluster, context: NemesisContext,
              shape: str | None = None) -> Action: ...

    @abstractmethod
    def stop(self, cluster: Cluster, context: NemesisContext) -> Action: ...

    @abstractmethod
    def heal_all(self, cluster: Cluster, context: NemesisContext) -> Action: ...

    def choose_shape(self, rng: random.Random, shape: str | None) -> str:
        if shape is None:
            return rng.choice(self.shapes)
        if shape not in self.shapes:
            raise NemesisError(f"{self.kind}: unknown shape {shape!r}; known: {', '.join(self.shapes)}")
        return shape


def choose_broker(rng: random.Random, cluster: Cluster, context: NemesisContext,
                  target: str) -> tuple[Node, dict[str, Any]]:
    """The broker a fault hits: "controller", "leader" (of a random partition) or "random".

    Returns the node and a record of how it was chosen. When the controller or a leader is
    unknown right now (mid-election), falls back to a random broker and says so.
    """
    brokers = sorted(cluster.brokers, key=lambda b: b.broker_id or 0)
    how: dict[str, Any] = {"target": target}
    chosen: int | None = None
    if target == "controller":
        chosen = context.view.controller()
    elif target == "leader" and context.partitions:
        topic, partition = rng.choice(list(context.partitions))
        how["partition"] = [topic, partition]
        chosen = context.view.leader(topic, partition)
    elif target != "random":
        raise NemesisError(f"unknown target {target!r}; use controller, leader or random")
    if chosen is None or chosen not in {b.broker_id for b in brokers}:
        if target != "random":
            how["fallback"] = f"no current {target}: chose a random broker"
        node = rng.choice(brokers)
    else:
        node = next(b for b in brokers if b.broker_id == chosen)
    how["node"] = node.name
    how["broker_id"] = node.broker_id
    return node, how
