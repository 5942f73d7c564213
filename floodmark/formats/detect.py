"""Reading a history in whichever format it comes in.

``floodmark check`` accepts our JSONL histories, Jepsen EDN histories (a vector of op maps
or a stream of them) and Jepsen's 2014 text logs. The format is recognised from the
content, not the file name (Porcupine's EDN test data is named ``*.txt``):

- a line starting ``{"`` is JSON, so JSONL;
- a line mentioning ``jepsen.util - `` is a Jepsen text log;
- anything starting with ``[``, ``(`` or ``{`` (after comments) is EDN.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from floodmark.formats.jepsen_edn import read_edn_history
from floodmark.formats.jepsen_text import MARKER, read_text_history
from floodmark.history import HistoryError, Op, read_history

JSONL = "jsonl"
EDN = "edn"
JEPSEN_TEXT = "jepsen-text"
FORMATS = (JSONL, EDN, JEPSEN_TEXT)


@dataclass(frozen=True)
class LoadedHistory:
    path: Path
    format: str
    ops: list[Op]


def detect_format(path: str | os.PathLike[str]) -> str:
    """Which format a history file is in; raises HistoryError when it is none of them."""
    source = str(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        head = f.read(65536)
    for number, raw in enumerate(head.splitlines(), start=1):
        line = raw.strip()
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
    """Read a history file in any supported format (detected unless ``format`` is given)."""
    fmt = format or detect_format(path)
    if fmt == JSONL:
        ops = read_history(path)
    elif fmt == EDN:
        ops = read_edn_history(path)
    elif fmt == JEPSEN_TEXT:
        ops = read_text_history(path)
    else:
        raise ValueError(f"unknown history format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return LoadedHistory(Path(path), fmt, ops)
