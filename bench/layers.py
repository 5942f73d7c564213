"""Where a simulated run's CPU goes, by layer of the code: a sampling profiler in a page.

``cProfile`` charges every Python call with its own bookkeeping, which inflates code made of
many small calls (the simulator's plumbing) against code made of few large ones, so its
shares mislead exactly where the question is which layer to make cheaper. This samples
instead: a ``SIGPROF`` timer interrupts the process every few hundred microseconds of CPU
time, and each interruption is counted against the Python code that was running then: a C
function (a heap push, a JSON encoder) counts for the Python code that called it, and so
does code outside floodmark and asyncio (a generated dataclass ``__init__``, the standard
library's weak sets). The frame's file names its layer:

* ``simulator``: ``floodmark/reference/sim/`` and asyncio itself (the event loop's turns,
  tasks, futures, timeouts and events): what running the nodes on virtual time costs;
* ``protocol``: the rest of ``floodmark/reference/`` (broker, controller, log, wire
  messages) but the client library: the system under test;
* ``clients``: ``floodmark/reference/client/``, the producer and consumer the workload uses;
* ``harness``: the rest of ``floodmark/`` (generator, workload, recorder, runner, backend,
  node events);
* ``other``: what no floodmark or asyncio code called (the interpreter's start, imports).

The timer is the kernel's profiling clock, which ticks with the scheduler (every 4 ms on a
250 Hz kernel), so a run of a few CPU seconds gives some hundreds of samples: shares to a
few per cent.

A Python signal handler runs only at the next point the interpreter checks for signals, not
in the middle of a C call: work done in C by asyncio's tasks and futures (resuming a
coroutine, running a callback) is charged to the Python function that starts next, often a
small one of the harness. So the harness's share is overstated: on 2026-11-28 a one-line
``SimBackend.clock_ns`` drew 1.7% of samples, more than the generator's step, while stubbing
every client op's history line saved 2.7% of the instructions (``bench_sim.py
--instructions``) and removing the per-op deadline altogether 1.5%. Judge a change by its
instruction count, and these shares as where to look, not what a layer costs.
"""

from __future__ import annotations

import collections
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

LAYERS = ("simulator", "protocol", "clients", "harness", "other")
INTERVAL = 0.001  # seconds of CPU time between samples asked for (the kernel rounds up to its tick)


def layer_of(filename: str) -> str | None:
    """The layer the code in ``filename`` belongs to, None if it belongs to its caller's
    (see the module docstring)."""
    if "/asyncio/" in filename or "/floodmark/reference/sim/" in filename:
        return "simulator"
    if "/floodmark/reference/client/" in filename:
        return "clients"
    if "/floodmark/reference/" in filename:
        return "protocol"
    if "/floodmark/" in filename:
        return "harness"
    return None


class LayerSamples:
    """Samples counted per layer while :meth:`sampling` is active."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._layers: dict[str, str | None] = {}  # file -> layer, looked up once per file

    def _sample(self, signum: int, frame: FrameType | None) -> None:
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename not in self._layers:
                self._layers[filename] = layer_of(filename)
            layer = self._layers[filename]
            if layer is not None:
                self.counts[layer] += 1
                return
            frame = frame.f_back
        self.counts["other"] += 1

    @contextmanager
    def sampling(self) -> Iterator[None]:
        previous: Callable[..., Any] | int | None = signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0, 0)
            signal.signal(signal.SIGPROF, previous)

    def shares(self) -> dict[str, float]:
        """Each layer's share of the samples, in :data:`LAYERS` order."""
        total = sum(self.counts.values()) or 1
        return {layer: self.counts[layer] / total for layer in LAYERS}
