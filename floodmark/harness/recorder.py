"""The recorder: the one place the harness writes the history, stamped by the harness's clock.

Client workers and the nemesis both record ops through a :class:`Recorder`. Times are
nanoseconds since the test started, read from the harness's monotonic clock (never a node's
wall clock, which clock faults skew). Each op is appended and flushed as it happens through
:class:`floodmark.history.HistoryWriter`, so a harness that is killed leaves a readable
history. The nemesis records from worker threads too, hence the lock.

The recorder also keeps the counts behind the live progress line.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from floodmark.history import HistoryWriter, Op, OpType, Process


class Recorder:
    def __init__(self, path: str | Path) -> None:
        self._writer = HistoryWriter(path)
        self._lock = threading.Lock()
        self._start_ns = time.monotonic_ns()
        self.counts: Counter[str] = Counter()  # completions by type, client ops only

    def now(self) -> int:
        """Nanoseconds since the test started."""
        return time.monotonic_ns() - self._start_ns

    def seconds(self) -> float:
        return self.now() / 1e9

    def record(
        self, type: OpType, process: Process, f: str, value: Any = None,
        node: str | None = None, error: Any = None,
    ) -> Op:
        with self._lock:
            op = self._writer.append(self.now(), type, process, f, value, node, error)
        if type != "invoke" and process != "nemesis":
            self.counts[type] += 1
        return op

    @property
    def ops_recorded(self) -> int:
        return self._writer.next_index

    def close(self) -> None:
        with self._lock:
            self._writer.close()
