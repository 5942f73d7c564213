"""Large JSONL files read in parallel: byte-range chunks parsed and judged on executors.

A history of millions of ops is one file; read by one task it is read by one core. Here a
file is cut into byte ranges of ``CHUNK_BYTES`` and each range is parsed by its own task
(``mapInArrow``, so rows reach the JVM as Arrow batches, not pickled tuples). A chunk owns
the lines that *start* inside its range, so every line belongs to exactly one chunk whatever
the cut points.

Each line is read and judged as ``floodmark check`` reads it, by the same functions: the
strict JSON line parser (:func:`~floodmark.inputs.plain_values.json_lines_parser`: no NaN, no
infinity, no lone surrogate, nothing nested past 100 levels, no key twice), the op's and the
event's fields, the rules one event line decides alone
(:func:`~floodmark.contracts.node_files.line_problem`), the head of the file. What several
lines decide together (dense indices, time order, pairing, seqs, claims, run ids, a node's
lives) each task reports as a summary (:mod:`floodmark.pipeline.chunk_summaries`), which the
driver reduces in chunk order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pyarrow as pa

from floodmark.contracts.history import (
    NEMESIS,
    OP_TYPES,
    HistoryError,
    ProcessPairing,
    inner_value_missing,
    op_from_dict,
    time_out_of_order,
)
from floodmark.contracts.node_event_kinds import ControllerElected, Started
from floodmark.contracts.node_events import NodeEvent, event_from_dict
from floodmark.contracts.node_files import line_problem
from floodmark.contracts.node_lives import Lives
from floodmark.errors import SourceError, one_line
from floodmark.inputs.plain_values import json_lines_parser
from floodmark.inputs.sources import HEAD_BLOCK, head_problem, skip_bom
from floodmark.inputs.torn_lines import cut_short
from floodmark.pipeline.chunk_summaries import AFTER_SEQ, ChunkSummary, EventChunk, HistoryChunk
from floodmark.pipeline.records import INT32, INT64, event_columns, in_range, json_text

T = TypeVar("T")
CHUNK_BYTES = 32 * 1024 * 1024
_READ_BYTES = 4 * 1024 * 1024  # rows go out in Arrow batches of about this much input
_BATCH_ROWS = 65536

OPS_ARROW = pa.schema([
    ("run_id", pa.string()), ("index", pa.int64()), ("time", pa.int64()), ("type", pa.string()),
    ("process", pa.string()), ("f", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("node", pa.string()), ("error", pa.string()), ("value_json", pa.string()),
])
EVENTS_ARROW = pa.schema([
    ("run_id", pa.string()), ("node", pa.string()), ("seq", pa.int64()), ("wall", pa.float64()),
    ("kind", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("leader_epoch", pa.int64()), ("fields_json", pa.string()),
])
SEQS_ARROW = pa.schema([("seq", pa.int64()), ("line", pa.int64()), ("kind", pa.string())])


@dataclass(frozen=True)
class Chunk:
    """Bytes [start, end) of one file; ``number`` orders the chunks of that file."""

    path: str
    number: int
    start: int
    end: int
    last: bool  # the file's final chunk, whose torn last line is tolerated


def plan_chunks(path: str, chunk_bytes: int = CHUNK_BYTES) -> list[Chunk]:
    size = os.path.getsize(path)
    count = max(1, -(-size // chunk_bytes))
    return [Chunk(path, i, i * chunk_bytes, min(size, (i + 1) * chunk_bytes), i == count - 1)
            for i in range(count)]


def _line_start_at_or_after(f: Any, position: int) -> int:
    """The offset of the first line that starts at or after ``position``."""
    if position == 0:
        return 0
    f.seek(position - 1)
    f.readline()  # the rest of the line holding byte position-1 (just its newline if it ends there)
    return int(f.tell())


def iter_lines(chunk: Chunk) -> Iterator[tuple[int, bytes, bool, Callable[[bytes], Any]]]:
    """(chunk-local line number, line without its newline, whether it had one, the strict
    JSON parser for it) per owned line: :func:`~floodmark.inputs.plain_values.json_lines_parser`
    for the block of the file the line was read in."""
    with open(chunk.path, "rb") as f:
        begin = _line_start_at_or_after(f, chunk.start)
        stop = _line_start_at_or_after(f, chunk.end) if not chunk.last else os.fstat(f.fileno()).st_size
        f.seek(begin)
        if begin == 0:  # a byte order mark is no part of the first line (as the readers say)
            skip_bom(f)
            begin = f.tell()
        remaining, carry, number = stop - begin, b"", 0
        parse: Callable[[bytes], Any] = json_lines_parser(b"")
        while remaining > 0:
            block = f.read(min(_READ_BYTES, remaining))
            if not block:
                break
            remaining -= len(block)
            text = carry + block
            parse = json_lines_parser(text)
            lines = text.split(b"\n")
            carry = lines.pop()
            for line in lines:
                number += 1
                yield number, line, True, parse
        if carry:
            number += 1
            yield number, carry, False, parse


def _dumps(value: Any) -> str:
    try:  # orjson writes what it can (not an integer beyond 64 bits) several times faster
        return orjson.dumps(value).decode()
    except TypeError:
        return json_text(value)


def _valid_op(d: Any) -> bool:
    """The common case of op_from_dict's checks, without building an Op."""
    if type(d) is not dict:
        return False
    index, time, process, f, node = d.get("index"), d.get("time"), d.get("process"), d.get("f"), d.get("node")
    value = d.get("value", _ABSENT)
    return (value is not _ABSENT and type(index) is int and index >= 0 and type(time) is int
            and d.get("type") in OP_TYPES and (type(process) is int or type(process) is str) and type(f) is str
            and (node is None or type(node) is str)
            and (type(value) is not dict or "value" in value
                 or inner_value_missing(d["type"], process, f, value) is None))


_ABSENT: Any = object()


class _Columns:
    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.data: list[list[Any]] = [[] for _ in schema.names]
        self.pending = 0

    def add(self, row: tuple[Any, ...]) -> bool:
        """Add a row; whether a batch is full."""
        for column, cell in zip(self.data, row, strict=True):
            column.append(cell)
        self.pending += 1
        return self.pending >= _BATCH_ROWS

    def batch(self) -> pa.RecordBatch:
        arrays = [pa.array(column, type=f.type) for column, f in zip(self.data, self.schema, strict=True)]
        self.data = [[] for _ in self.schema.names]
        self.pending = 0
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _parsed_lines(chunk: Chunk, summary: ChunkSummary, parse: Callable[[Any, int], T],
                  other_errors: tuple[type[Exception], ...] = ()) -> Iterator[tuple[int, Any, T]]:
    """Each non-blank line of ``chunk`` as (line number, its JSON, what ``parse(json, line
    number)`` made of it), up to the first problem, which goes into ``summary``. A torn last
    line (the writer died mid-line: the beginning of a JSON text, see
    :func:`~floodmark.inputs.torn_lines.cut_short`) is skipped, as the readers skip it; one
    that parses but ``parse`` refuses is not. ``other_errors`` from ``parse`` are problems
    too (say, a wall clock that is not a number).
    """
    for number, raw, whole, strict in iter_lines(chunk):
        summary.lines = number
        if not raw.strip():
            continue
        if not whole:  # (only a file's last line comes without its newline)
            summary.cut_short = True
        try:
            d = strict(raw)
        except ValueError as e:
            if not whole and cut_short(raw):
                summary.torn = (number, one_line(str(e)))
                continue
            summary.error = (number, str(e))
            return
        try:
            parsed = parse(d, number)
        except SourceError as e:
            summary.error = (number, e.problem)
            return
        except other_errors as e:
            summary.error = (number, f"{type(e).__name__}: {e}")
            return
        yield number, d, parsed


def _head(chunk: Chunk, history: bool) -> tuple[int, str] | None:
    """The problem of the file's head, as check's reader of the file finds it before any
    line (chunk 0 only): UTF-16 or UTF-32 text; for node events, a NUL byte in the first block."""
    with open(chunk.path, "rb") as f:
        if history:
            try:
                skip_bom(f, chunk.path, HistoryError)
            except HistoryError as e:
                return e.line, e.problem
            return None
        return head_problem(f.read(HEAD_BLOCK))


def history_rows(chunk: Chunk, run_id: str, witnesses: frozenset[int],
                 report: Callable[[ChunkSummary], None]) -> Iterator[pa.RecordBatch]:
    """Parse one chunk of a history into ``ops`` rows; stop at the first problem."""
    summary = HistoryChunk(chunk.path, chunk.number)
    head = _head(chunk, history=True) if chunk.number == 0 else None
    if head is not None:
        summary.error = head
        report(summary)
        return
    cols = _Columns(OPS_ARROW)
    pairing = ProcessPairing(chunk.path, entries=summary.entries)

    def check_op(d: Any, number: int) -> None:
        if not _valid_op(d):
            op_from_dict(d, chunk.path, number)  # raises with the reader's own message

    first_index = last_time = 0
    for number, d, _ in _parsed_lines(chunk, summary, check_op):
        index, time, kind, process, f = d["index"], d["time"], d["type"], d["process"], d["f"]
        if summary.first_index is None:
            summary.first_index, summary.first_row_line, summary.first_time = index, number, time
            first_index = index
        elif index != first_index + summary.rows:
            summary.index_break = (number, index, summary.rows)
            break
        elif time < last_time:
            summary.error = (number, time_out_of_order(time, last_time))
            break
        if process == NEMESIS:
            summary.bounds.see(op_from_dict(d, chunk.path, number))
        else:
            invoked = pairing.open.get(process)
            try:
                pairing.see_fields(process, kind, f, number)
            except HistoryError:
                summary.pairing_break = (number, kind, process, f, invoked)
                break
        summary.rows += 1
        summary.last_time = last_time = time
        if index in witnesses:
            summary.witness_times[index] = time
        value, error = d.get("value"), d.get("error")
        topic = partition = offset = None
        if type(value) is dict:  # lifted as records does it: only what the column holds
            topic, partition, offset = value.get("topic"), value.get("partition"), value.get("offset")
            topic = topic if isinstance(topic, str) else None
            partition = in_range(partition, INT32)
            offset = in_range(offset, INT64)
        if cols.add((run_id, index, time, kind, str(process), f, topic, partition, offset, d.get("node"),
                     None if error is None else error if isinstance(error, str) else _dumps(error), _dumps(value))):
            yield cols.batch()
    summary.open = dict(pairing.open)
    report(summary)
    if cols.pending and summary.error is None and summary.index_break is None and summary.pairing_break is None:
        yield cols.batch()


def _event_parser(chunk: Chunk) -> Callable[[Any, int], NodeEvent]:
    return lambda d, number: event_from_dict(d, chunk.path, number)


def event_rows(chunk: Chunk, run_id: str, topics: Collection[str] | None, partitions: Mapping[str, int] | None,
               report: Callable[[ChunkSummary], None]) -> Iterator[pa.RecordBatch]:
    """Parse one chunk of a node's event file into ``node_events`` rows, judging each line
    as the file of its node, given the run's ``topics`` and ``partitions`` (None: unknown)."""
    summary = EventChunk(chunk.path, chunk.number)
    head = _head(chunk, history=False) if chunk.number == 0 else None
    if head is not None:
        summary.head = head
        report(summary)
        return
    node = Path(chunk.path).stem
    cols = _Columns(EVENTS_ARROW)
    first_line_of: dict[int, int] = {}  # seq -> the line it was first seen on, in this chunk
    lives = Lives()
    for number, _, event in _parsed_lines(chunk, summary, _event_parser(chunk), (TypeError, ValueError)):
        seq, body = event.seq, event.body
        problem = line_problem(event.node, seq, body, node, None, None, None)  # (the rule before seq's)
        if problem is not None:
            summary.error = (number, problem)
            break
        if summary.first_seq is None:  # (noted even of a line refused next: its seq may be one seen in another chunk)
            summary.first_seq = seq
        elif seq <= summary.last_seq:  # type: ignore[operator]
            summary.rising = False
        summary.last_seq = seq
        seen = first_line_of.setdefault(seq, number)
        if seen != number:
            summary.seq_again = (number, seq, seen)
            break
        problem = line_problem(event.node, seq, body, None, None, topics, partitions)  # (those after it)
        if problem is not None:
            summary.error, summary.error_rank = (number, problem), AFTER_SEQ
            break
        _note(summary, number, event)
        lives.see(number, event.kind)
        summary.rows += 1
        if cols.add((run_id, event.node, seq, event.wall, event.kind, *event_columns(event),
                     _dumps(event.fields()))):
            yield cols.batch()
    summary.life = lives.found
    summary.ends_stopped = lives.stopped_on
    report(summary)
    if cols.pending and summary.error is None and summary.seq_again is None:
        yield cols.batch()


def _note(summary: EventChunk, number: int, event: NodeEvent) -> None:
    """Note in ``summary`` what the event on line ``number`` tells the rules of many lines."""
    seq, body = event.seq, event.body
    if summary.first is None or seq < summary.first[0]:
        summary.first = (seq, number, event.kind)
    if type(body) is Started:
        started = summary.starts.get(body.run_id)
        if started is None or seq < started[0]:
            summary.starts[body.run_id] = (seq, number)
    if type(body) is Started or type(body) is ControllerElected:
        broker = body.broker  # type: ignore[union-attr]
        if broker is not None:
            if summary.claim is None:
                summary.claim = (broker, number, event.kind)
            elif summary.other_claim is None and broker != summary.claim[0]:
                summary.other_claim = (broker, number, event.kind)


def seq_rows(chunk: Chunk, lines_before: int) -> Iterator[pa.RecordBatch]:
    """(seq, global line, kind) of every event of one chunk of a node's file, up to its first
    malformed line: what the extra pass over a file whose seqs do not rise needs."""
    cols = _Columns(SEQS_ARROW)
    for number, _, event in _parsed_lines(chunk, ChunkSummary(chunk.path, chunk.number), _event_parser(chunk),
                                          (TypeError, ValueError)):
        if cols.add((event.seq, number + lines_before, event.kind)):
            yield cols.batch()
    if cols.pending:
        yield cols.batch()

