"""Who owns something the harness leaves on disk or in Docker, and whether that owner lives.

A run registers its resources, an exploration claims its seeds and a run directory being
made names its maker, all by one token: ``host:pid:start-time``. The start time (clock ticks
since boot, from ``/proc``) tells a live owner from another process that reused its pid, so
whoever finds the thing later (the next run, a reader of the store) can tell a maker still at
work from one that was killed (SIGKILL, a crash) and left it behind.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def owner_token() -> str:
    """host:pid:start-time of this process; the start time guards against pid reuse."""
    return f"{socket.gethostname()}:{os.getpid()}:{start_ticks(os.getpid())}"


def start_ticks(pid: int) -> str:
    """When process ``pid`` started, in clock ticks since boot; "" if there is no such
    process, or only its corpse: a zombie (dead, not yet reaped by its parent, as the
    workers of an explorer killed outright can stay in a container whose first process
    does not reap) owns nothing any more."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[1].split()
    return "" if fields[0] in ("Z", "X") else fields[19]


def owner_alive(token: str) -> bool:
    """Whether the process ``token`` names still runs; True for another machine's token,
    which this one cannot judge (a shared Docker engine, a store on shared disk)."""
    host, _, rest = token.partition(":")
    pid_text, _, ticks = rest.partition(":")
    if host != socket.gethostname():
        return True  # another machine's run (shared Docker engine): not ours to judge
    if not pid_text.isdigit():
        return False
    return start_ticks(int(pid_text)) == ticks != ""


def on_this_host(token: str) -> bool:
    """Whether ``token`` names a process of this machine, whose life :func:`owner_alive` knows."""
    return token.partition(":")[0] == socket.gethostname()
