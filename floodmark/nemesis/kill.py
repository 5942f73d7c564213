"""Crashes and restarts: a broker killed (the controller, a leader, or any), then restarted.

A SIGKILLed broker loses what it held in memory but nothing it wrote (the operating system
keeps written pages), and its ZooKeeper session expires only after the session timeout, so
the controller learns of the death late; on restart it must recover its logs, truncate what
it should and rejoin the ISR. A clean restart (SIGTERM, controlled shutdown) is the control
case: nothing should be lost. The process is restarted on heal on the same machine with the
same data directories.

*Power loss* (the ``power`` kind, which only the simulator can apply) is harsher: every write
the broker had not fsynced is gone, data and checkpoints alike. Kafka does not fsync on
acknowledgement, so a record acknowledged by a whole ISR survives only if some replica that
held it kept it: losing unsynced writes on fewer than min.insync replicas at once must never
lose an acknowledged record. "At once" lasts until the victim is back in its ISRs, so a power
loss is planned only after the last one's victim had time to recover
(:meth:`PowerNemesis.recovery`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from floodmark.harness.faults import ClusterView, CrashMode, ProcessCrash
from floodmark.nemesis.base import Choice, Nemesis, choose_broker

POWER_CATCH_UP = 5.0  # seconds for a restarted broker to fetch back what it lost and rejoin


class KillNemesis(Nemesis):
    kind = "kill"
    shapes = ("controller", "leader", "random", "clean-restart")

    def lasts(self, shape: str) -> bool:
        return False  # the crash is done as it starts: a restart at once still loses what the process held

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[ProcessCrash, Choice]:
        self.check_shape(shape)
        target = "random" if shape == "clean-restart" else shape
        slot, how = choose_broker(rng, view, target)
        mode: CrashMode = "terminate" if shape == "clean-restart" else "kill"
        return ProcessCrash(slot.name, mode), {"shape": shape, **how}


class PowerNemesis(Nemesis):
    kind = "power"
    shapes = ("controller", "leader", "random")
    simulated_only = True

    def lasts(self, shape: str) -> bool:
        return False  # the unsynced writes are lost as it starts, whenever the broker comes back

    def recovery(self, session_timeout: float, shapes: Sequence[str]) -> float:
        # The victim's unsynced records are back on it only once it has rejoined the ISRs: its
        # old session must expire (the controller learns of the death only then, up to one
        # timeout after the power went), it registers again, and catches up. Until then a
        # second power loss can take the last synced copy of what both acknowledged: more than
        # "fewer than min.insync replicas at once", so no longer a bug when it loses data.
        return 2 * session_timeout + POWER_CATCH_UP

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[ProcessCrash, Choice]:
        slot, how = choose_broker(rng, view, self.check_shape(shape))
        return ProcessCrash(slot.name, "power-loss"), {"shape": shape, **how}
