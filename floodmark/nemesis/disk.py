"""Disk faults: take a broker's log directory away from it, then give it back.

KIP-112 says a broker whose log directory fails must take that directory offline (its
replicas go offline, the controller is told through ``/log_dir_event_notification`` and
elects new leaders) rather than crash or serve from a broken disk. The fault that triggers
it here is a permission fault, because it is real and reversible: ``chmod 000`` on the
directory, or the directory moved aside and replaced by a plain file. Files the broker
already has open keep working (as on a real failing disk, errors come when it opens, rolls
or lists), so the broker finds out at its next such operation.

The commands run as the broker's own user: it owns the directory, so it may chmod it, and
since the broker process itself runs without the privileges that ignore permissions, the
fault really denies it. Heal restores the recorded mode or moves the directory back.
"""

from __future__ import annotations

import random

from floodmark.harness.cluster import BROKER_USER, Cluster, Node
from floodmark.nemesis.base import Action, Nemesis, NemesisContext, NemesisError

DISPLACED = ".floodmark-displaced"


def _run(node: Node, script: str, *args: str) -> str:
    result = node.exec(["sh", "-c", script, "disk", *args], user=BROKER_USER)
    if not result.ok:
        raise NemesisError(f"{node.name}: disk fault command failed: {result.stderr.strip()}")
    return result.stdout.strip()


class DiskNemesis(Nemesis):
    kind = "disk"
    shapes = ("chmod", "replace-with-file")

    def __init__(self) -> None:
        self._faults: list[dict[str, str]] = []

    def start(self, rng: random.Random, cluster: Cluster, context: NemesisContext,
              shape: str | None = None) -> Action:
        shape = self.choose_shape(rng, shape)
        node = rng.choice(sorted(cluster.brokers, key=lambda b: b.broker_id or 0))
        if not node.log_dirs:
            raise NemesisError(f"{node.name}: has no log directories")
        directory = rng.choice(list(node.log_dirs))
        fault = {"node": node.name, "dir": directory, "shape": shape}
        if shape == "chmod":
            fault["mode"] = _run(node, 'stat -c %a "$1" && chmod 000 "$1"', directory)
        else:
            _run(node, 'mv "$1" "$1$2" && touch "$1"', directory, DISPLACED)
            fault["moved_to"] = directory + DISPLACED
        self._faults.append(fault)
        return {**fault}

    def _heal(self, cluster: Cluster, fault: dict[str, str]) -> dict[str, str]:
        node = cluster.node(fault["node"])
        if fault["shape"] == "chmod":
            _run(node, 'chmod "$2" "$1"', fault["dir"], fault["mode"])
            return {**fault, "restored_mode": fault["mode"]}
        _run(node, 'rm -f "$1" && mv "$1$2" "$1"', fault["dir"], DISPLACED)
        return {**fault, "restored": fault["dir"]}

    def stop(self, cluster: Cluster, context: NemesisContext) -> Action:
        healed = [self._heal(cluster, fault) for fault in self._faults]
        self._faults = []
        return {"healed": healed}

    def heal_all(self, cluster: Cluster, context: NemesisContext) -> Action:
        self._faults = []
        # Whatever any run left: displaced directories moved back, mode-0 directories opened.
        script = ('for d in "$@"; do '
                  'if [ -e "$d.floodmark-displaced" ]; then rm -f "$d"; '
                  'mv "$d.floodmark-displaced" "$d"; echo "moved $d"; fi; '
                  'if [ "$(stat -c %a "$d")" = 0 ]; then chmod 755 "$d"; echo "chmod $d"; fi; '
                  'done')
        healed = {}
        for node in cluster.brokers:
            if node.log_dirs:
                output = _run(node, script, *node.log_dirs)
                if output:
                    healed[node.name] = output.splitlines()
        return {"healed": healed}
