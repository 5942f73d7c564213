"""Crashes and restarts: kill -9 a broker (the controller, a leader, or any), then restart it.

A SIGKILLed broker loses everything it had not written to disk and its ZooKeeper session
expires only after the session timeout, so the controller learns of the death late; on
restart it must recover its logs, truncate what it should and rejoin the ISR. A clean
restart (SIGTERM, controlled shutdown) is the control case: nothing should be lost. The
process is restarted by ``stop`` on the same machine with the same data directories, and
both pids are recorded.
"""

from __future__ import annotations

import random

from floodmark.harness.cluster import Cluster, Node
from floodmark.nemesis.base import Action, Nemesis, NemesisContext, NemesisError, choose_broker


class KillNemesis(Nemesis):
    kind = "kill"
    shapes = ("controller", "leader", "random", "clean-restart")

    def __init__(self) -> None:
        self._down: list[Node] = []

    def start(self, rng: random.Random, cluster: Cluster, context: NemesisContext,
              shape: str | None = None) -> Action:
        shape = self.choose_shape(rng, shape)
        node, how = choose_broker(rng, cluster, context,
                                  "random" if shape == "clean-restart" else shape)
        pid = node.pid()
        if pid is None:
            return {"shape": shape, **how, "skipped": f"{node.name} is not running"}
        if shape == "clean-restart":
            node.stop(timeout=context.zk_session_timeout * 2)
            signal_name = "SIGTERM"
        else:
            node.kill()
            signal_name = "SIGKILL"
        self._down.append(node)
        return {"shape": shape, **how, "pid": pid, "signal": signal_name}

    def stop(self, cluster: Cluster, context: NemesisContext) -> Action:
        restarted = {}
        for node in self._down:
            if node.is_running():
                continue
            node.start()
            restarted[node.name] = node.pid()
        self._down = []
        return {"restarted": restarted}

    def heal_all(self, cluster: Cluster, context: NemesisContext) -> Action:
        self._down = []
        restarted = {}
        for node in cluster.nodes:
            if not node.is_running():
                node.start()
                restarted[node.name] = node.pid()
        if any(pid is None for pid in restarted.values()):
            raise NemesisError(f"kill: restart failed for {restarted}")
        return {"restarted": restarted}
