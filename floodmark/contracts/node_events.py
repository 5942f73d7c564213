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
:mod:`floodmark.contracts.node_event_kinds` (re-exported here): they are the schema. Protocol code hands
the runtime a body; the runtime stamps the envelope (:class:`NodeEventWriter` on real nodes).

Reading (:func:`iter_events`, :func:`read_events_dir`) gives :class:`NodeEvent` envelopes whose
``body`` is typed, so consumers match on the types. A line of a known kind whose field is
missing, of the wrong JSON type or outside what it can be
(:mod:`floodmark.contracts.node_event_fields`; every integer field has a range,
:mod:`floodmark.contracts.node_event_ranges`) is malformed, as is a line that is not a JSON
object with the envelope (``seq`` from 0 to 2**63-1, ``wall`` finite and within 1e15 seconds
of 1970): :class:`NodeEventError` names the file and the line. Readers stay tolerant of what
the contract allows: a kind they do not know reads as :class:`UnknownKind` with its fields,
and fields a known kind does not declare are kept in ``NodeEvent.extra``.

A file is one node's and holds each of its events once: every line names that node, no
``seq`` comes twice, and, read with the others of its run (:func:`read_events_dir`), no two
files say they are the same broker (a ``started`` or ``controller_elected`` event names its
own broker): a file copied under another node's name would otherwise tell that broker's story
twice. Read so, a file whose ``stopped`` is followed by anything but the next process's
``started`` is refused as well (:mod:`floodmark.contracts.node_lives`). These rules of a file
are stated once, in :mod:`floodmark.contracts.node_files`, for every reader. Given the run's topics,
an event naming another topic is refused too (a run never creates one), and given how many
partitions each may have had (``partitions``: what ``test.yaml`` states, or more where an
admin fault added some), so is one naming a partition beyond them. Given what the run's
configuration states of its id, every ``started`` event must name it
(:mod:`floodmark.contracts.run_ids`): events of another run are refused, not judged as this
one's.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from floodmark.contracts.node_event_fields import (
    KINDS,
    SCHEMAS,
    NodeEventError,
    Schema,
    encode_body,
    read_body,
    short,
)
from floodmark.contracts.node_event_kinds import (
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
from floodmark.contracts.node_event_ranges import of_digits
from floodmark.contracts.node_files import (
    Claim,
    claim_mismatch,
    claim_problem,
    judge_node_story,
    line_problem,
)
from floodmark.contracts.node_lives import first_life_after_a_stop
from floodmark.contracts.run_ids import RunIdCheck, StatedRun
from floodmark.errors import SourceError
from floodmark.inputs.plain_values import json_lines_parser
from floodmark.inputs.sources import describe_os_error, file_problem, read_source
from floodmark.inputs.torn_lines import cut_short

try:
    import orjson
except ImportError:  # pragma: no cover - a broker image without orjson uses the standard library
    orjson = None  # type: ignore[assignment]

__all__ = [
    "KINDS", "Acked", "Appended", "BecameFollower", "BecameLeader", "BrokerState", "ControllerElected",
    "ControllerResigned", "Fenced", "HwChanged", "IsrChanged", "IsrWritten", "KnownKind", "LeaderElected", "LogDirOffline",
    "NodeEvent", "NodeEventBody", "NodeEventError", "NodeEventWriter", "PartitionEvent", "PartitionKey",
    "Rejected", "Started", "Stopped", "Truncated", "UnknownKind", "encode_body", "event_from_dict",
    "event_from_fields", "event_line", "event_lines", "iter_events", "leader_epoch_of", "partition_of", "read_events_dir",
]


MAX_SEQ = 2**63 - 1  # seq is a 64-bit count of a node's events
# A wall time is only displayed, never compared across nodes, but one beyond any clock (a
# non-finite one, or more than 30 million years from 1970) is damage, not a skewed clock.
MAX_WALL = 1e15


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


# --------------------------------------------------------------------------- reading


def event_from_fields(node: str, seq: int, wall: float, kind: str, fields: Mapping[str, Any],
                      source: str = "<events>", line: int = 0) -> NodeEvent:
    """An event from its envelope and its fields (as the pipeline stores them)."""
    body, extra = read_body(kind, fields, 0, source, line)
    return NodeEvent(node, seq, wall, body, extra)


def event_from_dict(d: Any, source: str = "<events>", line: int = 0) -> NodeEvent:
    """An event from one parsed line of an event file."""
    if not isinstance(d, dict):
        raise NodeEventError(source, line, "expected a JSON object")
    for name in ("node", "seq", "kind"):
        if name not in d:
            raise NodeEventError(source, line, f"missing field {name!r}")
    seq, wall, node, kind = d["seq"], d.get("wall"), d["node"], d["kind"]
    if type(seq) is int and seq > MAX_SEQ:
        raise NodeEventError(source, line, f"seq {seq if seq < 10**30 else of_digits(seq)} is beyond "
                                           "2**63-1 (no node numbers so many events: seq is 64-bit)")
    if type(seq) is not int or seq < 0:
        raise NodeEventError(source, line, f"seq must be a non-negative integer, got {short(seq)}")
    if not isinstance(node, str) or not isinstance(kind, str):
        raise NodeEventError(source, line, "node and kind must be strings")
    if wall is None:
        wall = 0.0
    elif isinstance(wall, bool) or not isinstance(wall, int | float) or not -MAX_WALL < wall < MAX_WALL:
        raise NodeEventError(source, line, f"wall must be a time in seconds within 1e15 of 1970 (some 30 million "
                                           f"years: no clock is skewed so far), got {short(wall)}")
    body, extra = read_body(kind, d, 3 + ("wall" in d), source, line)
    return NodeEvent(node, seq, float(wall), body, extra)


def iter_events(path: str | os.PathLike[str], node: str | None = None, torn: list[str] | None = None,
                topics: Collection[str] | None = None,
                partitions: Mapping[str, int] | None = None) -> Iterator[NodeEvent]:
    """Read one node's event file. A last line cut short (the node was killed while writing
    it, see :mod:`floodmark.inputs.torn_lines`) is ignored, and said in ``torn`` if given, as is
    a whole last line without its newline (read, but the file was cut after it); any other
    malformed line is refused.
    ``node``: the node the file belongs to; then every event must be that node's, and no
    ``seq`` may come twice (a line duplicated or a file of another node would make the
    checkers count what happened twice, or in the wrong broker's story). ``topics``: the
    run's topics (as its configuration states them), the only ones an event may name;
    ``partitions``: how many partitions each topic may have had (none beyond)."""
    for _, event in _numbered_events(path, node, torn, topics, partitions):
        yield event


def _numbered_events(path: str | os.PathLike[str], node: str | None, torn: list[str] | None,
                     topics: Collection[str] | None,
                     partitions: Mapping[str, int] | None) -> Iterator[tuple[int, NodeEvent]]:
    """:func:`iter_events`, each event with its line number."""
    source = str(path)
    try:
        data = read_source(source)
    except SourceError as e:
        raise NodeEventError(source, e.line, e.problem) from None
    lines = _lines(data)
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
        seen = None if node is None else first_line_of.setdefault(event.seq, number)
        problem = line_problem(event.node, event.seq, event.body, node, None if seen == number else seen, topics,
                               partitions)
        if problem is not None:
            raise NodeEventError(source, number, problem)
        yield number, event
    if lines and not lines[-1].endswith(b"\n") and lines[-1].strip() and torn is not None:
        # Every event is written with its newline, so a whole last line without one was cut
        # at its end: it is read, but what the node wrote after it may be missing.
        torn.append(f"{source}:{len(lines)}: the file was cut short after its last line (no newline "
                    "ends it), so it may lack the node's later events")


def _lines(data: bytes) -> list[bytes]:
    """``data``'s lines, each with its newline (the last may lack one). Only ``\n`` ends a
    line, as in the history and the pipeline's chunks: a lone ``\r`` (which ``splitlines``
    would also split on) is inside its line, where JSON allows it only as white space."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    return lines


def read_events_dir(directory: str | os.PathLike[str], torn: list[str] | None = None, *,
                    topics: Collection[str] | None = None, partitions: Mapping[str, int] | None = None,
                    refused: list[NodeEventError] | None = None,
                    cut_short: set[str] | None = None, run: StatedRun | None = None) -> dict[str, list[NodeEvent]]:
    """Read every ``<node>.jsonl`` in an events directory, keyed by node name (each file
    holding that node's events only, each once, nothing after a clean stop but a start, and
    no two files the same broker's); ``torn`` is told of last lines cut short, ``cut_short``
    of the nodes whose file ends in one, and ``topics`` and ``partitions`` are the run's (see
    :func:`iter_events`). ``run``: what the run's configuration states of its id (None: it
    has no configuration), which every ``started`` event must name; with none, they must all
    name one run (see :mod:`floodmark.contracts.run_ids`).
    A file that cannot be read so raises :class:`NodeEventError`; with ``refused``, it is left
    out and its error added there instead (a report shows what it can)."""
    result: dict[str, list[NodeEvent]] = {}
    d = Path(directory)
    problem = events_dir_problem(d)
    if problem is not None:  # there but unreadable: its events are not 'none' (that is unknown, not bad input)
        if refused is None:
            raise problem
        refused.append(problem)
    if problem is not None or not d.is_dir():
        return result
    claims: dict[int, Claim] = {}  # broker -> the file that said it is that broker
    runs = RunIdCheck(run)
    for path in sorted(d.glob("*.jsonl")):
        told: list[str] = []
        try:
            events, claim = _read_node_file(path, told, topics, partitions, runs)
            if torn is not None:
                torn.extend(told)
            if told and cut_short is not None:
                cut_short.add(path.stem)
            blamed = None if claim is None else claim_problem(claims, claim)
            if blamed is not None:
                copy, error = blamed
                if refused is None:
                    raise error
                refused.append(error)
                result.pop(copy, None)
                if copy == path.stem:
                    continue
        except NodeEventError as e:
            if refused is None:
                raise
            refused.append(e)
            continue
        result[path.stem] = sorted(events, key=lambda e: e.seq)
    return result


def events_dir_problem(d: Path) -> NodeEventError | None:
    """Why an events directory that is there cannot be listed (a file, a symbolic link loop
    or to nothing, no permission to read it); None when it can be, or is not there at all
    (a run that recorded no node events). ``glob`` would list such a directory as empty."""
    if not os.path.lexists(d):
        return None
    try:
        os.listdir(d)
    except OSError as e:
        if e.errno == errno.ENOTDIR:
            return NodeEventError(str(d), 0, "is not a directory: a run's node events are a directory "
                                             "of <node>.jsonl files")
        if e.errno == errno.ENOENT:
            return NodeEventError(str(d), 0, "a symbolic link to nothing: a run's node events are a directory")
        return NodeEventError(str(d), 0, f"cannot list the node event files: {describe_os_error(e)}")
    return None


def _read_node_file(path: Path, torn: list[str] | None, topics: Collection[str] | None,
                    partitions: Mapping[str, int] | None,
                    runs: RunIdCheck) -> tuple[list[NodeEvent], Claim | None]:
    """A node's events, and the broker they say the node is (None if they do not say), each
    held by ``runs`` to the run they are read as."""
    node, source = path.stem, str(path)
    unreadable = file_problem(path)  # a FIFO or a device in a run is named at once, never waited on
    if unreadable is not None:
        raise NodeEventError(source, 0, unreadable)
    events: list[NodeEvent] = []
    lines = array("q")  # each event's line (a C array: a million events cost 8 MB, not 36)
    claim: Claim | None = None
    stops = False
    # Held to the run in the node's order (by seq), as the checkers read it: its first event,
    # as (seq, line, kind), and its starts, as (seq, line, run id).
    first: tuple[int, int, str] | None = None
    starts: list[tuple[int, int, str | None]] = []
    for number, event in _numbered_events(path, node, torn, topics, partitions):
        body = event.body
        kind = type(body)
        if first is None or event.seq < first[0]:
            first = (event.seq, number, event.kind)
        if kind is Started:
            starts.append((event.seq, number, cast(Started, body).run_id))
        if kind is Started or kind is ControllerElected:
            broker = cast(Started | ControllerElected, body).broker
            if broker is not None and claim is None:
                claim = Claim(broker, node, source, number)
            elif broker is not None and claim is not None and broker != claim.broker:
                raise NodeEventError(source, number, claim_mismatch(event.kind, node, broker, claim))
        elif kind is Stopped:
            stops = True
        events.append(event)
        lines.append(number)
    life = None
    if stops:  # judged in the node's order, as the checkers read it, whatever the lines' order
        order = sorted(range(len(events)), key=lambda i: events[i].seq)
        life = first_life_after_a_stop((lines[i], events[i].body) for i in order)
    judge_node_story(source, first, starts, life, runs)
    return events, claim


# --------------------------------------------------------------------------- writing


def _json_line(record: dict[str, Any]) -> bytes:
    """A record's line as the standard library writes it: what orjson refuses (an integer
    beyond 64 bits), or every line where orjson is not installed."""
    return (json.dumps(record, separators=(",", ":")) + "\n").encode()


def _dumps_line(record: dict[str, Any]) -> bytes:
    """A record's line, newline included: orjson's encoding, else the standard library's."""
    try:
        if orjson is None:
            raise TypeError("orjson is not installed")
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return _json_line(record)


def _line_encoder(schema: Schema) -> Callable[[str, int, float, Any], bytes]:
    """:func:`event_line` for one kind, as a function generated for the kind (as dataclasses
    generates ``__init__``): one dict display for the envelope and the fields up to the first
    optional one, then one store per later field, optional ones only when not None, and the
    encoding, all in one call. A simulated minute writes some 40,000 events, and building
    each record field by field, growing the dict, was half the cost of its line."""
    lead = list(itertools.takewhile(lambda f: not f.optional, schema.fields))
    entries = "".join(f", {f.name!r}: body.{f.name}" for f in lead)
    lines = ["def line(node, seq, wall, body):",
             f"  d = {{'node': node, 'seq': seq, 'wall': wall, 'kind': {schema.body.kind!r}{entries}}}"]
    for f in schema.fields[len(lead):]:
        if f.optional:
            lines += [f"  if body.{f.name} is not None:", f"    d[{f.name!r}] = body.{f.name}"]
        else:
            lines.append(f"  d[{f.name!r}] = body.{f.name}")
    if orjson is None:
        lines.append("  return json_line(d)")
    else:
        lines += ["  try:", "    return dumps(d, option=APPEND_NEWLINE)",
                  "  except TypeError:", "    return json_line(d)"]
    namespace: dict[str, Any] = {"json_line": _json_line}
    if orjson is not None:
        namespace.update(dumps=orjson.dumps, APPEND_NEWLINE=orjson.OPT_APPEND_NEWLINE)
    exec("\n".join(lines), namespace)  # noqa: S102 (built from a kind's field names)
    return cast(Callable[[str, int, float, Any], bytes], namespace["line"])


_LINE_ENCODERS: dict[type, Callable[[str, int, float, Any], bytes]] = {
    schema.body: _line_encoder(schema) for schema in SCHEMAS.values()
}


def _any_line(node: str, seq: int, wall: float, body: KnownKind | UnknownKind) -> bytes:
    """The line of a body no encoder is generated for (an unknown kind)."""
    return _dumps_line(encode_body(body, {"node": node, "seq": seq, "wall": wall, "kind": body.kind}))


def event_line(node: str, seq: int, wall: float, body: KnownKind | UnknownKind) -> bytes:
    """One event's line in its node's file, newline included (what :class:`NodeEventWriter`
    writes, and the simulator for its nodes)."""
    return _LINE_ENCODERS.get(type(body), _any_line)(node, seq, wall, body)


def event_lines(node: str, events: Iterable[tuple[float, KnownKind | UnknownKind]]) -> bytes:
    """The lines of ``events`` (wall time and body each), numbered from 0: a whole event file
    at once, as the simulator writes its nodes' (:func:`event_line` for each, without its call)."""
    encoders = _LINE_ENCODERS
    return b"".join([encoders.get(type(body), _any_line)(node, seq, wall, body)
                     for seq, (wall, body) in enumerate(events)])


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
