"""Composing faults: one nemesis per kind, addressed by kind.

The schedule (``floodmark.harness.schedule``) decides when each kind starts and stops and in
which shape; this module holds the nemeses for the test's kinds and routes planning to them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from floodmark.harness.faults import ClusterView, FaultPlan
from floodmark.nemesis.admin import AdminNemesis
from floodmark.nemesis.base import Choice, Layout, Nemesis, NemesisError
from floodmark.nemesis.clock import ClockNemesis
from floodmark.nemesis.disk import DiskNemesis
from floodmark.nemesis.failover import FailoverNemesis
from floodmark.nemesis.kill import KillNemesis, PowerNemesis
from floodmark.nemesis.message import MessageNemesis
from floodmark.nemesis.partition import PartitionNemesis
from floodmark.nemesis.pause import PauseNemesis
from floodmark.nemesis.session import SessionNemesis
from floodmark.nemesis.stall import StallNemesis
from floodmark.nemesis.upgrade import UpgradeNemesis

NEMESES: dict[str, type[Nemesis]] = {
    cls.kind: cls
    for cls in (PartitionNemesis, ClockNemesis, PauseNemesis, DiskNemesis, KillNemesis,
                PowerNemesis, SessionNemesis, MessageNemesis, AdminNemesis, StallNemesis,
                UpgradeNemesis, FailoverNemesis)
}
KINDS = tuple(NEMESES)


class Composite:
    """The nemeses of one test, one per kind."""

    def __init__(self, kinds: Iterable[str], messages: Mapping[str, str] | None = None) -> None:
        """``messages``: the messages the cluster sends, for message faults to aim at
        (:func:`~floodmark.nemesis.message.messages_sent`; by default those of the default
        inter-broker protocol)."""
        unknown = [k for k in kinds if k not in NEMESES]
        if unknown:
            raise NemesisError(f"unknown fault kind {unknown[0]!r}; known: {', '.join(KINDS)}")
        self.nemeses = {kind: self._nemesis(kind, messages) for kind in kinds}

    @staticmethod
    def _nemesis(kind: str, messages: Mapping[str, str] | None) -> Nemesis:
        if kind == MessageNemesis.kind:
            return MessageNemesis(messages)
        if kind == FailoverNemesis.kind:  # holds ISR change requests back only where they are sent
            return FailoverNemesis(messages)
        return NEMESES[kind]()

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.nemeses)

    def shapes(self, layout: Layout | None = None) -> dict[str, tuple[str, ...]]:
        """Each kind's shapes that a random schedule draws, on a cluster of ``layout`` (None: any)."""
        return {kind: nemesis.drawable(layout) for kind, nemesis in self.nemeses.items()}

    def layout_problem(self, kind: str, shape: str, layout: Layout) -> str | None:
        return self.get(kind).layout_problem(shape, layout)

    def lasts(self, kind: str, shape: str) -> bool:
        return self.get(kind).lasts(shape)

    def get(self, kind: str) -> Nemesis:
        if kind not in self.nemeses:
            raise NemesisError(f"no {kind!r} nemesis in this test (have {sorted(self.nemeses)})")
        return self.nemeses[kind]

    def plan(self, kind: str, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[FaultPlan, Choice]:
        return self.get(kind).plan(rng, view, shape, duration)

    def duration(self, kind: str, shape: str, drawn: float, session_timeout: float,
                 rng: random.Random) -> float:
        return self.get(kind).duration(shape, drawn, session_timeout, rng)

    def duration_problem(self, kind: str, shape: str, duration: float, session_timeout: float) -> str | None:
        return self.get(kind).duration_problem(shape, duration, session_timeout)

    def group(self, kind: str, shape: str, session_timeout: float,
              rng: random.Random) -> tuple[tuple[str, float, float], ...]:
        return self.get(kind).group(shape, session_timeout, rng)

    def weights(self) -> dict[str, float]:
        return {kind: nemesis.weight for kind, nemesis in self.nemeses.items()}

    def recovers_as(self, kind: str) -> str:
        return self.get(kind).recovers_as or kind

    def recovery(self, kind: str, session_timeout: float, shapes: Sequence[str]) -> float:
        return self.get(kind).recovery(session_timeout, shapes)
