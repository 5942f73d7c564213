"""Thread stalls: one thread of a broker stuck while the rest of the process runs on.

A garbage-collection pause, a slow disk under a synchronous log call or lock contention can
stop one thread of a process while the others go on answering: the broker keeps its
ZooKeeper session and serves fetches, but its controller handles no event. The controller
then acts, when it resumes, on what it read before it stopped, however much changed since.
KAFKA-6082 is the worst case: the controller's event thread stalls with an event in hand,
its broker's session expires meanwhile, another broker becomes controller, the broker
registers again with a new session, and the stalled event then writes partition state
through that new session. Only the controller-epoch check on every write stops it.

Shapes (aimed at the broker that is controller when the fault starts):

- ``controller``: its event thread stalls for the fault's duration;
- ``controller-session-expired``: the same, and its broker's session is expired as soon as
  the thread is stuck (KAFKA-6082 itself).

The stall strikes at the thread's next safepoint (``Runtime.safepoint``): where the
controller has decided partition states and not yet written them, so it is stuck mid-event
with a decision in hand (see ``reference.sim.node``). A controller with nothing to decide
while the stall is armed (no broker lost or back, no ISR change) never reaches it, so a run
of stalls alone reports them as not taken effect: the fault worth having is a stall beside a
kill, session, partition or failover fault, which swarm tests and ``--nemesis all`` draw (and
failover's ``stalled-controller`` pattern plans the two together). Only the simulator applies it.
"""

from __future__ import annotations

import random

from floodmark.harness.faults import ClusterView, ThreadStall
from floodmark.nemesis.base import Choice, Nemesis, choose_broker


class StallNemesis(Nemesis):
    kind = "stall"
    shapes = ("controller", "controller-session-expired")
    simulated_only = True

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[ThreadStall, Choice]:
        expire = self.check_shape(shape) == "controller-session-expired"
        slot, how = choose_broker(rng, view, "controller")
        return ThreadStall(slot.name, "controller", expire_session=expire), {"shape": shape, **how}
