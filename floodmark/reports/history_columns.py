"""A history loaded for reporting: every op's header as columns, full ops on demand.

A report of a million-op history must not build a million ``Op`` objects: it needs the
time, type, process and ``f`` of every op (for pairing, latency and the process timeline)
but the full op, value included, only for the few shown in an anomaly's context. So each
line is decoded once (with orjson when it is installed, else the standard json module),
its header fields are checked and kept in parallel lists, and the decoded object is kept
to become an ``Op`` (through the history contract's own ``op_from_dict``) when asked for.

The checks are the contract's: dense indices from 0, integer times, a known type, an
integer or string process and a string ``f``, and no object naming a key twice (as the
history's reader refuses it; a byte order mark at the start is dropped as it drops it). A
malformed line is a ``HistoryError`` naming the file and line, except a torn last line (the
beginning of a JSON text with no newline after it), which a killed harness may leave and
which is ignored as ``floodmark.contracts.history`` ignores it (and kept as ``torn_tail``, for the
report to say).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any, NoReturn, overload

from floodmark.contracts.history import NEMESIS, OP_TYPES, HistoryError, Op, TornTail, op_from_dict
from floodmark.errors import one_line
from floodmark.inputs.duplicate_keys import duplicate_key, keys_unaccounted
from floodmark.inputs.plain_values import parse_json
from floodmark.inputs.sources import describe_os_error, file_problem, other_encoding, without_bom
from floodmark.inputs.torn_lines import cut_short

_loads: Callable[[bytes], Any]
try:  # orjson decodes a history several times faster; it is optional
    import orjson

    _loads = orjson.loads
    _DecodeError: type[Exception] = orjson.JSONDecodeError
except ImportError:  # pragma: no cover - depends on the environment
    import json

    _loads = json.loads
    _DecodeError = ValueError


_HEADER = itemgetter("index", "time", "type", "process", "f")


class HistoryColumns(Sequence[Op]):
    """The ops of a history as a sequence of ``Op``, with header columns for bulk work."""

    def __init__(self, source: str, raw: list[Any]) -> None:
        self.source = source
        self.raw: list[dict[str, Any]] = raw
        self.time: list[int] = []
        self.type: list[str] = []
        self.process: list[Any] = []
        self.f: list[str] = []
        self.nemesis_indices: list[int] = []
        self._ops: dict[int, Op] = {}
        self.torn_tail: TornTail | None = None  # the last line, cut short and left unread
        self._check_all()

    def _check_all(self) -> None:
        """Fill the columns and validate them, column-wise in C where possible (the hot path)."""
        raw = self.raw
        try:
            columns = list(zip(*map(_HEADER, raw)))
        except (KeyError, TypeError):
            self._find_bad_line()
        if not columns:
            return
        indices, times, types, processes, fs = (list(c) for c in columns)
        try:
            malformed = (indices != list(range(len(raw))) or set(map(type, indices)) != {int}
                         or set(map(type, times)) != {int} or not set(types) <= OP_TYPES
                         or not set(map(type, processes)) <= {int, str} or set(map(type, fs)) != {str})
        except TypeError:  # an unhashable value (a list, an object) where a word belongs
            malformed = True
        if malformed:
            self._find_bad_line()
        self.time, self.type, self.process, self.f = times, types, processes, fs
        self.nemesis_indices = [i for i, p in enumerate(processes) if p == NEMESIS]

    def _find_bad_line(self) -> NoReturn:
        """Say exactly which line is wrong and how, with the contract's own validation."""
        for position, d in enumerate(self.raw):
            op = op_from_dict(d, self.source, position + 1)
            if op.index != position:
                raise HistoryError(self.source, position + 1, f"index {op.index} out of sequence (expected {position})")
        raise HistoryError(self.source, 0, "malformed history")  # unreachable: some line failed above

    @classmethod
    def from_ops(cls, ops: Iterable[Op], source: str = "<history>") -> HistoryColumns:
        return cls(source, [op.to_dict() for op in ops])

    def __len__(self) -> int:
        return len(self.raw)

    @overload
    def __getitem__(self, i: int) -> Op: ...

    @overload
    def __getitem__(self, i: slice) -> list[Op]: ...

    def __getitem__(self, i: int | slice) -> Op | list[Op]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self.raw)
        op = self._ops.get(i)
        if op is None:
            op = self._ops[i] = op_from_dict(self.raw[i], self.source, i + 1)
        return op

    def __iter__(self) -> Iterator[Op]:
        return (self[i] for i in range(len(self.raw)))

    @property
    def end_time(self) -> int:
        return self.time[-1] if self.time else 0

    def pairs(self) -> dict[int, int]:
        """Invocation index -> completion index, per process in order (as history.pair_ops)."""
        open_by_process: dict[Any, int] = {}
        pairs: dict[int, int] = {}
        for index, (op_type, process) in enumerate(zip(self.type, self.process)):
            if op_type == "invoke":
                open_by_process[process] = index
            elif process in open_by_process:
                pairs[open_by_process.pop(process)] = index
        return pairs


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of acyclic objects.

    Decoded JSON holds no reference cycles, but each allocation burst still triggers
    collections that rescan the whole growing heap: pausing makes loading ~3x faster.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _line_problem(line: bytes, error: Exception) -> str:
    """What is wrong with a line the fast decoder refused, in the words ``floodmark check``
    and ``analyze`` use (a byte that is not UTF-8 named as such, not as orjson's "surrogates
    not allowed"); only a malformed line pays for the second parse."""
    try:
        parse_json(line)
    except ValueError as e:
        return str(e)
    return f"not valid JSON ({one_line(str(error))})"


def load_history(path: str | os.PathLike[str]) -> HistoryColumns:
    with paused_gc():
        return _load_history(path)


def _load_history(path: str | os.PathLike[str]) -> HistoryColumns:
    source = str(path)
    try:
        with open(path, "rb") as f:
            data = without_bom(f.read())
    except OSError as e:  # not ours to read, a disk error: the history's problem, in one line
        raise HistoryError(source, 0, f"cannot read: {file_problem(path) or describe_os_error(e)}") from None
    encoding = other_encoding(data)
    if encoding is not None:
        raise HistoryError(source, 0, encoding)
    lines = data.split(b"\n")
    torn_tail = not data.endswith(b"\n")
    raw: list[dict[str, Any]] = []
    last = len(lines) - 1
    torn: TornTail | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            d = _loads(line)
        except (_DecodeError, ValueError, UnicodeDecodeError) as e:
            if torn_tail and number == last + 1 and cut_short(line):
                # a half-written last line: the harness was killed mid-write (or the file was cut)
                torn = TornTail(source, number, one_line(str(e)))
                break
            raise HistoryError(source, number, _line_problem(line, e)) from None
        if keys_unaccounted(line, d):  # (what the history's reader refuses: a key given twice)
            twice = duplicate_key(line, d)
            if twice is not None:
                raise HistoryError(source, number, twice)
        raw.append(d)
    columns = HistoryColumns(source, raw)
    columns.torn_tail = torn
    return columns
