"""Whether a real node's process is stopped by a signal (SIGSTOP), read from ``/proc`` on the node.

A paused broker is still running: its pid, its sockets and its ZooKeeper session (until it
times out) are there; only ``/proc/<pid>/stat`` says it is frozen. Pause faults prove they
took with it, heal-all finds paused processes with it, and an upgrade's roll waits for a
paused broker rather than restart it (which would cut another fault short).
"""

from __future__ import annotations

import time

from floodmark.harness.cluster import Node


def is_stopped(node: Node, pid: int) -> bool:
    """Is the process in state T (stopped by a signal)?"""
    result = node.exec(["cat", f"/proc/{pid}/stat"])
    return result.ok and result.stdout.rsplit(")", 1)[-1].split()[:1] == ["T"]


def seen_stopped(node: Node, pid: int, within: float = 2.0) -> bool:
    """Is the process seen stopped within ``within`` seconds? A signal is delivered
    asynchronously: on a loaded machine the state lags the kill call."""
    deadline = time.monotonic() + within
    while not is_stopped(node, pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
