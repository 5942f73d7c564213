"""The ``sim`` backend: the whole cluster in one process, on virtual time, run after run the same.

ZooKeeper, the brokers (the same reference code the real backends run), their disks, the
network and the workload's clients live in one :class:`~floodmark.reference.sim.world.SimWorld`:
``cluster`` makes its nodes answer the node-control interface, ``faults`` applies every fault
plan (and those no real backend can: power loss, session expiry, message faults), ``clients``
gives the workload its runtimes, and ``backend`` ties them together for the runner. It needs
nothing installed: no root, Docker or Java. The same seed and configuration give the same
history and node events, byte for byte.
"""

from floodmark.backends.sim.backend import SimBackend

__all__ = ["SimBackend"]
