"""The history: what the clients and the nemesis did, as a sequence of operations.

A history is Jepsen's central record. Every client operation appears twice: once when it is
*invoked* and once when it *completes*, as `ok` (it happened), `fail` (it certainly did not
happen) or `info` (unknown: a timeout, an ambiguous acknowledgement, a lost connection after
sending). The nemesis writes its own ops, with `process` set to ``"nemesis"``, recording
exactly which faults it applied.

On disk a history is ``history.jsonl``: one op per line, appended and flushed as it happens
so that a crashed run keeps everything it recorded. Field names follow Jepsen so histories
convert both ways:

    index    dense, from 0
    time     ns since the start of the test, from the harness's monotonic clock
    type     "invoke" | "ok" | "fail" | "info"
    process  int for clients, "nemesis" for the nemesis
    f        what the op does ("send", "poll", "append", "read", "start-partition", ...)
    value    the op's argument on invoke, its result on completion
    node     optional: the node the op was sent to
    error    optional: why an op failed or is unknown

A process whose op ended `info` never issues another op: its worker continues under a new
process number, because the old one may still be acting in the system.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from floodmark.errors import SourceError

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: frozenset[str] = frozenset(("invoke", "ok", "fail", "info"))
NEMESIS = "nemesis"

Process = int | str


class HistoryError(SourceError):
    """A history that cannot be read: names the file, the line and what is wrong."""


@dataclass(frozen=True, slots=True)
class Op:
    """One history entry (an invocation or a completion)."""

    index: int
    time: int
    type: OpType
    process: Process
    f: str
    value: Any = None
    node: str | None = None
    error: Any = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_invoke(self) -> bool:
        return self.type == "invoke"

    @property
    def is_client(self) -> bool:
        return self.process != NEMESIS

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "type": self.type,
            "process": self.process,
            "f": self.f,
            "value": self.value,
        }
        if self.node is not None:
            d["node"] = self.node
        if self.error is not None:
            d["error"] = self.error
        d.update(self.extra)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)


_KNOWN_FIELDS = frozenset(("index", "time", "type", "process", "f", "value", "node", "error"))


def op_from_dict(d: Any, source: str = "<history>", line: int = 0) -> Op:
    """Build an Op from a decoded JSON object, validating every field."""
    if not isinstance(d, dict):
        raise HistoryError(source, line, f"expected a JSON object, got {type(d).__name__}")
    for name in ("index", "time", "type", "process", "f"):
        if name not in d:
            raise HistoryError(source, line, f"missing field {name!r}")
    index, time, op_type, process, f = d["index"], d["time"], d["type"], d["process"], d["f"]
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise HistoryError(source, line, f"index must be a non-negative integer, got {index!r}")
    if not isinstance(time, int) or isinstance(time, bool):
        raise HistoryError(source, line, f"time must be an integer (ns), got {time!r}")
    if op_type not in OP_TYPES:
        raise HistoryError(source, line, f"type must be one of invoke/ok/fail/info, got {op_type!r}")
    if not (isinstance(process, str) or (isinstance(process, int) and not isinstance(process, bool))):
        raise HistoryError(source, line, f"process must be an integer or a string, got {process!r}")
    if not isinstance(f, str):
        raise HistoryError(source, line, f"f must be a string, got {f!r}")
    node = d.get("node")
    if node is not None and not isinstance(node, str):
        raise HistoryError(source, line, f"node must be a string, got {node!r}")
    extra = {k: v for k, v in d.items() if k not in _KNOWN_FIELDS}
    return Op(index, time, op_type, process, f, d.get("value"), node, d.get("error"), extra)


def iter_history(path: str | os.PathLike[str], *, tolerate_torn_tail: bool = True) -> Iterator[Op]:
    """Read a JSONL history lazily.

    A run whose harness was killed may end in a half-written line; with
    ``tolerate_torn_tail`` that last line is ignored (it was never flushed whole), while a
    malformed line anywhere else is an error naming the file and line.
    """
    source = str(path)
    with open(path, encoding="utf-8") as f:
        pending: tuple[int, str] | None = None
        for number, raw in enumerate(f, start=1):
            if pending is not None:
                yield _parse_line(source, *pending)
                pending = None
            if not raw.strip():
                continue
            if not raw.endswith("\n"):
                pending = (number, raw)  # maybe a torn tail; decide at EOF
                continue
            yield _parse_line(source, number, raw)
        if pending is not None:
            try:
                yield _parse_line(source, *pending)
            except HistoryError:
                if not tolerate_torn_tail:
                    raise


def _parse_line(source: str, number: int, raw: str) -> Op:
    try:
        d = json.loads(raw)
    except json.JSONDecodeError as e:
        raise HistoryError(source, number, f"not valid JSON ({e.msg} at column {e.colno})") from None
    return op_from_dict(d, source, number)


def read_history(path: str | os.PathLike[str], *, check_dense: bool = True) -> list[Op]:
    """Read a whole JSONL history, checking that indices are dense from 0."""
    ops = list(iter_history(path))
    if check_dense:
        for position, op in enumerate(ops):
            if op.index != position:
                raise HistoryError(
                    str(path), position + 1, f"index {op.index} out of sequence (expected {position})"
                )
    return ops


class HistoryWriter:
    """Appends ops to ``history.jsonl``, flushing each line so a crash loses nothing recorded."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._fsync = fsync
        self.next_index = 0

    def append(
        self,
        time: int,
        type: OpType,
        process: Process,
        f: str,
        value: Any = None,
        node: str | None = None,
        error: Any = None,
    ) -> Op:
        op = Op(self.next_index, time, type, process, f, value, node, error)
        self.next_index += 1
        self._file.write(op.to_json() + "\n")
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())
        return op

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_history(path: str | os.PathLike[str], ops: Iterable[Op]) -> None:
    """Write a complete history (used by converters and tests)."""
    with open(path, "w", encoding="utf-8") as f:
        for op in ops:
            f.write(op.to_json() + "\n")


def pair_ops(ops: list[Op]) -> dict[int, int]:
    """Map each invocation's index to its completion's index (per process, in order).

    Invocations with no completion (the run ended first) are absent from the map.
    """
    open_by_process: dict[Process, int] = {}
    pairs: dict[int, int] = {}
    for op in ops:
        if op.type == "invoke":
            open_by_process[op.process] = op.index
        elif op.process in open_by_process:
            pairs[open_by_process.pop(op.process)] = op.index
    return pairs
