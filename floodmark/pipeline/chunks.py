"""Large JSONL files read in parallel: byte-range chunks parsed and validated on executors.

A history of millions of ops is one file; read by one task it is read by one core. Here a
file is cut into byte ranges of ``CHUNK_BYTES`` and each range is parsed by its own task
(``mapInArrow``, so rows reach the JVM as Arrow batches, not pickled tuples). A chunk owns
the lines that *start* inside its range, so every line belongs to exactly one chunk whatever
the cut points.

Validation is the sequential reader's, decided from per-chunk summaries: each task reports
(through an accumulator) how many lines and ops it saw, its first op's index, the first place
its indices stopped running on, and its first malformed line, all in chunk-local line
numbers. The driver adds up the line counts of earlier chunks, so the error it reports names
the file and the global line exactly as :func:`floodmark.contracts.history.iter_history` would, and
checks that each chunk's first index continues the previous chunk (dense indices from 0).

Parsing goes through :mod:`floodmark.inputs.fast_json`: orjson, or the standard ``json`` module for
what orjson would refuse or read differently (NaN, huge integers), with its familiar messages.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
import pyarrow as pa

from floodmark.contracts.history import OP_TYPES, inner_value_missing, op_from_dict
from floodmark.contracts.node_events import NodeEvent, event_from_dict
from floodmark.errors import SourceError
from floodmark.inputs import fast_json
from floodmark.inputs.duplicate_keys import duplicate_key, keys_unaccounted
from floodmark.inputs.plain_values import json_decode_problem
from floodmark.inputs.sources import skip_bom
from floodmark.inputs.torn_lines import cut_short
from floodmark.pipeline.records import INT32, INT64, event_columns, in_range, json_text

T = TypeVar("T")
CHUNK_BYTES = 32 * 1024 * 1024
_READ_BYTES = 4 * 1024 * 1024  # rows go out in Arrow batches of about this much input

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


@dataclass(frozen=True)
class Chunk:
    """Bytes [start, end) of one file; ``number`` orders the chunks of that file."""

    path: str
    number: int
    start: int
    end: int
    last: bool  # the file's final chunk, whose torn last line is tolerated


@dataclass
class ChunkSummary:
    """What one task saw in its chunk; line numbers are 1-based within the chunk."""

    path: str
    number: int
    lines: int = 0
    rows: int = 0
    first_index: int | None = None
    first_row_line: int | None = None
    first_time: int | None = None
    last_time: int | None = None
    error: tuple[int, str] | None = None  # (line, problem)
    index_break: tuple[int, int, int] | None = None  # (line, index found, ops before it in the chunk)
    witness_times: dict[int, int] = field(default_factory=dict)
    # The file's last line is not blank and no newline ends it (cut mid-line, or after its
    # last character): what the sequential readers note as cut short.
    cut_short: bool = False


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


def iter_lines(chunk: Chunk) -> Iterator[tuple[int, bytes, bool]]:
    """(chunk-local line number, line without its newline, whether it had one) per owned line."""
    with open(chunk.path, "rb") as f:
        begin = _line_start_at_or_after(f, chunk.start)
        stop = _line_start_at_or_after(f, chunk.end) if not chunk.last else os.fstat(f.fileno()).st_size
        f.seek(begin)
        if begin == 0:  # a byte order mark is no part of the first line (as the readers say)
            skip_bom(f)
            begin = f.tell()
        remaining, carry, number = stop - begin, b"", 0
        while remaining > 0:
            block = f.read(min(_READ_BYTES, remaining))
            if not block:
                break
            remaining -= len(block)
            lines = (carry + block).split(b"\n")
            carry = lines.pop()
            for line in lines:
                number += 1
                yield number, line, True
        if carry:
            number += 1
            yield number, carry, False


def _dumps(value: Any, fast: bool) -> str:
    if fast:  # orjson parsed it, so orjson can write it back exactly
        return orjson.dumps(value).decode()
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

    def batch(self) -> pa.RecordBatch:
        arrays = [pa.array(column, type=f.type) for column, f in zip(self.data, self.schema, strict=True)]
        self.data = [[] for _ in self.schema.names]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _parsed_lines(chunk: Chunk, summary: ChunkSummary, parse: Callable[[Any, int], T],
                  json_problem: Callable[[bytes, json.JSONDecodeError], str], *, torn_source_errors: bool,
                  torn_only_if_cut: bool = False,
                  other_errors: tuple[type[Exception], ...] = ()) -> Iterator[tuple[int, Any, bool, T]]:
    """Each non-blank line of ``chunk`` as (line number, its JSON, whether fast_json parsed it,
    what ``parse(json, line number)`` made of it), up to the first problem, which goes into
    ``summary``. A torn last line that is not JSON (the harness died mid-write) is skipped, as
    the readers skip it: with ``torn_only_if_cut``, only one that is the beginning of a JSON
    text (as the history reader decides, :func:`~floodmark.inputs.torn_lines.cut_short`); one
    ``parse`` rejects too, with ``torn_source_errors``. ``other_errors`` from ``parse`` are
    problems too (say, a wall clock that is not a number).
    """
    for number, raw, whole in iter_lines(chunk):
        summary.lines = number
        if not raw.strip():
            continue
        if not whole:  # (only a file's last line comes without its newline)
            summary.cut_short = True
        try:
            d, fast = fast_json.parse(raw)
            twice = duplicate_key(raw, d) if keys_unaccounted(raw, d) else None
            if twice is not None:  # (as the readers refuse it)
                summary.error = (number, twice)
                return
            parsed = parse(d, number)
        except json.JSONDecodeError as e:
            if not whole and (not torn_only_if_cut or cut_short(raw)):
                continue
            summary.error = (number, json_problem(raw, e))
            return
        except UnicodeDecodeError as e:
            if not whole and torn_only_if_cut and cut_short(raw):
                continue  # a character cut in the middle of its bytes
            summary.error = (number, f"not valid UTF-8 ({e.reason} at byte {e.start})")
            return
        except SourceError as e:
            if torn_source_errors and not whole:
                continue
            summary.error = (number, e.problem)
            return
        except other_errors as e:
            summary.error = (number, f"{type(e).__name__}: {e}")
            return
        yield number, d, fast, parsed


def _not_json(raw: bytes, e: json.JSONDecodeError) -> str:
    return f"not valid JSON ({json_decode_problem(raw, e)})"  # as the readers word it


def history_rows(chunk: Chunk, run_id: str, witnesses: frozenset[int],
                 report: Callable[[ChunkSummary], None]) -> Iterator[pa.RecordBatch]:
    """Parse one chunk of a history into ``ops`` rows; stop at the first problem."""
    summary = ChunkSummary(chunk.path, chunk.number)
    cols = _Columns(OPS_ARROW)
    (c_run, c_index, c_time, c_type, c_process, c_f, c_topic, c_partition, c_offset, c_node, c_error,
     c_value) = cols.data
    pending = 0

    def check_op(d: Any, number: int) -> None:
        if not _valid_op(d):
            op_from_dict(d, chunk.path, number)  # raises with the reader's own message

    # A torn last line is forgiven as the history reader forgives it: only if it was cut.
    for number, d, fast, _ in _parsed_lines(chunk, summary, check_op, _not_json,
                                            torn_source_errors=False, torn_only_if_cut=True):
        index = d["index"]
        if summary.first_index is None:
            summary.first_index, summary.first_row_line, summary.first_time = index, number, d["time"]
        elif index != summary.first_index + summary.rows:
            summary.index_break = (number, index, summary.rows)
            break
        summary.rows += 1
        summary.last_time = d["time"]
        if index in witnesses:
            summary.witness_times[index] = d["time"]
        value, error = d.get("value"), d.get("error")
        topic = partition = offset = None
        if type(value) is dict:  # lifted as records does it: only what the column holds
            topic, partition, offset = value.get("topic"), value.get("partition"), value.get("offset")
            topic = topic if isinstance(topic, str) else None
            partition = in_range(partition, INT32)
            offset = in_range(offset, INT64)
        c_run.append(run_id)
        c_index.append(index)
        c_time.append(d["time"])
        c_type.append(d["type"])
        c_process.append(str(d["process"]))
        c_f.append(d["f"])
        c_topic.append(topic)
        c_partition.append(partition)
        c_offset.append(offset)
        c_node.append(d.get("node"))
        c_error.append(None if error is None else error if isinstance(error, str) else _dumps(error, fast))
        c_value.append(_dumps(value, fast))
        pending += 1
        if pending >= 65536:
            yield cols.batch()
            (c_run, c_index, c_time, c_type, c_process, c_f, c_topic, c_partition, c_offset, c_node,
             c_error, c_value) = cols.data
            pending = 0
    report(summary)
    if pending and summary.error is None and summary.index_break is None:
        yield cols.batch()


def event_rows(chunk: Chunk, run_id: str, report: Callable[[ChunkSummary], None]) -> Iterator[pa.RecordBatch]:
    """Parse one chunk of a node's event file into ``node_events`` rows."""
    summary = ChunkSummary(chunk.path, chunk.number)
    cols = _Columns(EVENTS_ARROW)
    pending = 0

    def parse(d: Any, number: int) -> NodeEvent:
        return event_from_dict(d, chunk.path, number)

    # A torn last line is forgiven as the event reader forgives it: only if it was cut.
    for _, _, fast, event in _parsed_lines(chunk, summary, parse, _not_json, torn_source_errors=False,
                                           torn_only_if_cut=True, other_errors=(TypeError, ValueError)):
        summary.rows += 1
        row = (run_id, event.node, event.seq, event.wall, event.kind, *event_columns(event),
               _dumps(event.fields(), fast))
        for column, cell in zip(cols.data, row, strict=True):
            column.append(cell)
        pending += 1
        if pending >= 65536:
            yield cols.batch()
            pending = 0
    report(summary)
    if pending and summary.error is None and summary.index_break is None:
        yield cols.batch()


def first_problem(summaries: list[ChunkSummary], *, dense_from_zero: bool) -> tuple[int, str] | None:
    """The file's first problem as (global line, problem), from its chunks' summaries.

    With ``dense_from_zero`` (histories), each chunk's first index must continue the count of
    ops before it, as the sequential reader requires.
    """
    lines_before = rows_before = 0
    for s in sorted(summaries, key=lambda s: s.number):
        problems: list[tuple[int, str]] = []
        if s.error is not None:
            problems.append(s.error)
        if dense_from_zero and s.first_index is not None and s.first_row_line is not None:
            if s.first_index != rows_before:
                problems.append((s.first_row_line, f"op index {s.first_index} out of sequence "
                                                   f"(expected {rows_before})"))
            elif s.index_break is not None:
                line, index, position = s.index_break
                problems.append((line, f"op index {index} out of sequence (expected {rows_before + position})"))
        if problems:
            line, problem = min(problems)
            return lines_before + line, problem
        lines_before += s.lines
        rows_before += s.rows
    return None
