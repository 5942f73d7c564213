"""Jepsen's 2014 text logs: the history as it was printed to the console.

Early Jepsen tests (the etcd register test that Porcupine's and ahorn's checkers use as
test data) logged every op through ``jepsen.util``:

    INFO  jepsen.util - 3	:invoke	:cas	[1 4]

that is, process, type, f and value separated by tabs (or, as some Jepsen versions print
them, runs of spaces), the value in EDN. Every other line
(set-up chatter, stack traces) is not history and is skipped.

Two conventions of that client are made explicit on reading, because the checker must
know them: a value of ``:timed-out`` on an ``:info`` carries no result (the invocation's
value is what was attempted), and a ``:fail`` with ``:timed-out`` (the etcd client's
``:fail :read :timed-out``) is not a definite failure but an unknown outcome, so it becomes
``info``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from floodmark.formats import edn
from floodmark.formats.jepsen_edn import plain
from floodmark.history import OP_TYPES, HistoryError, Op, ProcessPairing
from floodmark.sources import read_source

# Fields are separated by a tab, or by a run of spaces in logs that some Jepsen versions
# (and copies through a terminal) print.
_LINE = re.compile(r"jepsen\.util - (\S+)[ \t]+:(\w+)[ \t]+:([\w-]+)(?:[ \t]+(.*))?$")
MARKER = "jepsen.util - "
_LOGGER = re.compile(rb"(?<!\S)jepsen\.util[ \t]+-")


def looks_like_text_log(data: bytes) -> bool:
    """Whether ``data`` has a record of Jepsen's ``jepsen.util`` logger in it."""
    return _LOGGER.search(data) is not None


def parse_text_history(text: str, source: str = "<log>", *, check_pairs: bool = False) -> list[Op]:
    ops: list[Op] = []
    pairing = ProcessPairing(source) if check_pairs else None
    # A log repeats a handful of processes and values thousands of times: each distinct text
    # is read as EDN once (values are rebuilt per op, so no two ops share a list).
    processes: dict[str, Any] = {}
    values: dict[str, Any] = {}
    line_of = _LINE.search
    number = 0
    for raw in text.split("\n"):
        number += 1
        if MARKER not in raw:
            continue
        m = line_of(raw)
        if m is None:
            raise HistoryError(source, number, "a jepsen.util line that is not 'process :type :f value' "
                               "(separated by tabs or spaces)")
        process_text, op_type, f, value_text = m.groups()
        if op_type not in OP_TYPES:
            raise HistoryError(source, number, f"unknown op type :{op_type}")
        process = processes.get(process_text, _UNREAD)
        if process is _UNREAD:
            process = processes[process_text] = _process(process_text, source, number)
        value_text = (value_text or "").rstrip(" \t\r")
        value = values.get(value_text, _UNREAD)
        if value is _UNREAD:
            value = values[value_text] = _value(value_text, source, number)
        if type(value) is list:
            value = _copy(value)
        error = None
        if value == "timed-out" and op_type in ("info", "fail"):
            value, error = None, "timed-out"
            op_type = "info"  # the client gave up waiting: the outcome is unknown, not a failure
        index = len(ops)
        op = Op(index, index, op_type, process, f, value, None, error)  # type: ignore[arg-type]
        if pairing is not None:
            pairing.see(op, number)
        ops.append(op)
    return ops


_UNREAD: Any = object()


def _process(text: str, source: str, number: int) -> int | str:
    try:
        process = plain(edn.loads(text, source))
    except edn.EdnError as e:
        raise HistoryError(source, number, e.problem) from None
    if isinstance(process, bool) or not isinstance(process, int | str):
        raise HistoryError(source, number, f"process must be an integer or a keyword, got {text[:40]!r}")
    return process  # type: ignore[no-any-return]


def _value(text: str, source: str, number: int) -> Any:
    if not text:
        return None
    try:
        return plain(edn.loads(text, source))
    except edn.EdnError as e:
        raise HistoryError(source, number, e.problem) from None


def _copy(value: Any) -> Any:
    if type(value) is list:
        return [_copy(v) for v in value]
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    return value


def read_text_history(path: str | os.PathLike[str]) -> list[Op]:
    # Only the jepsen.util lines are history; a stray byte in the chatter around them is not
    # worth refusing the log for, so undecodable bytes are replaced.
    return parse_text_history(read_source(path).decode("utf-8", errors="replace"), str(path))
