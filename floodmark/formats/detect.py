"""Reading a history in whichever format it comes in.

``floodmark check`` accepts our JSONL histories, Jepsen EDN histories (a vector of op maps
or a stream of them) and Jepsen's 2014 text logs. The format is recognised from the
content, not the file name (Porcupine's EDN test data is named ``*.txt``):

- a line starting ``{"`` is JSON, so JSONL;
- a line mentioning ``jepsen.util - `` is a Jepsen text log;
- anything starting with ``[``, ``(`` or ``{`` (after comments) is EDN.

The source is read once (:mod:`floodmark.sources`) and both detected and parsed from
memory: a pipe or standard input gives its data to the first reader only, so peeking at it
and then reopening it would judge an empty history.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from floodmark.formats.jepsen_edn import parse_edn_history
from floodmark.formats.jepsen_text import MARKER, parse_text_history
from floodmark.history import HistoryError, Op, parse_history
from floodmark.sources import STDIN, decode_utf8, read_source

JSONL = "jsonl"
EDN = "edn"
JEPSEN_TEXT = "jepsen-text"
FORMATS = (JSONL, EDN, JEPSEN_TEXT)
_HEAD = 65536


@dataclass(frozen=True)
class LoadedHistory:
    path: Path
    format: str
    ops: list[Op]


def detect_format(path: str | os.PathLike[str]) -> str:
    """Which format a history file is in; raises HistoryError when it is none of them."""
    source = str(path)
    return format_of(read_source(source), source)


def format_of(data: bytes, source: str) -> str:
    """Which format a history's bytes are in; raises HistoryError when it is none of them."""
    head = data[:_HEAD].decode("utf-8", errors="replace")
    for number, raw in enumerate(head.splitlines(), start=1):
        line = raw.strip().lstrip("\ufeff")
        if not line or line.startswith(";"):
            continue
        if MARKER in line:
            return JEPSEN_TEXT
        if line.startswith("{"):
            return JSONL if line[1:].lstrip().startswith('"') else EDN
        if line[0] in "[(#":
            return EDN
        if MARKER in head:
            return JEPSEN_TEXT  # log preamble before the first history line
        raise HistoryError(source, number, "not a history: expected JSONL, EDN or a Jepsen text log")
    if not head.strip():
        raise HistoryError(source, 1, "empty file: no history")
    raise HistoryError(source, 1, "not a history: only comments")


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
        ops = parse_edn_history(decode_utf8(data, source), source, check_pairs=True)
    elif fmt == JEPSEN_TEXT:
        # Only the jepsen.util lines are history; a stray byte in the chatter around them is
        # not worth refusing the log for, so undecodable bytes are replaced.
        ops = parse_text_history(data.decode("utf-8", errors="replace"), source, check_pairs=True)
    else:
        raise ValueError(f"unknown history format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if not ops:
        raise HistoryError(source, 0, f"no ops: an empty {fmt} history")
    return LoadedHistory(Path(name), fmt, ops)
