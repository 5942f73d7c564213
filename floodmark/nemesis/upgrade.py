"""Upgrades: the inter-broker protocol moved to KIP-343 by a "double roll" during the run.

KIP-343 changes what brokers say to each other and to the controller, so a cluster cannot
switch in one step (see ``reference.protocol.inter_broker_protocol``). Operators upgrade by
rolling twice: first every broker is restarted with the new software at the old protocol
version, then every broker again at the new version, one broker at a time, each waited for
until it is back. In between, brokers of different versions share the cluster, and the
controller must treat each by its registration. That window is where an upgrade breaks
things, and operators open it while something else goes wrong, so the schedule draws it
like any fault and it meets the others.

One shape, ``double-roll``: roll 1 restarts each broker cleanly (SIGTERM, controlled
shutdown, then start) at the version it runs now, roll 2 at ``kip-343``. Brokers go in
broker-id order, the controller of the moment last (as operators do: one controller move per
roll, not one per restart). The backend applies it in the background (``backends.rolling
_upgrade``), records per restart the registration the broker wrote, and never undoes it.

An upgrade happens once: a cluster whose every broker is at ``kip-343`` cannot be upgraded,
so the nemesis refuses to plan it, and :meth:`UpgradeNemesis.recovery` keeps the schedule
from drawing a second one. Its duration is at least :data:`ROLL_SECONDS`, the window the
schedule reserves for six clean restarts; a roll that outlasts it (a restarted broker cut off
from ZooKeeper registers only when the cut heals) is waited for, bounded, in the background
(``FaultPlan.heals_in_background``), so the schedule's other faults still start on time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from floodmark.harness.faults import UPGRADE_TARGET, ClusterView, DoubleRoll
from floodmark.nemesis.base import Choice, Nemesis, NemesisError, brokers_by_id

TARGET = UPGRADE_TARGET
ROLL_SECONDS = 24.0  # a double roll of three brokers: six clean restarts of a few seconds each


class UpgradeNemesis(Nemesis):
    kind = "upgrade"
    shapes = ("double-roll",)

    def lasts(self, shape: str) -> bool:
        return False  # a roll goes on in the background and is never undone

    def duration(self, shape: str, drawn: float, session_timeout: float, rng: random.Random) -> float:
        return max(drawn, ROLL_SECONDS)

    def recovery(self, session_timeout: float, shapes: Sequence[str]) -> float:
        return math.inf  # once upgraded, a cluster stays upgraded: one upgrade per run

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[DoubleRoll, Choice]:
        self.check_shape(shape)
        brokers = brokers_by_id(view)
        if not brokers:
            raise NemesisError("upgrade: the cluster has no brokers")
        unknown = [b.name for b in brokers if b.name not in view.protocols]
        if unknown:
            raise NemesisError(f"upgrade: the cluster's view does not say which protocol {unknown[0]} speaks")
        versions = {b.name: view.protocols[b.name] for b in brokers}
        if all(version == TARGET for version in versions.values()):
            raise NemesisError(f"upgrade: every broker is at {TARGET} already; there is nothing to upgrade")
        # The controller last: each roll moves the controller once, not once per restart.
        order = sorted(brokers, key=lambda b: b.broker_id == view.controller)
        steps = tuple((1, b.name, b.broker_id, versions[b.name]) for b in order)
        steps += tuple((2, b.name, b.broker_id, TARGET) for b in order)
        return DoubleRoll(steps), {"shape": shape, "from": versions, "controller": view.controller}
