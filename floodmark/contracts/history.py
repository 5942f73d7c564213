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

A harness killed mid-write leaves a last line cut short, with no newline after it. Readers
forgive that line and only that one: a last line that is the beginning of a JSON text
(:func:`~floodmark.inputs.torn_lines.cut_short`). A complete line is judged like any other, with
or without its newline, and so is a last line malformed where it stands. The forgiven line
is not silently gone: :func:`read_history` and :func:`parse_history` return the ops as
:class:`OpsRead`, whose ``torn_tail`` says which line was left out and why, for whoever
judges the history to pass on.

Ops are recorded in the order they happen, each stamped by one monotonic clock as it is
recorded: a history whose indices are not dense from 0, or whose time goes back, has been
reordered or edited, and is refused where it goes wrong (a checker orders ops by index, and
would judge a history that no run recorded).

What the JSON parsers would read silently is refused too: an object naming a key twice
(``"type":"fail","type":"ok"`` reads as its last; :mod:`floodmark.inputs.duplicate_keys`).
A UTF-8 byte order mark before the first op, which some editors save, is no part of it and
is dropped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from floodmark.errors import SourceError, one_line
from floodmark.frozen_init import fast_frozen_init
from floodmark.inputs.plain_values import json_lines_parser, parse_json
from floodmark.inputs.sources import skip_bom, without_bom
from floodmark.inputs.torn_lines import cut_short

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: frozenset[str] = frozenset(("invoke", "ok", "fail", "info"))
NEMESIS = "nemesis"
# The reads that close a run, after every fault is healed: the queue workload's drain and
# the log-lin workload's final read (each of one partition, from offset 0 to its end).
DRAIN, FINAL_READ = "drain", "final-read"

Process = int | str


class HistoryError(SourceError):
    """A history that cannot be read: names the file, the line and what is wrong."""


@fast_frozen_init
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
_MAX_TIME = 2**63  # ns on a 64-bit clock: far past any run


def op_from_dict(d: Any, source: str = "<history>", line: int = 0) -> Op:
    """Build an Op from a decoded JSON object, validating every field."""
    if not isinstance(d, dict):
        raise HistoryError(source, line, f"expected a JSON object, got {_kind(d)}")
    for name in ("index", "time", "type", "process", "f"):
        if name not in d:
            raise HistoryError(source, line, f"missing field {name!r}")
    index, time, op_type, process, f = d["index"], d["time"], d["type"], d["process"], d["f"]
    if type(index) is not int or not 0 <= index < _MAX_TIME:
        raise HistoryError(source, line, f"index must be a non-negative integer, got {_short(index)}")
    if type(time) is not int or not -_MAX_TIME < time < _MAX_TIME:
        raise HistoryError(source, line, f"time must be an integer (ns), got {_short(time)}")
    if type(op_type) is not str or op_type not in OP_TYPES:
        raise HistoryError(source, line, f"type must be one of invoke/ok/fail/info, got {_short(op_type)}")
    if not (type(process) is str or (type(process) is int and -_MAX_TIME < process < _MAX_TIME)):
        raise HistoryError(source, line, f"process must be an integer or a string, got {_short(process)}")
    if type(f) is not str:
        raise HistoryError(source, line, f"f must be a string, got {_short(f)}")
    node = d.get("node")
    if node is not None and type(node) is not str:
        raise HistoryError(source, line, f"node must be a string, got {_short(node)}")
    if "value" not in d:
        # In JSON an absent value is not null: read as null, a read of 7 whose field was
        # misspelt passed as a read of nothing.
        raise HistoryError(source, line, "missing field 'value' (null if the op has none)")
    value = d["value"]
    if type(value) is dict and "value" not in value:
        missing = inner_value_missing(op_type, process, f, value)
        if missing is not None:
            raise HistoryError(source, line, missing)
    extra = {} if _KNOWN_FIELDS.issuperset(d) else {k: v for k, v in d.items() if k not in _KNOWN_FIELDS}
    return Op(index, time, op_type, process, f, value, node, d.get("error"), extra)  # type: ignore[arg-type]


KV_FUNCTIONS = frozenset(("get", "put", "append"))  # a key-value history's own (reads and writes are a register's too)


def inner_value_missing(op_type: Any, process: Any, f: Any, value: dict[str, Any]) -> str | None:
    """Why a client op's ``value``, an object without a ``"value"``, lacks one it must hold,
    or None: a key-value map (``{"key", "value"}``, of a get, put or append) holds the key's
    value, and an ok log read's completion (``{"topic", "partition", "offset", "value"}``)
    the value read, null for nothing. As for the op's own, an absent value is not null: read
    as null, a get or a read of 7 whose field was misspelt passed as a read of nothing."""
    if process == NEMESIS:
        return None
    if "key" in value and f in KV_FUNCTIONS:
        return "missing field 'value' in its key-value map (null if the key holds none)"
    if f == "read" and op_type == "ok" and "offset" in value and "topic" in value:
        return "missing field 'value' in the read's completion (null for a read of nothing)"
    return None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _short(value: Any) -> str:
    """A field's value for an error message: short scalars as written, the rest by kind."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        text = repr(value)
        return text if len(text) <= 40 else f"{_kind(value)} of {len(str(value))} characters"
    return _kind(value)


# In place of the f of a process's open invocation: its last op ended info, so it is retired.
ENDED_INFO = "\x00ended info"


def unpaired(op_type: str, process: Process, f: str, invoked: tuple[int, str] | None) -> str | None:
    """Why a client op of ``op_type`` and ``f`` breaks its process's pairing, given the
    process's open invocation (its line and ``f``, None when none is open; ``f`` is
    :data:`ENDED_INFO` when its last op ended info); None when it keeps it."""
    if invoked is not None and invoked[1] == ENDED_INFO:
        return (f"{'a' if op_type == 'fail' else 'an'} {op_type} of process {process!r} after its "
                f"op on line {invoked[0]} ended info: a process whose op ended info never issues another "
                "(its worker goes on as a new process)")
    if op_type == "invoke":
        if invoked is None:
            return None
        return f"process {process!r} invokes again while its op on line {invoked[0]} has not completed"
    if invoked is None:
        return f"a {op_type} completion of process {process!r} with no invocation open"
    if invoked[1] != f:
        return (f"a {op_type} completion of {f!r} closes process {process!r}'s invocation of {invoked[1]!r} "
                f"on line {invoked[0]}")
    return None


class ProcessPairing:
    """Every completion must close its process's open invocation (Jepsen's rule).

    A completion with no invocation, a second invocation while one is open, a completion
    of another function than the one invoked (``:invoke :read`` then ``:ok :re``), or any op
    of a process after one of its ops ended info (Jepsen retires such a process, as our
    harness does) means the history is damaged or not a history at all: judging it would
    ignore ops silently. The nemesis is exempt (it may record what it did without an invocation).

    ``entries``: for a part of a history read on its own (the pipeline's chunks), whose
    processes may have an invocation open from before it: each process's first op there is
    not judged but noted in ``entries`` as (line, type, f), for whoever knows what was open
    before to judge with :func:`unpaired`; ``open`` is what the part leaves open."""

    def __init__(self, source: str, entries: dict[Process, tuple[int, str, str]] | None = None) -> None:
        self.source = source
        self.open: dict[Process, tuple[int, str]] = {}  # process -> (line, f) of its open invocation
        self.entries = entries

    def see(self, op: Op, line: int) -> None:
        self.see_fields(op.process, op.type, op.f, line)

    def see_fields(self, process: Process, op_type: str, f: str, line: int) -> None:
        """:meth:`see` an op of ``process``, ``op_type`` and ``f`` on ``line``."""
        if process == NEMESIS:
            return
        entries = self.entries
        if entries is not None and process not in entries:
            entries[process] = (line, op_type, f)
        else:
            problem = unpaired(op_type, process, f, self.open.get(process))
            if problem is not None:
                raise HistoryError(self.source, line, problem)
        if op_type == "invoke":
            self.open[process] = (line, f)
        elif op_type == "info":  # it may still be acting in the system: the process is retired
            self.open[process] = (line, ENDED_INFO)
        else:
            self.open.pop(process, None)


@dataclass(frozen=True)
class TornTail:
    """A history's last line, cut short by a writer killed mid-line, and left unread."""

    source: str
    line: int
    problem: str  # what parsing it said

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def __str__(self) -> str:
        return (f"{self.where}: not read: the last line is cut short, as a writer killed "
                f"mid-line leaves it ({self.problem})")


class OpsRead(list[Op]):
    """A history's ops as a reader gave them, and the torn last line it left out, if any."""

    torn_tail: TornTail | None = None

    def left_out(self, torn: TornTail) -> None:
        self.torn_tail = torn


def iter_history(path: str | os.PathLike[str], *, tolerate_torn_tail: bool = True) -> Iterator[Op]:
    """Read a JSONL history lazily.

    A run whose harness was killed may end in a line cut short; with ``tolerate_torn_tail``
    that last line is ignored (it was never written whole), while a malformed line anywhere
    else, or a complete last line, is an error naming the file and line.
    """
    source = str(path)
    with open(path, "rb") as f:
        skip_bom(f, source, HistoryError)
        for _, op in _iter_lines(source, f, tolerate_torn_tail):
            yield op


def _iter_lines(source: str, lines: Iterable[bytes], tolerate_torn_tail: bool,
                parse: Callable[[bytes], Any] = parse_json,
                torn: Callable[[TornTail], None] | None = None) -> Iterator[tuple[int, Op]]:
    """(line number, op) for every op line, each parsed by ``parse`` (as :func:`parse_json`);
    a forgiven torn tail is handed to ``torn``."""
    pending: tuple[int, bytes] | None = None
    for number, raw in enumerate(lines, start=1):
        if pending is not None:
            yield pending[0], _parse_line(source, *pending, parse)
            pending = None
        if not raw.strip():
            continue
        if not raw.endswith(b"\n"):
            pending = (number, raw)  # maybe a torn tail; decide at EOF
            continue
        yield number, _parse_line(source, number, raw, parse)
    if pending is not None:
        number, raw = pending
        try:
            parsed = parse(raw)
        except ValueError as e:
            if not (tolerate_torn_tail and cut_short(raw)):
                raise HistoryError(source, number, str(e)) from None
            if torn is not None:
                torn(TornTail(source, number, one_line(str(e))))
            return
        yield number, op_from_dict(parsed, source, number)


def _parse_line(source: str, number: int, raw: bytes, parse: Callable[[bytes], Any]) -> Op:
    try:
        d = parse(raw)
    except ValueError as e:
        raise HistoryError(source, number, str(e)) from None
    return op_from_dict(d, source, number)


def parse_history(data: bytes, source: str = "<history>", *, check_pairs: bool = True) -> list[Op]:
    """A whole JSONL history from its bytes (read once: the source may be a pipe), with
    dense indices and (``check_pairs``) every completion closing an invocation.

    The list is an :class:`OpsRead` (typed as a plain list: it stands in for the ops of
    histories in other formats, which have no torn tail)."""
    ops = OpsRead()
    data = without_bom(data)
    return _checked(ops, _iter_lines(source, data.splitlines(keepends=True), True, json_lines_parser(data),
                                     ops.left_out), source, True, check_pairs)


def read_history(path: str | os.PathLike[str], *, check_dense: bool = True,
                 check_pairs: bool = False) -> OpsRead:
    """Read a whole JSONL history, checking that indices are dense from 0 and, when a
    checker is to judge it (``check_pairs``), that every completion closes an invocation."""
    ops = OpsRead()
    with open(path, "rb") as f:
        skip_bom(f, str(path), HistoryError)
        return _checked(ops, _iter_lines(str(path), f, True, json_lines_parser(f), ops.left_out),
                        str(path), check_dense, check_pairs)


def time_out_of_order(time: int, previous: int) -> str:
    """Why an op recorded at ``time`` after one at ``previous`` (later) is no history's."""
    return (f"time {time} is before the previous op's ({previous}): a history is recorded in time order, "
            "by one monotonic clock")


def index_out_of_sequence(index: int, expected: int) -> str:
    """Why an op of ``index`` where the ``expected`` one belongs is no history's."""
    return f"index {index} out of sequence (expected {expected})"


def iter_judged_history(path: str | os.PathLike[str], *, check_pairs: bool = True,
                        torn: Callable[[TornTail], None] | None = None) -> Iterator[tuple[int, Op]]:
    """(line number, op) for every op of a JSONL history, read lazily and held, as
    :func:`read_history` holds them, to dense indices from 0, time in order and (``check_pairs``)
    every completion closing an invocation: a history larger than memory can be judged. A
    torn last line left unread is handed to ``torn`` (as :class:`OpsRead` keeps it)."""
    source = str(path)
    with open(path, "rb") as f:
        skip_bom(f, source, HistoryError)
        yield from _judged(_iter_lines(source, f, True, json_lines_parser(f), torn), source, True, check_pairs)


def _checked(ops: OpsRead, numbered: Iterable[tuple[int, Op]], source: str, check_dense: bool,
             check_pairs: bool) -> OpsRead:
    ops.extend(op for _, op in _judged(numbered, source, check_dense, check_pairs))
    return ops


def _judged(numbered: Iterable[tuple[int, Op]], source: str, check_dense: bool,
            check_pairs: bool) -> Iterator[tuple[int, Op]]:
    pairing = ProcessPairing(source) if check_pairs else None
    latest = -_MAX_TIME  # the time of the op before (one clock, read as each op is recorded)
    for count, (line, op) in enumerate(numbered):
        if check_dense and op.index != count:
            raise HistoryError(source, line, index_out_of_sequence(op.index, count))
        if check_dense and op.time < latest:
            raise HistoryError(source, line, time_out_of_order(op.time, latest))
        latest = op.time
        if pairing is not None:
            pairing.see(op, line)
        yield line, op


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


def nemesis_client_ops(ops: Sequence[Op]) -> list[Op]:
    """Ops the nemesis recorded under a function its history's clients use (a ``read`` of a
    register, a ``send``): a client's op under the nemesis' name, which every checker passes
    over as a fault's record, so what it read or wrote is judged by none. No nemesis of ours
    records one, and no checker may call valid a history that holds one."""
    client_fs = {op.f for op in ops if op.process != NEMESIS}
    return [op for op in ops if op.process == NEMESIS and op.f in client_fs]


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
