"""Process pauses: freeze a broker, as a long garbage-collection pause or a frozen VM would.

A paused broker keeps its sockets and its ZooKeeper session, but makes no progress: it
answers nobody and sends no heartbeats. What happens next depends on how long the pause
lasts relative to the ZooKeeper session timeout: a *short* pause (under it) ends with the
broker resuming as if nothing happened, possibly acting on stale beliefs; a *long* pause
(over it) costs the broker its session, its ephemeral registration and, for the controller,
its office, and it must notice on waking. Shapes pick the target (controller, a partition's
leader, a random broker) and the side of the timeout.

The side of the timeout is kept by construction: a pause's fault lasts a drawn fraction of
the session timeout (0.2-0.7 for short, 1.5-3.0 for long), whatever the schedule's usual fault
durations are, so a "long" pause always outlasts the session it is meant to cost.
"""

from __future__ import annotations

import random

from floodmark.harness.faults import ClusterView, ProcessPause
from floodmark.nemesis.base import Choice, Nemesis, choose_broker

SHORT = (0.2, 0.7)  # fraction of the session timeout
LONG = (1.5, 3.0)


class PauseNemesis(Nemesis):
    kind = "pause"
    shapes = ("controller-short", "controller-long", "leader-short", "leader-long",
              "random-short", "random-long")

    def duration(self, shape: str, drawn: float, session_timeout: float, rng: random.Random) -> float:
        fraction = rng.uniform(*(LONG if shape.endswith("-long") else SHORT))
        return round(fraction * session_timeout, 3)

    def duration_problem(self, shape: str, duration: float, session_timeout: float) -> str | None:
        # A hand-written or shrunk schedule may give any length: a "long" pause the session
        # survives, or a "short" one it does not, would be another fault under this name.
        if shape.endswith("-long") and duration <= session_timeout:
            return (f"a long pause must outlast the {session_timeout:g} s ZooKeeper session timeout; "
                    f"it lasts {duration:g} s (use a -short shape)")
        if shape.endswith("-short") and duration >= session_timeout:
            return (f"a short pause must end within the {session_timeout:g} s ZooKeeper session timeout; "
                    f"it lasts {duration:g} s (use a -long shape)")
        return None

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[ProcessPause, Choice]:
        target, length = self.check_shape(shape).split("-")
        slot, how = choose_broker(rng, view, target)
        plan = ProcessPause(slot.name, round(duration, 3), view.session_timeout)
        return plan, {"shape": shape, **how, "longer_than_session": duration > view.session_timeout}
