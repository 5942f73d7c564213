"""Composing faults: one nemesis per kind, addressed by kind, healed together.

The schedule (``floodmark.harness.schedule``) decides when each kind starts and stops and in
which shape; this module holds the nemeses for the test's kinds and routes those actions
to them. ``heal_all`` heals every kind even when one heal fails, and reports each kind's
outcome, because the final reads must not run against a still-broken cluster.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from floodmark.harness.cluster import Cluster
from floodmark.nemesis.base import Action, Nemesis, NemesisContext, NemesisError
from floodmark.nemesis.clock import ClockNemesis
from floodmark.nemesis.disk import DiskNemesis
from floodmark.nemesis.kill import KillNemesis
from floodmark.nemesis.partition import PartitionNemesis
from floodmark.nemesis.pause import PauseNemesis

NEMESES: dict[str, type[Nemesis]] = {
    cls.kind: cls
    for cls in (PartitionNemesis, ClockNemesis, PauseNemesis, DiskNemesis, KillNemesis)
}
KINDS = tuple(NEMESES)


def parse_kinds(text: str) -> tuple[str, ...]:
    """``"all"`` or a comma-separated list of kinds, validated."""
    if text.strip() in ("all", ""):
        return KINDS if text.strip() == "all" else ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in NEMESES]
    if unknown:
        raise ValueError(f"unknown nemesis {', '.join(unknown)}; known: {', '.join(KINDS)}, all")
    return kinds


class Composite:
    """The nemeses of one test, one per kind."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.nemeses = {kind: NEMESES[kind]() for kind in kinds}

    def shapes(self) -> dict[str, tuple[str, ...]]:
        return {kind: nemesis.shapes for kind, nemesis in self.nemeses.items()}

    def _get(self, kind: str) -> Nemesis:
        if kind not in self.nemeses:
            raise NemesisError(f"no {kind!r} nemesis in this test (have {sorted(self.nemeses)})")
        return self.nemeses[kind]

    def start(self, kind: str, rng: random.Random, cluster: Cluster, context: NemesisContext,
              shape: str | None = None) -> Action:
        return self._get(kind).start(rng, cluster, context, shape)

    def stop(self, kind: str, cluster: Cluster, context: NemesisContext) -> Action:
        return self._get(kind).stop(cluster, context)

    def heal_all(self, cluster: Cluster, context: NemesisContext) -> Action:
        """Heal every kind; a failing heal is recorded and the others still run.

        Kills are healed last so restarted brokers come back to a healed network and disk.
        """
        report: Action = {}
        order = sorted(self.nemeses, key=lambda kind: kind == "kill")
        for kind in order:
            try:
                report[kind] = self.nemeses[kind].heal_all(cluster, context)
            except Exception as e:  # noqa: BLE001 - every other kind must still be healed
                report[kind] = {"error": f"{type(e).__name__}: {e}"}
        return report
