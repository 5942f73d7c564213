"""libfaketime: how real backends move one broker's wall clock without touching the machine's.

Brokers run under libfaketime (``LD_PRELOAD``) reading a *timestamp file* on every clock
call (``FAKETIME_NO_CACHE=1``). The file holds ``"<offset seconds> x<rate>"``; rewriting it
moves the running process's wall clock at once. The monotonic clock is left alone
(``FAKETIME_DONT_FAKE_MONOTONIC=1``: faking it hangs Python's waits), exactly like a real
NTP step, which moves wall time and not monotonic time. libfaketime applies a rate from the
moment the process started (wall = start + (now - start) * rate + offset), so a rate change
"from now on" writes the offset that keeps the clock continuous at the moment of the change.
"""

from __future__ import annotations

import os
from pathlib import Path

from floodmark.harness.cluster import ClusterError, Node

NO_SKEW = "+0 x1"
# Where the broker image keeps the library (see docker/broker.Dockerfile).
CONTAINER_LIBRARY = "/usr/local/lib/floodmark/libfaketime.so.1"


def libfaketime_library() -> str:
    """The libfaketime shared object shipped in the PyPI ``libfaketime`` package.

    Debian's 0.9.10 build breaks ``time.sleep`` once the monotonic clock is left unfaked;
    this one does not. ``FLOODMARK_LIBFAKETIME`` overrides the path.
    """
    override = os.environ.get("FLOODMARK_LIBFAKETIME")
    if override:
        return override
    import libfaketime

    path = Path(libfaketime.__file__).parent / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"
    if not path.exists():
        raise ClusterError(f"libfaketime shared object not found at {path}")
    return str(path)


def broker_environment(clock_file: str, library: str | None = None) -> dict[str, str]:
    """Environment variables a broker must start with so clock faults can reach it."""
    return {
        "LD_PRELOAD": library or libfaketime_library(),
        "FAKETIME_TIMESTAMP_FILE": clock_file,
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def clock_spec(offset: float, rate: float = 1.0) -> str:
    return f"{offset:+.3f} x{rate:g}"


def write_clock(node: Node, offset: float, rate: float = 1.0) -> str:
    if node.clock_file is None:
        raise ClusterError(f"{node.name}: its process does not run under libfaketime")
    spec = clock_spec(offset, rate)
    node.write_file(node.clock_file, spec + "\n")
    return spec


def process_start_time(node: Node) -> float:
    """Real wall time at which the node's process started (when libfaketime began counting).

    Computed from the process's age (uptime minus its start in ticks since boot) and the
    node's clock read in the same command; ``/proc/stat``'s ``btime`` is whole seconds and
    drifts, which would make a rate change jump by a second.
    """
    pid = node.pid()
    if pid is None:
        raise ClusterError(f"{node.name}: not running")
    result = node.exec(["sh", "-c", 'cat "/proc/$1/stat" /proc/uptime && date +%s.%N', "age", str(pid)])
    lines = result.stdout.splitlines()
    if not result.ok or len(lines) < 3:
        raise ClusterError(f"{node.name}: cannot read /proc/{pid}/stat: {result.stderr.strip()}")
    start_ticks = int(lines[0].rsplit(")", 1)[1].split()[19])
    uptime = float(lines[1].split()[0])
    now = float(lines[2])
    return now - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
