"""A nemesis: the part of the harness that decides which faults to inject, and where.

Each kind of fault (partition, clock, pause, disk, kill, and the simulator's power, session and
message faults) is one nemesis. It offers named *shapes* (the schedule picks one per fault, see
``floodmark.harness.schedule``) and *plans* one fault of a shape: a pure function of a seeded
generator, the shape, the fault's planned duration and a snapshot of the cluster
(:class:`~floodmark.harness.faults.ClusterView`: its nodes and who holds which role). The plan
(:mod:`floodmark.harness.faults`) names the nodes and what happens to them; the backend applies
it its own way and heals it, so a nemesis never touches a node and works the same on every
backend. Alongside the plan it returns how it chose (the role it aimed at, what it saw, any
fallback), which the fault driver records with the backend's evidence.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from floodmark.harness.faults import BrokerSlot, ClusterView, FaultPlan

Choice = dict[str, Any]


class NemesisError(RuntimeError):
    """A fault that cannot be planned (an unknown shape, a cluster too small); says why."""


@dataclass(frozen=True)
class Layout:
    """What a cluster offers faults to aim at, known before the run starts: its brokers and
    each partition's replicas (one ZooKeeper node stands beside them). A shape that needs more
    (a bridge between two halves of one broker, a follower of a partition with one replica)
    would be planned and then cut nothing, so it is refused or never drawn instead."""

    brokers: int
    replication_factor: int


class Nemesis(ABC):
    """One kind of fault. Subclasses set ``kind`` and ``shapes``."""

    kind: ClassVar[str]
    shapes: tuple[str, ...]  # a class constant, unless what a test offers depends on the cluster
    # Shapes a schedule may name (a hand-written or replayed one) but random schedules never
    # draw. They came after seeds were pinned (the corpus, the chaos suite): drawing them too
    # would give every pinned seed another schedule, as named-only fault kinds would.
    named_shapes: ClassVar[tuple[str, ...]] = ()
    simulated_only: ClassVar[bool] = False  # only the simulator can apply it
    # The kind whose recovery time a fault of this kind shares (its own unless it says): one
    # that may power a broker off waits for, and delays, the power kind's faults.
    recovers_as: ClassVar[str | None] = None
    # How often the schedule draws this kind against the test's others (1: as often).
    weight: ClassVar[float] = 1.0

    @abstractmethod
    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[FaultPlan, Choice]:
        """Plan one fault of ``shape`` lasting ``duration`` seconds, drawing only from ``rng``."""

    def duration(self, shape: str, drawn: float, session_timeout: float, rng: random.Random) -> float:
        """How long a fault of ``shape`` lasts, given the duration the schedule ``drawn``.

        Most faults last what was drawn; a shape defined against a timeout (a pause longer
        than the ZooKeeper session) lasts what its definition requires, by construction.
        """
        return drawn

    def duration_problem(self, shape: str, duration: float, session_timeout: float) -> str | None:
        """Why a fault of ``shape`` cannot last ``duration`` seconds and still be what its
        shape says (None: it can). Only shapes defined against a timeout have a problem."""
        return None

    def group(self, shape: str, session_timeout: float,
              rng: random.Random) -> tuple[tuple[str, float, float], ...]:
        """The faults one drawn fault of ``shape`` stands for, as (shape, seconds after it
        starts, duration), drawing only from ``rng``; empty (most kinds): just itself.

        A kind whose faults only matter together (a follower lagging, then its leader killed
        as it leaves the ISR) plans them as one group, timed against each other.
        """
        return ()

    def recovery(self, session_timeout: float, shapes: Sequence[str]) -> float:
        """Seconds after a fault of this kind (of ``shapes``: a group's steps, or the one
        fault's shape) heals before the next one of its kind may start.

        Most kinds need none; one whose effects add up beyond the durability contract when
        they come back to back (power losses on several replicas of a partition) needs the
        cluster to recover from the last one first.
        """
        return 0.0

    def layout_problem(self, shape: str, layout: Layout) -> str | None:
        """Why no fault of ``shape`` can take effect on a cluster of ``layout``, whatever its
        state when the fault starts (None: one can). Most shapes take effect on any cluster."""
        return None

    def lasts(self, shape: str) -> bool:
        """Whether a fault of ``shape`` is a state held for its duration (a cut, a frozen
        process, a skewed clock), which a duration of zero heals as it starts; an act that is
        done once (a kill, a session expired, an admin operation) does something at any length."""
        return True

    def drawable(self, layout: Layout | None = None) -> tuple[str, ...]:
        """The shapes a random schedule draws from: :attr:`shapes`, less those ``layout``
        cannot take (None: any cluster). On a cluster that takes them all, the same tuple, so
        a seed draws the schedule it always drew."""
        if layout is None:
            return self.shapes
        return tuple(shape for shape in self.shapes if self.layout_problem(shape, layout) is None)

    @property
    def every_shape(self) -> tuple[str, ...]:
        """The shapes a schedule may name: those drawn at random, then the named-only ones."""
        return (*self.shapes, *self.named_shapes)

    def check_shape(self, shape: str) -> str:
        if shape not in self.every_shape:
            raise NemesisError(f"{self.kind}: unknown shape {shape!r}; known: {', '.join(self.every_shape)}")
        return shape


def brokers_by_id(view: ClusterView) -> list[BrokerSlot]:
    return sorted(view.brokers, key=lambda b: b.broker_id)


def choose_broker(rng: random.Random, view: ClusterView, target: str) -> tuple[BrokerSlot, Choice]:
    """The broker a fault hits: "controller", "leader" (of a random partition) or "random".

    Returns the broker and a record of how it was chosen. When the controller or a leader is
    unknown right now (mid-election), falls back to a random broker and says so.
    """
    brokers = brokers_by_id(view)
    if not brokers:
        raise NemesisError("the cluster has no brokers to aim at")
    how: Choice = {"target": target}
    chosen: int | None = None
    if target == "controller":
        chosen = view.controller
    elif target == "leader" and view.partitions:
        topic, partition = rng.choice(list(view.partitions))
        how["partition"] = [topic, partition]
        chosen = view.leaders.get((topic, partition))
    elif target != "random" and target != "leader":
        raise NemesisError(f"unknown target {target!r}; use controller, leader or random")
    slot = view.broker(chosen) if chosen is not None else None
    if slot is None:
        if target != "random":
            how["fallback"] = f"no current {target}: chose a random broker"
        slot = rng.choice(brokers)
    how["node"] = slot.name
    how["broker_id"] = slot.broker_id
    return slot, how


def natural(name: str) -> tuple[str, int]:
    """Sort key: n2 before n10."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1
