"""Reading a history in whichever format it comes in.

``floodmark check`` accepts our JSONL histories, Jepsen EDN histories (a vector of op maps
or a stream of them; those of Jepsen's kafka workload are translated into queue ops,
:mod:`.jepsen_kafka`) and Jepsen's 2014 text logs. The format is recognised from the
content, not the file name (Porcupine's EDN test data is named ``*.txt``), by the structure
of the first line that is neither blank nor an EDN comment (``;``), however far down it is:

- a JSON object (``{`` then ``"``) is JSONL, unless the line is no JSON but an EDN map (an
  op map whose keys are strings, ``{"process" 0, "type" :invoke ...}``);
- a ``jepsen.util`` record of an op, not inside quotes, is a Jepsen text log, whatever
  precedes its level (``[2014-05-01 12:00:00,123] INFO  jepsen.util - 0 :invoke ...``);
- an EDN form (``{``, ``[``, ``(``, ``#``, or ``^`` for metadata before one) is EDN, unless
  it is not EDN at all and op records follow: a log whose chatter starts like EDN
  (``{this is chatter}``, ``# log start``) is read as the log;
- anything else is a Jepsen text log if a ``jepsen.util`` record is anywhere in the file
  (a log's chatter comes before its first op).

The structure is looked at first because the text ``jepsen.util - `` can be a value inside a
JSON or EDN op: a history that quotes a log line is still that history, never a log of one
line. Blank means ASCII whitespace, as in JSON.

The source is read once (:mod:`floodmark.inputs.sources`) and both detected and parsed from
memory: a pipe or standard input gives its data to the first reader only, so peeking at it
and then reopening it would judge an empty history.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from floodmark.contracts.history import HistoryError, Op, parse_history
from floodmark.formats import edn
from floodmark.formats.jepsen_edn import parse_edn_history
from floodmark.formats.jepsen_kafka import is_jepsen_kafka, translate
from floodmark.formats.jepsen_text import (
    has_op_records,
    is_op_record,
    later_layout,
    looks_like_text_log,
    parse_text_log,
)
from floodmark.inputs.plain_values import parse_json
from floodmark.inputs.sources import STDIN, decode_utf8, read_source

JSONL = "jsonl"
EDN = "edn"
JEPSEN_TEXT = "jepsen-text"  # Jepsen's 2014 console log layout
JEPSEN_LOG = "jepsen-log"  # later Jepsen's jepsen.log layout (the same ops, later conventions)
FORMATS = (JSONL, EDN, JEPSEN_TEXT, JEPSEN_LOG)


def text_format(data: bytes) -> str:
    """Which of the two text log layouts ``data`` is in."""
    return JEPSEN_LOG if later_layout(data) else JEPSEN_TEXT


@dataclass(frozen=True)
class LoadedHistory:
    path: Path
    format: str
    ops: list[Op]  # as the checkers read them (a Jepsen kafka history's: translated)
    # A Jepsen kafka history (:mod:`.jepsen_kafka`): the ops as the file holds them, and what
    # it holds that no checker judges (its verdict is unknown at best, naming these).
    kafka_ops: list[Op] | None = None
    unjudged: tuple[str, ...] = ()

    @property
    def file_ops(self) -> list[Op]:
        """The ops as the file holds them (what --to-edn writes)."""
        return self.ops if self.kafka_ops is None else self.kafka_ops


def detect_format(path: str | os.PathLike[str]) -> str:
    """Which format a history file is in; raises HistoryError when it is none of them."""
    source = str(path)
    return format_of(read_source(source), source)


def format_of(data: bytes, source: str) -> str:
    """Which format a history's bytes are in; raises HistoryError when it is none of them."""
    begin = len(_BOM) if data.startswith(_BOM) else 0
    start = _first_line(data, begin)
    if start is None:
        if _NOT_BLANK.search(data, begin) is None:
            raise HistoryError(source, 1, "empty file: no history")
        raise HistoryError(source, 1, "not a history: only comments")
    if _JSON_OBJECT.match(data, start):
        return EDN if _edn_map_not_json(data, start) else JSONL
    if _JSON_DOCUMENT.match(data, start):  # "{" alone on its line, then a quoted key: JSON over many lines
        raise HistoryError(source, data.count(b"\n", 0, start) + 1,
                           "not a history: one JSON document over many lines; a JSONL history has one op per line")
    if data[start:start + 1] in (b"{", b"[", b"(", b"#", b"^"):
        end = data.find(b"\n", start)
        first = data[start:end if end >= 0 else len(data)].decode("utf-8", errors="surrogateescape")
        return text_format(data) if is_op_record(first.rstrip("\r")) else EDN
    if looks_like_text_log(data):
        return text_format(data)
    raise HistoryError(source, data.count(b"\n", 0, start) + 1,
                       "not a history: expected JSONL, EDN or a Jepsen text log")


_BOM = b"\xef\xbb\xbf"
_NOT_BLANK = re.compile(rb"[^ \t\n\r\f\v]")
_JSON_OBJECT = re.compile(rb'\{[ \t]*"')
_JSON_DOCUMENT = re.compile(rb'\{[ \t\r]*\n[ \t\r\n]*"')
# Blanks and EDN comments, possessively: skipped in one pass of the regex engine, however many.
_BLANKS_AND_COMMENTS = re.compile(rb"(?:[ \t\n\r\f\v]++|;[^\n]*+)*+")


def _edn_map_not_json(data: bytes, start: int) -> bool:
    """Whether the first line, which starts like a JSON object, is no JSON but an EDN map on
    its line: an op map whose keys are strings (``{"process" 0, "type" :invoke, ...}``, which
    EDN reads as it reads keyword keys). No op of a JSONL history is one, since its type is a
    string where EDN's reader wants a value after the key, not ``:"ok"``; a JSON line that is
    damaged is still JSONL, refused in JSON's words."""
    end = data.find(b"\n", start)
    line = data[start:end if end >= 0 else len(data)]
    try:
        parse_json(line)
    except ValueError:
        pass
    else:
        return False
    try:
        return type(edn.loads(line.decode("utf-8"))) is dict
    except (edn.EdnError, UnicodeDecodeError):
        return False


def _first_line(data: bytes, pos: int) -> int | None:
    """Where the first line that is neither blank nor an EDN comment starts (at its first
    byte that is not blank), however many blank bytes and comments come before it; None if
    none does."""
    skipped = _BLANKS_AND_COMMENTS.match(data, pos)
    assert skipped is not None  # the pattern matches the empty string
    return skipped.end() if skipped.end() < len(data) else None


def load_history(path: str | os.PathLike[str], format: str | None = None) -> LoadedHistory:
    """Read a history in any supported format (detected unless ``format`` is given) from a
    file, a pipe, a FIFO or standard input (``-``), reading it exactly once."""
    name = os.fspath(path)
    source = "<stdin>" if name == STDIN else name
    data = read_source(name)
    fmt = format or format_of(data, source)
    if fmt == JSONL:
        ops = parse_history(data, source)
    elif fmt == EDN:
        lines: list[int] = []
        try:
            ops = parse_edn_history(decode_utf8(data, source), source, check_pairs=True, lines=lines)
        except HistoryError:
            if format is not None or not has_op_records(data):
                raise
            fmt, ops = text_format(data), parse_text_log(data, source, check_pairs=True)  # chatter that looked like EDN
        else:
            if is_jepsen_kafka(ops):
                kafka = translate(ops, source, lines)
                return LoadedHistory(Path(name), fmt, kafka.ops, ops, kafka.unjudged)
    elif fmt in (JEPSEN_TEXT, JEPSEN_LOG):
        ops = parse_text_log(data, source, check_pairs=True)
    else:
        raise ValueError(f"unknown history format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if not ops:
        raise HistoryError(source, 0, f"no ops: an empty {fmt} history")
    return LoadedHistory(Path(name), fmt, ops)
