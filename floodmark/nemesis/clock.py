"""Clock faults: move brokers' wall clocks, never the monotonic clock.

Kafka uses wall time where it measures replica lag and the like, so a stepped or racing wall
clock is a real fault; the monotonic clock is left alone, exactly like a real NTP step, which
moves wall time and not monotonic time. Shapes:

- bump-forward / bump-backward: one or more brokers jump by up to five minutes;
- rate: one or more brokers' clocks run fast or slow from now on (no jump at the change);
- strobe: clocks flip between true time and an offset every few hundred milliseconds.

Heal returns every clock to true time at rate 1. The plan records the exact offsets and rates.
"""

from __future__ import annotations

import random

from floodmark.harness.faults import ClockSkew, ClockStrobe, ClusterView, FaultPlan
from floodmark.nemesis.base import Choice, Nemesis, brokers_by_id

MAX_BUMP = 300.0  # seconds
RATES = (0.25, 0.5, 2.0, 4.0)
STROBE_PERIOD = (0.1, 1.0)  # seconds between flips


class ClockNemesis(Nemesis):
    kind = "clock"
    shapes = ("bump-forward", "bump-backward", "strobe", "rate")

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[FaultPlan, Choice]:
        self.check_shape(shape)
        brokers = brokers_by_id(view)
        targets = sorted(rng.sample(brokers, rng.randint(1, len(brokers))), key=lambda b: b.broker_id)
        names = tuple(b.name for b in targets)
        choice: Choice = {"shape": shape, "nodes": list(names)}
        if shape in ("bump-forward", "bump-backward"):
            sign = 1 if shape == "bump-forward" else -1
            return ClockSkew(tuple((n, round(sign * rng.uniform(1.0, MAX_BUMP), 3), 1.0) for n in names)), choice
        if shape == "rate":
            return ClockSkew(tuple((n, 0.0, rng.choice(RATES)) for n in names)), choice
        delta = round(rng.choice((-1, 1)) * rng.uniform(1.0, MAX_BUMP), 3)
        return ClockStrobe(names, delta, round(rng.uniform(*STROBE_PERIOD), 3)), choice
