"""Disk faults: take a broker's log directory away from it, then give it back.

KIP-112 says a broker whose log directory fails must take that directory offline (its
replicas go offline, the controller is told through ``/log_dir_event_notification`` and
elects new leaders) rather than crash or serve from a broken disk. The fault that triggers
it is a permission fault, because it is real and reversible: the directory made unreadable
(``chmod 000``), or moved aside and replaced by a plain file. Files the broker already has
open keep working (as on a real failing disk, errors come when it opens, rolls or lists), so
the broker finds out at its next such operation. Heal restores the mode or the directory.
"""

from __future__ import annotations

import random

from floodmark.harness.faults import ClusterView, DiskFault, DiskMode
from floodmark.nemesis.base import Choice, Nemesis, NemesisError, brokers_by_id


class DiskNemesis(Nemesis):
    kind = "disk"
    shapes = ("chmod", "replace-with-file")

    def plan(self, rng: random.Random, view: ClusterView, shape: str,
             duration: float) -> tuple[DiskFault, Choice]:
        self.check_shape(shape)
        slot = rng.choice(brokers_by_id(view))
        if not slot.log_dirs:
            raise NemesisError(f"{slot.name}: has no log directories")
        directory = rng.choice(list(slot.log_dirs))
        mode: DiskMode = "chmod" if shape == "chmod" else "replace-with-file"
        return DiskFault(slot.name, directory, mode), {"shape": shape, "node": slot.name}
