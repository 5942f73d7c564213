"""Clock faults: move a broker's wall clock without touching the machine's.

Brokers run under libfaketime (``LD_PRELOAD``) reading a *timestamp file* on every clock
call (``FAKETIME_NO_CACHE=1``). The file holds ``"<offset seconds> x<rate>"``; rewriting it
moves the running process's wall clock at once. The monotonic clock is left alone
(``FAKETIME_DONT_FAKE_MONOTONIC=1``: faking it hangs Python's waits), exactly like a real
NTP step, which moves wall time and not monotonic time. libfaketime applies a rate from the
moment the process started (wall = start + (now - start) * rate + offset), so a rate change
"from now on" writes the offset that keeps the clock continuous at the moment of the change.

Shapes: bump-forward and bump-backward (one or more brokers, by up to five minutes), strobe
(flip between two offsets every few hundred ms for the fault's duration), rate (run fast or
slow). Heal writes ``"+0 x1"``: the real clock again. Every action records the exact
offsets and rates written, per broker.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from floodmark.backends.faketime import process_start_time, write_clock
from floodmark.harness.cluster import Cluster, Node
from floodmark.nemesis.base import Action, Nemesis, NemesisContext

MAX_BUMP = 300.0  # seconds
RATES = (0.25, 0.5, 2.0, 4.0)


class ClockNemesis(Nemesis):
    kind = "clock"
    shapes = ("bump-forward", "bump-backward", "strobe", "rate")

    def __init__(self, strobe_period: tuple[float, float] = (0.1, 1.0)) -> None:
        self.strobe_period = strobe_period
        self._skewed: list[str] = []
        self._strobe_stop: threading.Event | None = None
        self._strobe_thread: threading.Thread | None = None

    def start(self, rng: random.Random, cluster: Cluster, context: NemesisContext,
              shape: str | None = None) -> Action:
        shape = self.choose_shape(rng, shape)
        brokers = sorted(cluster.brokers, key=lambda b: b.broker_id or 0)
        targets = rng.sample(brokers, rng.randint(1, len(brokers)))
        targets.sort(key=lambda b: b.broker_id or 0)
        applied: dict[str, Any] = {}
        if shape in ("bump-forward", "bump-backward"):
            sign = 1 if shape == "bump-forward" else -1
            for node in targets:
                offset = round(sign * rng.uniform(1.0, MAX_BUMP), 3)
                applied[node.name] = {"offset": offset, "rate": 1.0,
                                      "spec": write_clock(node, offset)}
        elif shape == "rate":
            for node in targets:
                rate = rng.choice(RATES)
                # wall = start + (now - start) * rate + offset: continuous at this moment.
                elapsed = time.time() - process_start_time(node)
                offset = round(-elapsed * (rate - 1.0), 3)
                applied[node.name] = {"offset": offset, "rate": rate,
                                      "spec": write_clock(node, offset, rate)}
        else:
            delta = round(rng.choice((-1, 1)) * rng.uniform(1.0, MAX_BUMP), 3)
            period = round(rng.uniform(*self.strobe_period), 3)
            for node in targets:
                applied[node.name] = {"strobe": [0.0, delta], "period": period}
            self._start_strobe(targets, delta, period)
        self._skewed = [n.name for n in targets]
        return {"shape": shape, "nodes": self._skewed, "clocks": applied}

    def _start_strobe(self, targets: list[Node], delta: float, period: float) -> None:
        stop = threading.Event()

        def flip() -> None:
            skewed = False
            while not stop.wait(period):
                skewed = not skewed
                for node in targets:
                    write_clock(node, delta if skewed else 0.0)

        self._strobe_stop = stop
        self._strobe_thread = threading.Thread(target=flip, name="clock-strobe", daemon=True)
        self._strobe_thread.start()

    def _end_strobe(self) -> None:
        if self._strobe_stop is not None and self._strobe_thread is not None:
            self._strobe_stop.set()
            self._strobe_thread.join(timeout=10)
        self._strobe_stop = self._strobe_thread = None

    def stop(self, cluster: Cluster, context: NemesisContext) -> Action:
        self._end_strobe()
        reset = {}
        for name in self._skewed:
            reset[name] = write_clock(cluster.node(name), 0.0)
        self._skewed = []
        return {"reset": reset}

    def heal_all(self, cluster: Cluster, context: NemesisContext) -> Action:
        self._end_strobe()
        self._skewed = []
        return {"reset": {b.name: write_clock(b, 0.0) for b in cluster.brokers}}
