"""ZooKeeper session expiry of a live broker: the server forgets it while the process runs on.

A broker whose session expires loses its ephemeral registration (and, for the controller, its
office) although nothing happened to the process: exactly what a long GC pause or a network
blip to ZooKeeper does in production, without the pause. The broker must notice at its next
interaction with ZooKeeper, stop acting on what its old session entitled it to, and register
again as a new incarnation. Only the simulator can expire a session on demand (a real
ZooKeeper server expires one only when the client stays silent past the timeout).
"""

from __future__ import annotations

import random

from floodmark.harness.faults import ClusterView, SessionExpiry
from floodmark.nemesis.base import Choice, Nemesis, choose_broker


class SessionNemesis(Nemesis):
    kind = "session"
    shapes = ("controller", "leader", "random")
    simulated_only = True

    def lasts(self, shape: str) -> bool:
        return False  # the session expires as it starts; healing does nothing

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[SessionExpiry, Choice]:
        slot, how = choose_broker(rng, view, self.check_shape(shape))
        return SessionExpiry(slot.name), {"shape": shape, **how}
