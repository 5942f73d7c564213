"""Node events: what each broker and the controller say they did, and the files they say it in.

The client history shows what the outside world observed; node events show what happened
inside. Each node writes its own ``events/<node>.jsonl``, one event per line, a JSON object
with an envelope and a body:

    node   the node's name ("n1", ...)
    seq    per-node sequence number from 0; orders this node's events
    wall   the node's own wall-clock time in seconds. Skewed under clock faults, so it is
           never used to order events of different nodes, only for display.
    kind   the body's kind
    ...    the body's fields

The bodies, one frozen type per kind with its fields and meaning, are in
:mod:`floodmark.node_event_kinds` (re-exported here): they are the schema. Protocol code hands
the runtime a body; the runtime stamps the envelope (:class:`NodeEventWriter` on real nodes).

Reading (:func:`iter_events`, :func:`read_events_dir`) gives :class:`NodeEvent` envelopes whose
``body`` is typed, so consumers match on the types. A line of a known kind whose field is
missing or of the wrong JSON type is malformed, as is a line that is not a JSON object with
the envelope: :class:`NodeEventError` names the file and the line. Readers stay tolerant of
what the contract allows: a kind they do not know reads as :class:`UnknownKind` with its
fields, and fields a known kind does not declare are kept in ``NodeEvent.extra``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import operator
import os
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from floodmark.errors import SourceError
from floodmark.inputs.plain_values import json_lines_parser
from floodmark.inputs.sources import read_source
from floodmark.inputs.torn_lines import cut_short
from floodmark.node_event_kinds import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    BrokerState,
    ControllerElected,
    ControllerResigned,
    Fenced,
    HwChanged,
    IsrChanged,
    IsrWritten,
    KnownKind,
    LeaderElected,
    LogDirOffline,
    NodeEventBody,
    PartitionEvent,
    PartitionKey,
    Rejected,
    Started,
    Stopped,
    Truncated,
    UnknownKind,
    leader_epoch_of,
    partition_of,
)

try:
    import orjson
except ImportError:  # pragma: no cover - a broker image without orjson uses the standard library
    orjson = None  # type: ignore[assignment]

__all__ = [
    "KINDS", "Acked", "Appended", "BecameFollower", "BecameLeader", "BrokerState", "ControllerElected",
    "ControllerResigned", "Fenced", "HwChanged", "IsrChanged", "IsrWritten", "KnownKind", "LeaderElected", "LogDirOffline",
    "NodeEvent", "NodeEventBody", "NodeEventError", "NodeEventWriter", "PartitionEvent", "PartitionKey",
    "Rejected", "Started", "Stopped", "Truncated", "UnknownKind", "encode_body", "event_from_dict",
    "event_from_fields", "event_line", "iter_events", "leader_epoch_of", "partition_of", "read_events_dir",
]

ENVELOPE = frozenset(("node", "seq", "wall", "kind"))


class NodeEventError(SourceError):
    """A malformed event file: names the file, the line and the problem."""


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """One event as a node wrote it: the envelope, the typed body, and any fields the body's
    kind does not declare (a newer writer's), in the order read."""

    node: str
    seq: int
    wall: float
    body: KnownKind | UnknownKind
    extra: tuple[tuple[str, Any], ...] = field(default=(), hash=False)

    @property
    def kind(self) -> str:
        return self.body.kind

    def fields(self) -> dict[str, Any]:
        """The fields after the envelope, as the file has them (for display and storage)."""
        body = self.body
        written = dict(body.fields) if isinstance(body, UnknownKind) else encode_body(body)
        written.update(self.extra)
        return written

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "seq": self.seq, "wall": self.wall, "kind": self.kind, **self.fields()}


# --------------------------------------------------------------------------- the schema, from the types


class _Invalid(ValueError):
    """A field's value is not what its type says."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    json_type: type  # the JSON type a present value has
    convert: Callable[[Any], Any] | None  # arrays to tuples, their elements checked
    optional: bool
    expected: str


@dataclass(frozen=True, slots=True)
class _Schema:
    body: type[KnownKind]
    fields: tuple[_Field, ...]
    names: frozenset[str]


def _json_type(hint: Any) -> tuple[type, Callable[[Any], Any] | None, str]:
    """How a field typed ``hint`` reads from JSON: its JSON type, a conversion, and what it
    must be (for errors)."""
    scalar = _SCALARS.get(hint)
    if scalar is not None:
        return hint, None, scalar
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        element, convert, what = _json_type(args[0])
        what = _PLURALS.get(what, f"{what} items")

        def array(value: list[Any]) -> tuple[Any, ...]:
            for item in value:
                if type(item) is not element:
                    raise _Invalid()
            return tuple(value) if convert is None else tuple(convert(item) for item in value)

        return list, array, f"a list of {what}"
    if typing.get_origin(hint) is tuple and args and Ellipsis not in args:
        parts = [_json_type(a) for a in args]

        def fixed(value: list[Any]) -> tuple[Any, ...]:
            if len(value) != len(parts) or any(type(v) is not p[0] for v, p in zip(value, parts)):
                raise _Invalid()
            return tuple(v if p[1] is None else p[1](v) for v, p in zip(value, parts))

        return list, fixed, "[" + ", ".join(p[2] for p in parts) + "]"
    raise TypeError(f"node event field type {hint!r} has no JSON form")


_SCALARS: dict[Any, str] = {bool: "true or false", int: "an integer", str: "a string"}
_PLURALS = {"an integer": "integers", "a string": "strings", "true or false": "booleans"}


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving the values of ``names``, as a tuple whatever their number."""
    if not names:
        return lambda body: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda body: (one(body),)
    return operator.attrgetter(*names)


def _schema(body: type[KnownKind]) -> _Schema:
    hints = typing.get_type_hints(body)
    described = []
    for f in dataclasses.fields(body):
        hint = hints[f.name]
        args = typing.get_args(hint)
        optional = isinstance(hint, types.UnionType) and type(None) in args
        if optional:
            [hint] = [a for a in args if a is not type(None)]
        json_type, convert, expected = _json_type(hint)
        described.append(_Field(f.name, json_type, convert, optional, expected))
    return _Schema(body, tuple(described), frozenset(f.name for f in described))


_SCHEMAS: dict[str, _Schema] = {body.kind: _schema(body) for body in typing.get_args(KnownKind)}
KINDS: frozenset[str] = frozenset(_SCHEMAS)
_NAMES: dict[type, tuple[str, ...]] = {s.body: tuple(f.name for f in s.fields) for s in _SCHEMAS.values()}
# Each kind's field values in declared order, read in one call.
_VALUES: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    body: _values_of(names) for body, names in _NAMES.items()
}


def encode_body(body: KnownKind | UnknownKind, into: dict[str, Any] | None = None) -> dict[str, Any]:
    """A body's fields as written (declared order, ``None`` left out), added to ``into``."""
    written: dict[str, Any] = {} if into is None else into
    if isinstance(body, UnknownKind):
        written.update((k, v) for k, v in body.fields.items() if k not in ENVELOPE)
        return written
    kind = type(body)
    for name, value in zip(_NAMES[kind], _VALUES[kind](body)):
        if value is not None:
            written[name] = value
    return written


# --------------------------------------------------------------------------- reading


def event_from_fields(node: str, seq: int, wall: float, kind: str, fields: Mapping[str, Any],
                      source: str = "<events>", line: int = 0) -> NodeEvent:
    """An event from its envelope and its fields (as the pipeline stores them)."""
    body, extra = _body(kind, fields, 0, source, line)
    return NodeEvent(node, seq, wall, body, extra)


def _body(kind: str, fields: Mapping[str, Any], envelope: int, source: str,
          line: int) -> tuple[KnownKind | UnknownKind, tuple[tuple[str, Any], ...]]:
    """The typed body of ``kind`` from ``fields``, and the fields it does not declare.
    ``envelope``: how many of ``fields`` are the envelope's (they are neither)."""
    schema = _SCHEMAS.get(kind)
    if schema is None:
        return UnknownKind(kind, {k: v for k, v in fields.items() if k not in ENVELOPE}), ()
    values: dict[str, Any] = {}
    present = envelope
    for f in schema.fields:
        value = fields.get(f.name, _ABSENT)
        if type(value) is f.json_type:
            present += 1
            if f.convert is not None:
                try:
                    value = f.convert(value)
                except _Invalid:
                    raise NodeEventError(source, line, f"{kind}: {f.name} must be {f.expected}, "
                                                       f"got {_short(value)}") from None
        elif value is None and f.optional:
            present += 1
        elif value is _ABSENT and f.optional:
            value = None
        elif value is _ABSENT or value is None:
            raise NodeEventError(source, line, f"{kind}: missing field {f.name!r}")
        else:
            raise NodeEventError(source, line, f"{kind}: {f.name} must be {f.expected}, got {_short(value)}")
        values[f.name] = value
    extra: tuple[tuple[str, Any], ...] = ()
    if len(fields) > present:
        extra = tuple((k, v) for k, v in fields.items() if k not in schema.names and k not in ENVELOPE)
    return schema.body(**values), extra


_ABSENT: Any = object()


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return "a number of more than 40 digits"
    if isinstance(value, list | dict) :
        return "a list" if isinstance(value, list) else "an object"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def event_from_dict(d: Any, source: str = "<events>", line: int = 0) -> NodeEvent:
    """An event from one parsed line of an event file."""
    if not isinstance(d, dict):
        raise NodeEventError(source, line, "expected a JSON object")
    for name in ("node", "seq", "kind"):
        if name not in d:
            raise NodeEventError(source, line, f"missing field {name!r}")
    seq, wall, node, kind = d["seq"], d.get("wall"), d["node"], d["kind"]
    if type(seq) is not int or not 0 <= seq < 2**63:
        raise NodeEventError(source, line, f"seq must be a non-negative integer, got {_short(seq)}")
    if not isinstance(node, str) or not isinstance(kind, str):
        raise NodeEventError(source, line, "node and kind must be strings")
    if wall is None:
        wall = 0.0
    elif isinstance(wall, bool) or not isinstance(wall, int | float) or not -1e15 < wall < 1e15:
        raise NodeEventError(source, line, f"wall must be a time in seconds, got {_short(wall)}")
    body, extra = _body(kind, d, 3 + ("wall" in d), source, line)
    return NodeEvent(node, seq, float(wall), body, extra)


def iter_events(path: str | os.PathLike[str], node: str | None = None,
                torn: list[str] | None = None) -> Iterator[NodeEvent]:
    """Read one node's event file. A last line cut short (the node was killed while writing
    it, see :mod:`floodmark.inputs.torn_lines`) is ignored, and said in ``torn`` if given; any other
    malformed line is refused.
    ``node``: the node the file belongs to; then every event must be that node's, and no
    ``seq`` may come twice (a line duplicated or a file of another node would make the
    checkers count what happened twice, or in the wrong broker's story)."""
    source = str(path)
    try:
        data = read_source(source)
    except SourceError as e:
        raise NodeEventError(source, e.line, e.problem) from None
    lines = data.splitlines(keepends=True)
    parse = json_lines_parser(data)
    first_line_of: dict[int, int] = {}  # seq -> the line it was first seen on
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            d = parse(raw)
        except ValueError as e:
            if number == len(lines) and not raw.endswith(b"\n") and cut_short(raw):
                if torn is not None:  # the node was killed in the middle of writing its last event
                    torn.append(f"{source}:{number}: its last line was cut short (the node was killed while "
                                "writing it) and is not read")
                return
            raise NodeEventError(source, number, str(e)) from None
        event = event_from_dict(d, source, number)
        if node is not None:
            if event.node != node:
                raise NodeEventError(source, number, f"an event of node {event.node!r} in the file of node {node!r}")
            seen = first_line_of.setdefault(event.seq, number)
            if seen != number:
                raise NodeEventError(source, number, f"seq {event.seq} again (first on line {seen})")
        yield event


def read_events_dir(directory: str | os.PathLike[str], torn: list[str] | None = None) -> dict[str, list[NodeEvent]]:
    """Read every ``<node>.jsonl`` in an events directory, keyed by node name (each file
    holding that node's events only, each once); ``torn`` is told of last lines cut short."""
    result: dict[str, list[NodeEvent]] = {}
    d = Path(directory)
    if not d.is_dir():
        return result
    for path in sorted(d.glob("*.jsonl")):
        events = list(iter_events(path, path.stem, torn))
        result[path.stem] = sorted(events, key=lambda e: e.seq)
    return result


# --------------------------------------------------------------------------- writing


def _line_record(schema: _Schema) -> Callable[[str, int, float, Any], dict[str, Any]]:
    """What :func:`encode_body` gives for one kind, envelope first, as a function generated
    for the kind (as dataclasses generates ``__init__``): one dict display for the envelope
    and the fields up to the first optional one, then one store per later field, optional
    ones only when not None. A simulated minute writes some 40,000 events, and building
    each record field by field, growing the dict, was half the cost of its line."""
    lead = list(itertools.takewhile(lambda f: not f.optional, schema.fields))
    entries = "".join(f", {f.name!r}: body.{f.name}" for f in lead)
    lines = ["def record(node, seq, wall, body):",
             f"  d = {{'node': node, 'seq': seq, 'wall': wall, 'kind': {schema.body.kind!r}{entries}}}"]
    for f in schema.fields[len(lead):]:
        if f.optional:
            lines += [f"  if body.{f.name} is not None:", f"    d[{f.name!r}] = body.{f.name}"]
        else:
            lines.append(f"  d[{f.name!r}] = body.{f.name}")
    lines.append("  return d")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)  # noqa: S102 (built from a kind's field names)
    return cast(Callable[[str, int, float, Any], dict[str, Any]], namespace["record"])


_LINE_RECORDS: dict[type, Callable[[str, int, float, Any], dict[str, Any]]] = {
    schema.body: _line_record(schema) for schema in _SCHEMAS.values()
}


def event_line(node: str, seq: int, wall: float, body: KnownKind | UnknownKind) -> bytes:
    """One event's line in its node's file, newline included (what :class:`NodeEventWriter`
    writes, and the simulator for its nodes)."""
    build = _LINE_RECORDS.get(type(body))
    if build is not None:
        record = build(node, seq, wall, body)
    else:
        record = encode_body(body, {"node": node, "seq": seq, "wall": wall, "kind": body.kind})
    try:
        if orjson is None:
            raise TypeError("orjson is not installed")
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # what orjson refuses (an integer beyond 64 bits), json writes
        return (json.dumps(record, separators=(",", ":")) + "\n").encode()


class NodeEventWriter:
    """Appends a node's events to its file, numbering them and stamping its wall time."""

    def __init__(self, path: str | os.PathLike[str], node: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.node = node
        self.seq = _next_seq(self.path)
        _drop_torn_tail(self.path)  # a crash may have left half a line; it was never an event
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def write(self, wall: float, body: KnownKind | UnknownKind) -> None:
        """One event, one ``write``: it reaches the OS at once and survives a kill -9. A
        failover writes tens of thousands, so it is encoded with orjson where installed."""
        if self._fd is None:
            raise ValueError(f"{self.path}: the event writer is closed")
        line = event_line(self.node, self.seq, wall, body)
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view):]
        self.seq += 1  # only once written: a number missing from a file means lines lost from it

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _next_seq(path: Path) -> int:
    """A restarted node continues its numbering after the last complete event. Only the
    envelope is read: whatever a line's body holds, its number is taken."""
    if not path.exists():
        return 0
    last = -1
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            if not raw.endswith("\n"):
                break  # a torn tail: never an event
            try:
                d = json.loads(raw)
            except json.JSONDecodeError:
                continue
            seq = d.get("seq") if isinstance(d, dict) else None
            if type(seq) is int and seq > last:
                last = seq
    return last + 1


def _drop_torn_tail(path: Path) -> None:
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
