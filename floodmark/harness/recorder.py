"""The recorder: the one place the harness writes the history, stamped by the harness's clock.

Client workers and the nemesis both record ops through a :class:`Recorder`. Times are
nanoseconds since the test started, read from the harness's monotonic clock (never a node's
wall clock, which clock faults skew): the machine's, or the simulator's virtual clock. Each op is appended as it happens with one ``write``
on a file opened for appending (nothing is buffered in the harness, but see below), so a
harness that is killed leaves a readable history holding every op it recorded. The lines are those of
:class:`floodmark.contracts.history.HistoryWriter` (``Op.to_json``), encoded with orjson: the history
is written twice per client op, and the standard library's encoder was a tenth of the
harness's CPU. A lock keeps indices dense should any thread record.

A run on the simulator is the exception (``durable=False``): the whole run is a pure function
of its seed and configuration, so a history cut short by a killed harness is not evidence
anyone needs (``floodmark repro`` replays every op of it, byte for byte), while a system call
per line was a twentieth of a simulated run's CPU. There lines are gathered and written in
large blocks (every :data:`BUFFERED_BYTES`) and at :meth:`Recorder.close`, which the runner
calls on every way out of a run, failed or interrupted; only a harness killed outright loses
the tail, and the seed brings it back.

The recorder also keeps the counts behind the live progress line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from floodmark.contracts.history import Op, OpType, Process

BUFFERED_BYTES = 1 << 20  # a non-durable recorder writes once this much is waiting


def op_line(op: Op) -> bytes:
    """The history line of ``op`` (what ``Op.to_json`` gives, plus the newline), as UTF-8."""
    return _line(op.index, op.time, op.type, op.process, op.f, op.value, op.node, op.error, op.extra)


def _line(index: int, time: int, type: OpType, process: Process, f: str, value: Any, node: str | None,
          error: Any, extra: dict[str, Any] | None = None) -> bytes:
    """:func:`op_line` of the op these fields make, without making it."""
    d: dict[str, Any] = {"index": index, "time": time, "type": type, "process": process, "f": f, "value": value}
    if node is not None:
        d["node"] = node
    if error is not None:
        d["error"] = error
    if extra:
        d.update(extra)
    try:
        return orjson.dumps(d, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # what orjson refuses (non-string keys, huge integers): as Op.to_json does
        return (json.dumps(d, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


class Recorder:
    def __init__(self, path: str | Path, clock_ns: Callable[[], int] = time.monotonic_ns, *,
                 durable: bool = True) -> None:
        """``durable``: every op is in the file when :meth:`record` returns; False (only for
        a replayable run) holds lines back until :meth:`flush` or :meth:`close`."""
        self.path = Path(path)
        self.durable = durable
        self._pending: list[bytes] = []  # lines not written yet (never, when durable)
        self._pending_bytes = 0
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._next_index = 0
        self._lock = threading.Lock()
        self._clock_ns = clock_ns
        self._start_ns = clock_ns()
        self.counts: Counter[str] = Counter()  # completions by type, client ops only

    def now(self) -> int:
        """Nanoseconds since the test started."""
        return self._clock_ns() - self._start_ns

    def seconds(self) -> float:
        return self.now() / 1e9

    def record(
        self, type: OpType, process: Process, f: str, value: Any = None,
        node: str | None = None, error: Any = None,
    ) -> None:
        """Append the op these fields make to the history, stamped now. No :class:`Op` is made:
        a client op is recorded twice, and building a frozen one cost more than its line."""
        with self._lock:
            if self._fd < 0:
                raise ValueError(f"the history {self.path} is closed")
            # now(), inline. Encoded before taking the index: an op that cannot be leaves no gap.
            line = _line(self._next_index, self._clock_ns() - self._start_ns, type, process, f, value, node, error)
            self._next_index += 1
            if self.durable:
                _write_all(self._fd, line)
            else:
                self._pending.append(line)
                self._pending_bytes += len(line)
                if self._pending_bytes >= BUFFERED_BYTES:
                    self._write_pending()
        if type != "invoke" and process != "nemesis":
            self.counts[type] += 1

    @property
    def ops_recorded(self) -> int:
        return self._next_index

    def flush(self) -> None:
        """Write the lines held back (a no-op when durable: nothing ever is)."""
        with self._lock:
            if self._fd >= 0:
                self._write_pending()

    def _write_pending(self) -> None:
        if self._pending:
            _write_all(self._fd, b"".join(self._pending))
            self._pending.clear()
            self._pending_bytes = 0

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                try:
                    self._write_pending()
                finally:
                    os.close(self._fd)
                self._fd = -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
