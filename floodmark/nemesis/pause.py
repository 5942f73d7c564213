"""Process pauses: SIGSTOP a broker, as a long garbage-collection pause or a frozen VM would.

A paused broker keeps its sockets and its ZooKeeper session, but makes no progress: it
answers nobody and sends no heartbeats. What happens next depends on how long the pause
lasts relative to the ZooKeeper session timeout: a *short* pause (under it) ends with the
broker resuming as if nothing happened, possibly acting on stale beliefs; a *long* pause
(over it) costs the broker its session, its ephemeral registration and, for the controller,
its office, and it must notice on waking. Shapes pick the target (controller, a partition's
leader, a random broker) and the side of the timeout; the nemesis resumes the process
itself when that duration is up (or at ``stop``, whichever comes first) and records both.
"""

from __future__ import annotations

import random
import threading
import time

from floodmark.harness.cluster import Cluster, Node
from floodmark.nemesis.base import Action, Nemesis, NemesisContext, NemesisError, choose_broker

SHORT = (0.2, 0.7)  # fraction of the session timeout
LONG = (1.5, 3.0)


class PauseNemesis(Nemesis):
    kind = "pause"
    shapes = ("controller-short", "controller-long", "leader-short", "leader-long",
              "random-short", "random-long")

    def __init__(self) -> None:
        self._paused: Node | None = None
        self._pid: int | None = None
        self._paused_at = 0.0
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._resumed: Action | None = None

    def start(self, rng: random.Random, cluster: Cluster, context: NemesisContext,
              shape: str | None = None) -> Action:
        if self._paused is not None:
            raise NemesisError("pause: a process is already paused; stop it first")
        shape = self.choose_shape(rng, shape)
        target, length = shape.split("-")
        node, how = choose_broker(rng, cluster, context, target)
        fraction = rng.uniform(*(SHORT if length == "short" else LONG))
        duration = round(fraction * context.zk_session_timeout, 3)
        pid = node.pid()
        if pid is None:
            return {"shape": shape, **how, "skipped": f"{node.name} is not running"}
        node.pause()
        with self._lock:
            self._paused, self._pid, self._paused_at, self._resumed = node, pid, time.monotonic(), None
            self._timer = threading.Timer(duration, self._resume)
            self._timer.daemon = True
            self._timer.start()
        return {"shape": shape, **how, "pid": pid, "duration": duration,
                "session_timeout": context.zk_session_timeout}

    def _resume(self) -> Action:
        with self._lock:
            if self._paused is None:
                return self._resumed or {}
            node, pid = self._paused, self._pid
            paused_for = round(time.monotonic() - self._paused_at, 3)
            self._paused = None
            if node.pid() == pid:
                node.resume()
                self._resumed = {"node": node.name, "pid": pid, "paused_for": paused_for}
            else:  # killed and restarted meanwhile: the new process was never paused
                self._resumed = {"node": node.name, "pid": pid, "gone": True}
            return self._resumed

    def stop(self, cluster: Cluster, context: NemesisContext) -> Action:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return {"resumed": self._resume()}

    def heal_all(self, cluster: Cluster, context: NemesisContext) -> Action:
        stopped = self.stop(cluster, context)
        # Anything else still stopped (state T) gets SIGCONT too.
        also = []
        for node in cluster.nodes:
            pid = node.pid()
            if pid is not None and _stopped(node, pid):
                node.resume()
                also.append(node.name)
        return {**stopped, "also_resumed": also}


def _stopped(node: Node, pid: int) -> bool:
    result = node.exec(["cat", f"/proc/{pid}/stat"])
    return result.ok and result.stdout.rsplit(")", 1)[-1].split()[:1] == ["T"]
