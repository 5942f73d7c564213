"""Seeds: one integer decides every choice the harness makes.

A run has one seed. Each part of the harness that makes random choices draws from its own
*named stream*, derived from the seed and the stream's name by hashing, so the streams are
independent of each other: the fault schedule does not change when a worker is added, a
worker's ops do not change when the schedule draws one more number, and worker 3 makes the
same choices whether there are 4 workers or 40. Re-running with the same seed replays every
choice of the harness (the system under test may of course still behave differently).

Streams are ordinary ``random.Random`` objects, seeded with 64 bits of SHA-256 of
``"<seed>/<name>"``.
"""

from __future__ import annotations

import hashlib
import os
import random

SCHEDULE = "schedule"
WORKLOAD = "workload"
NEMESIS = "nemesis"
CLUSTER = "cluster"


def new_seed() -> int:
    """A fresh seed for a run that was not given one (small enough to type back in)."""
    return int.from_bytes(os.urandom(4), "big")


def derive(seed: int, name: str) -> int:
    """The 64-bit seed of stream ``name`` under the run seed ``seed``."""
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Seeds:
    """The named random streams of one run."""

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"a seed is a non-negative integer, got {seed!r}")
        self.seed = seed

    def stream(self, name: str) -> random.Random:
        """A new generator for ``name``; asking twice gives two generators in the same state."""
        return random.Random(derive(self.seed, name))

    def schedule(self) -> random.Random:
        return self.stream(SCHEDULE)

    def workload(self) -> random.Random:
        return self.stream(WORKLOAD)

    def worker(self, worker: int) -> random.Random:
        """The stream of client worker ``worker`` (the same whatever the concurrency)."""
        return self.stream(f"worker/{worker}")

    def fault(self, number: int) -> random.Random:
        """The stream a nemesis uses for the choices of the ``number``-th scheduled fault."""
        return self.stream(f"fault/{number}")

    def node(self, node: str) -> int:
        """A seed for a node's own runtime (brokers seed their Runtime.random with it)."""
        return derive(self.seed, f"node/{node}") % (2**31)

    def __repr__(self) -> str:
        return f"Seeds({self.seed})"
