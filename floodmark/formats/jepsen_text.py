"""Jepsen's text logs: the history as it was printed to the console and to ``jepsen.log``.

Jepsen 0.0.x (2014: the etcd register test whose logs Porcupine's and ahorn's checkers use
as test data; later versions kept the layout for years) logged through log4j's layout
``%-5p %c - %m%n`` (the level padded to five, the logger, `` - ``, the message), and every
op through ``jepsen.util/log-op``, at INFO, as ``process \t type \t (pr-str f) \t (pr-str
value)``, later followed by ``\t error``:

    INFO  jepsen.util - 3	:invoke	:cas	[1 4]
    INFO  jepsen.util - :nemesis	:info	:start	nil
    INFO  jepsen.util - 2	:ok	:cas	[0 4]	sql: OK OK 1 row val 0

Around them is chatter: other loggers' records (``INFO  jepsen.core - Worker 0 starting``),
stack traces, a test's report. Later Jepsen (through unilog; Maelstrom too) writes
``jepsen.log`` in another layout: a timestamp ending in a literal ``{GMT}``, the level, the
thread in brackets, the logger and a colon, tab-separated, then the same op message
(:func:`later_layout`):

    2021-02-26 23:39:01,300{GMT}	INFO	[jepsen worker 1] jepsen.util: 1	:invoke	:write	[0 2]
    2025-04-26 03:37:10,938{GMT}	INFO	[jepsen worker nemesis] jepsen.util: :nemesis	:info	:kill	nil

Its op lines, damaged lines and chatter follow the rules below, a colon taking the dash's
place; a line that begins with that timestamp but not with the whole record header (level,
thread, logger, colon) was cut short or damaged where an op may have been, so it is refused
too; and so is a log with op lines of both layouts (no Jepsen writes one, and which
conventions judge it would be a guess: a log pasted into another's). Its registers are
judged by later Jepsen's conventions, not 2014's (see ``format_conventions``), so the format
is told apart: ``jepsen-log``.

Chatter may be skipped, but an op must never be: a skipped
``:ok :write`` can turn an invalid history valid. So each line (without its line break) is
one of these, and only the last kind is skipped:

1. An **op line**: the level ``INFO``, blanks, the logger ``jepsen.util``, blanks, a dash,
   blanks or none, then process (an integer, or a keyword such as ``:nemesis``), ``:type``
   (``:invoke``, ``:ok``, ``:fail`` or ``:info``), ``:f`` and the value (one EDN form),
   separated by tabs or runs of spaces; then, after a tab, the error if there is one (free
   text; ``pr-str`` writes a tab in a value as ``\t``, so the first tab after the value
   starts it). So ``jepsen.util -<TAB>1``, ``jepsen.util  - 1`` and ``jepsen.util -1`` read
   like the tab-separated original, and whatever precedes the level (a timestamp a tool put
   there) is ignored. An op line that cannot be read (a field missing, an unknown type, a
   process that is neither an integer nor a keyword, an unreadable value) is refused. But
   later Jepsen's ``jepsen.util`` logs text of its own at INFO too (``await-fn``'s
   ``Waiting for port 2379 ...``, ``spy``'s pretty-printed values): a message that no
   process can begin (its first character is not a digit, a sign or a colon) and that has
   no op in it (rule 2's last shape) is that text, chatter. One character damaged cannot
   make an op line one: it would have to break both the process and the type and f.
2. A **damaged op line**, refused, which is any of:

   - a ``jepsen.util`` record (the logger, blanks, a dash) whose level is not a level
     (``NFO  jepsen.util - ...``) or is missing;
   - a line starting with ``INFO`` that is not ``INFO  logger - ...`` (``INFO  jepsen.uti1``,
     cut short; ``INFO  jepsen.util- 0 ...``), or is the start of one (``INF``);
   - an INFO record of a logger within two characters of ``jepsen.util`` (``jepsen.utl``);
     Jepsen's other loggers (``jepsen.core``, ``jepsen.os.debian``) are four or more away;
   - a line with an op in it that is not an op line: a type keyword (``:invoke``, ``:ok``,
     ``:fail``, ``:info``) followed by a keyword, or a process and a type keyword ending the
     line. That is an op whose logger or level was damaged or lost (``WARN  jepsen.util -
     0 :ok :read 1``), or one printed by something else (a failed test's report prints its
     linearizable prefix as bare op lines: keep the log's own ops only). Clojure prints maps
     with commas (``{:process 3, :type :ok, :f :read}``), so they do not look like one.
3. An op line with a carriage return inside it (not ending it, as in CRLF): a log whose
   lines end in a lone carriage return is one line to this reader, and every op after the
   first one's error tab would be read as that error, silently.
4. The **last line**, refused if it is an op line with no line break after it: Jepsen ends
   every record with one, and a log cut short inside a value can still read as an op, a
   wrong one (``:ok :read 12`` cut to ``:ok :read 1``). Add the line break if it is whole.
5. A line broken in two: after an op line whose value ended it, a line that is the rest of
   a value (one token's characters, up to a tab or the line's end) and that, put back on
   the op line, still reads as an op: ``:ok :read :xy`` broken after ``:x`` reads ``:x``,
   ``nil`` after ``ni`` the symbol ``ni``, and the rest would be chatter. A log record has
   no line break in it there (``pr-str`` writes a value on one line; only an error, printed
   with ``str``, may span lines), so it is refused. (A line such as ``[...]``, a blank or
   indented line, a record, a sentence cannot be the rest of a value that read whole.)
6. **Chatter**, skipped: everything else (other loggers' records, any logger's free text at
   other levels, stack traces, continuation lines, blank lines).

Bytes: Jepsen's JVM writes UTF-8. A byte that is not UTF-8 on a line of kinds 1-5 is
refused with its line, never replaced: two different damaged values must not read as the
same character. In chatter, which is skipped, it is tolerated (a log also carries what
remote commands printed, in whatever encoding they used).

Two conventions of that client are made explicit on reading, because the checker must
know them: a value of ``:timed-out`` on an ``:info`` carries no result (the invocation's
value is what was attempted), and a ``:fail`` with ``:timed-out`` (the etcd client's
``:fail :read :timed-out``) is not a definite failure but an unknown outcome, so it becomes
``info``. The second is that 2014 client's alone: in a later ``jepsen.log`` a ``:fail`` is a
definite failure whatever its value, as Jepsen's checkers read it (taken as unknown, a
failed write could explain a read it never made, and hide the anomaly).
"""

from __future__ import annotations

import os
import re
from typing import Any

from floodmark.contracts.history import OP_TYPES, HistoryError, Op, ProcessPairing
from floodmark.formats import edn
from floodmark.formats.jepsen_edn import plain
from floodmark.inputs.sources import read_source

# A thread's name (``[jepsen worker 1]``) has no bracket in it: a pattern that let it take
# ``[`` would, from each `` [`` of a long line, scan to the line's end (hours for a few MB).
# INFO, the thread in brackets (the later layout), the jepsen.util logger (a whole word: not
# jepsen.util-test), then the rest.
_OP_RECORD = re.compile(r"(?<!\S)INFO[ \t]+(?:\[[^\[\]\n]*+\][ \t]++)?jepsen\.util(?![^ \t:])")
# A jepsen.util record at any level: the word before the logger (or its thread) is its level.
_UTIL_RECORD = re.compile(r"(?:(?<!\S)(\S++)[ \t]++|^[ \t]*+)"
                          r"(?:jepsen\.util[ \t]++-|\[[^\[\]\n]*+\][ \t]++jepsen\.util:)")
# The later layout's record header: a timestamp ending in Jepsen's literal {GMT}, the level,
# the thread in brackets, the logger and a colon. A line that begins with such a timestamp
# and lacks the rest was cut short (or damaged) inside its header, and may have been an op.
_STAMPED = re.compile(r"[ \t]*+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d++\{GMT\}")
_STAMPED_RECORD = re.compile(r"[ \t]++(\S++)[ \t]++\[[^\[\]\n]*+\][ \t]++([\w.$*+!?<>=/'-]++):")
# An INFO record as log4j writes it: the level, the logger (a Clojure namespace or a Java
# class name), a dash.
_INFO_RECORD = re.compile(r"INFO[ \t]++([\w.$*+!?<>=/'-]++)[ \t]++-")
# After the logger: a dash (log4j's 2014 layout) or a colon (the later one), then the op.
_OP_MESSAGE = re.compile(r"(?:[ \t]*+-|:)[ \t]*+(\S++)[ \t]++:(\S++)[ \t]++:(\S++)(?:[ \t]++(.++))?")
# A type then an f (Jepsen prints maps with commas, so ':type :ok, :f' is not one), or a
# process and a type ending the line.
_OP_SHAPED = re.compile(r"(?:^|[ \t]):(?:invoke|ok|fail|info)[ \t]++:[^\s:,]"
                        r"|(?:^|[ \t-])(?:\d++|:[^\s:,]++)[ \t]++:(?:invoke|ok|fail|info)[ \t]*+$")
# The rest of an EDN token cut by a line break, up to the error's tab or the line's end and
# any blanks before it (rule 5).
_TOKEN_TAIL = re.compile(r"[^\s\[\](){}\"\\;,]++(?:\t|[ \t]*+$)")
# After the logger, a message that no process begins: jepsen.util's own text (rule 1).
_UTIL_TEXT = re.compile(r"(?:[ \t]*+-|:)[ \t]*+[^\s\d:+-]")
_TYPE_KEYWORD = re.compile(r":(?:invoke|ok|fail|info)")  # cheap, so that most chatter goes no further
_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
_LOGGER = re.compile(rb"(?<!\S)jepsen\.util(?:[ \t]+-|:)")
_UNDECODABLE = re.compile("[\ud800-\udfff]")  # bytes kept by surrogateescape, or lone surrogates
_LAYOUTS = {False: "the 2014 layout ('INFO  jepsen.util - ...')",
            True: "the later layout ('INFO [thread] jepsen.util: ...')"}
_TIMED_OUT = ":timed-out"
_MAX_MESSAGES = 1 << 16  # distinct op messages remembered (a log repeats a few thousand)


# An op record of the later layout (Jepsen's jepsen.log since unilog): the thread in brackets
# between the level and the logger, a colon after it, then what can begin a process (not
# jepsen.util's own text, rule 1).
_LATER_OP_RECORD = re.compile(rb"(?<!\S)INFO[ \t]+\[[^\[\]\n]*+\][ \t]++jepsen\.util:[ \t]*+[\d:+-]")


def later_layout(data: bytes) -> bool:
    """Whether ``data`` is a log of the later layout (``time{GMT} INFO [thread] jepsen.util:
    ...``), which later Jepsen writes to ``jepsen.log``, rather than the 2014 one."""
    return _LATER_OP_RECORD.search(data) is not None


def looks_like_text_log(data: bytes) -> bool:
    """Whether ``data`` has a record of Jepsen's ``jepsen.util`` logger in it."""
    return _LOGGER.search(data) is not None


def is_op_record(line: str) -> bool:
    """Whether ``line`` is a ``jepsen.util`` INFO record of an op, outside any quotes: whatever
    precedes the level (a timestamp in brackets, a thread name) may start like EDN, but an
    EDN or JSON op that quotes such a record has a quote before it."""
    record = _OP_RECORD.search(line)
    return (record is not None and '"' not in line[:record.start()]
            and _OP_MESSAGE.match(line, record.end()) is not None)


def has_op_records(data: bytes) -> bool:
    """Whether any line of ``data`` is an op record (:func:`is_op_record`)."""
    pos = 0
    while (found := _LOGGER.search(data, pos)) is not None:
        start = data.rfind(b"\n", 0, found.start()) + 1
        end = data.find(b"\n", found.end())
        end = end if end >= 0 else len(data)
        if is_op_record(data[start:end].decode("utf-8", errors="surrogateescape").rstrip("\r")):
            return True
        pos = end  # each line looked at once, however many times it names the logger
    return False


def parse_text_log(data: bytes, source: str = "<log>", *, check_pairs: bool = False) -> list[Op]:
    """The history in a text log's bytes (see the module's rules)."""
    # surrogateescape keeps each undecodable byte as its own character, so a line that
    # counts can be refused naming the byte, and chatter can keep any bytes it has.
    return parse_text_history(data.decode("utf-8", errors="surrogateescape"), source, check_pairs=check_pairs)


def parse_text_history(text: str, source: str = "<log>", *, check_pairs: bool = False) -> list[Op]:
    """The history in a text log (see the module's rules)."""
    ops: list[Op] = []
    pairing = ProcessPairing(source) if check_pairs else None
    # A log repeats a handful of processes, types, fs and values thousands of times: each
    # distinct text is read as EDN once (values are rebuilt per op, so no two ops share a list).
    cache: dict[str, Any] = {}
    messages: dict[str, tuple[str, Any, str, Any, str, str | None]] = {}  # each distinct op message, read
    near_misses: dict[str, bool] = {}  # logger -> whether it is jepsen.util damaged
    clean = _UNDECODABLE.search(text) is None  # then no line needs looking at for bad bytes
    lines = text.removeprefix("\ufeff").split("\n")
    first_op: tuple[int, bool] | None = None  # the first op line's number and whether it is later_layout
    ended: tuple[int, str] | None = None  # the last line's number and message if an op's value ended it
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r")
        record = _OP_RECORD.search(line) if "jepsen.util" in line else None
        if record is not None and _UTIL_TEXT.match(line, record.end()) and not _OP_SHAPED.search(line):
            record = None  # jepsen.util's own text (rule 1)
        if record is None:
            damage = _damage(line, near_misses)
            if damage is None and ended is not None and _TOKEN_TAIL.match(line) and _reads(ended[1] + line, cache):
                damage = f"the rest of the op line {ended[0]} (it reads as part of its value): the line broken in two"
            ended = None
            if damage is None:
                continue  # chatter
            if not clean:
                _refuse_undecodable(line, source, number)
            raise HistoryError(source, number, f"{damage}; refused rather than skipped: {line.strip()[:60]!r}")
        if not clean:
            _refuse_undecodable(line, source, number)
        message = line[record.end():]
        later = message[:1] == ":" and "[" in record[0]  # INFO [thread] jepsen.util: (later_layout)
        if first_op is None:
            first_op = (number, later)
        elif later != first_op[1]:
            raise HistoryError(source, number, f"an op line of {_LAYOUTS[later]}, after one of "
                               f"{_LAYOUTS[first_op[1]]} on line {first_op[0]}: two logs in one, "
                               "whose ops are judged by different conventions")
        read = messages.get(message)
        if read is None:
            if "\r" in message.rstrip(" \t\r"):
                # (a log whose lines end in a lone carriage return is one line here: the
                # ops after the first one's tab would be its error text, never read)
                raise HistoryError(source, number, "a carriage return inside an op line: a log's lines end "
                                   "in a line feed, so what follows it would be read as part of this op")
            read = _read_op(message, cache, source, number)
            if len(messages) < _MAX_MESSAGES:
                messages[message] = read
        op_type, process, f, value, value_text, error = read
        ended = (number, message) if error is None and not message.rstrip(" ").endswith("\t") else None
        if type(value) is list or type(value) is dict:
            value = _copy(value)  # each op its own: a checker may hold on to one
        if number == len(lines) and raw:
            raise HistoryError(source, number, "the last op line has no line break after it: the log may "
                               "have been cut short inside it (add the line break if the line is whole)")
        if value_text == _TIMED_OUT and op_type in ("info", "fail"):
            value, error = None, error or "timed-out"
            if not later:  # (2014's etcd client: it gave up waiting, so the outcome is unknown)
                op_type = "info"
        index = len(ops)
        op = Op(index, index, op_type, process, f, value, None, error)  # type: ignore[arg-type]
        if pairing is not None:
            pairing.see(op, number)
        ops.append(op)
    return ops


def _read_op(message: str, cache: dict[str, Any], source: str,
             number: int) -> tuple[str, Any, str, Any, str, str | None]:
    """(type, process, f, value, the value's text, error) of the message after INFO jepsen.util."""
    m = _OP_MESSAGE.fullmatch(message.rstrip(" \t"))
    if m is None:
        raise HistoryError(source, number, "a jepsen.util line that is not ' - process :type :f value' "
                           "(separated by tabs or spaces)")
    process_text, op_type, f_text, value_text = m.groups()
    if op_type not in OP_TYPES:
        raise HistoryError(source, number, f"unknown op type :{op_type[:40]}")
    if value_text is None:
        raise HistoryError(source, number, "no value after :f (Jepsen prints nil for none): the line may "
                           "have been cut short")
    process = _cached(cache, process_text, source, number)
    if isinstance(process, edn.Keyword):
        process = str.__str__(process)
    elif isinstance(process, bool) or not isinstance(process, int):
        raise HistoryError(source, number, f"process must be an integer or a keyword, got {process_text[:40]!r}")
    try:
        f = _cached(cache, ":" + f_text, source, number)
    except HistoryError:
        f = None
    if not isinstance(f, edn.Keyword):
        raise HistoryError(source, number, f":f must be a keyword, got {':' + f_text[:40]!r}")
    # Jepsen prints the value with pr-str, which writes a tab in a string as \t: a tab after
    # the value starts the error, printed with str (free text, as in 'sql: 1 row val 0').
    value_text, _, error = value_text.partition("\t")
    value_text = value_text.rstrip(" ")
    try:
        value = _cached(cache, value_text, source, number, convert=True)
    except HistoryError as e:
        if "exactly one form" not in e.problem:
            raise
        raise HistoryError(source, number, f"the value is not one EDN form ({e.problem}; an error after "
                           "it must follow a tab)") from None
    return op_type, process, str.__str__(f), value, value_text, error.strip(" \t") or None


def _reads(message: str, cache: dict[str, Any]) -> bool:
    """Whether ``message`` reads as an op's (process, type, f, value and perhaps an error)."""
    try:
        _read_op(message, cache, "", 0)
    except HistoryError:
        return False
    return True


_ON_LINE_ONE = re.compile(r"\bon line 1\b")
_VALUES = "values:"  # cache keys of converted values, apart from the raw forms of fields


def _cached(cache: dict[str, Any], text: str, source: str, number: int, *, convert: bool = False) -> Any:
    """``text`` read as one EDN form (converted to a plain value with ``convert``), once."""
    key = _VALUES + text if convert else text
    if key not in cache:
        try:
            form = edn.loads(text, source)
        except edn.EdnError as e:
            # (the text is one line's: the reader's "line 1" is the log's line ``number``)
            raise HistoryError(source, number, _ON_LINE_ONE.sub(f"on line {number}", e.problem)) from None
        cache[key] = plain(form) if convert else form
    return cache[key]


def _copy(value: Any) -> Any:
    if type(value) is list:
        return [_copy(v) for v in value]
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    return value


def _damage(line: str, near_misses: dict[str, bool]) -> str | None:
    """What is wrong with a line that is not an op line but may have been one (rule 2 of the
    module's), or None for chatter."""
    if "jepsen.util" in line and (util := _UTIL_RECORD.search(line)) and util[1] not in _LEVELS:
        return "a jepsen.util record whose level is damaged or missing, which may have been an op"
    if _cut_in_stamp(line):
        return "a log record cut short inside its timestamp, which may have been an op"
    stamped = _STAMPED.match(line)
    if stamped is not None:  # the later layout: timestamp, level, [thread], logger and a colon
        record = _STAMPED_RECORD.match(line, stamped.end())
        if record is None:
            return ("a log record ('time{GMT} LEVEL [thread] logger: message') cut short or damaged "
                    "before its message, which may have been an op")
        if record[1] == "INFO" and _near_miss(record[2], near_misses):
            return f"an INFO record of {record[2][:20]!r}, a damaged jepsen.util, which may have been an op"
    start = line.lstrip(" \t")
    if start.startswith("INFO") and start[4:5] in ("", " ", "\t"):
        record = _INFO_RECORD.match(start)
        if record is None:
            return "an INFO line that is not a log record ('INFO  logger - message'), which may have been an op"
        if _near_miss(record[1], near_misses):
            return f"an INFO record of {record[1][:20]!r}, a damaged jepsen.util, which may have been an op"
    elif start.rstrip() in ("I", "IN", "INF"):
        return "a log record cut short before its message, which may have been an op"
    if ":" in line and _TYPE_KEYWORD.search(line) and _OP_SHAPED.search(line):
        return ("an op that is not on an op line ('INFO  jepsen.util - process :type :f value'): its level "
                "or logger is damaged, or something else printed it")
    return None


_STAMP_TEMPLATE = "0000-00-00 00:00:00,000{GMT}"  # "0": any digit


def _cut_in_stamp(line: str) -> bool:
    """Whether ``line`` is the later layout's timestamp cut short (``2021-02-2``): a record
    whose header, and perhaps an op, was cut away."""
    text = line.rstrip(" \t")
    return (0 < len(text) < len(_STAMP_TEMPLATE) and text[0].isdigit()
            and all(c in "0123456789" if t == "0" else c == t for c, t in zip(text, _STAMP_TEMPLATE)))


def _near_miss(logger: str, known: dict[str, bool]) -> bool:
    """Whether ``logger`` is ``jepsen.util`` with one or two characters deleted, inserted or
    changed (``jepsen.uti1``, ``jepsen.util-``); Jepsen's other loggers (``jepsen.core``,
    ``jepsen.os.debian``, ``knossos.core``) are four or more away."""
    if logger not in known:
        known[logger] = logger != "jepsen.util" and _within_two_edits(logger, "jepsen.util")
    return known[logger]


def _within_two_edits(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 2:
        return False
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, start=1):
        row = [i]
        for j, other in enumerate(b, start=1):
            row.append(min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (char != other)))
        if min(row) > 2:
            return False
        previous = row
    return previous[-1] <= 2


def _refuse_undecodable(line: str, source: str, number: int) -> None:
    bad = _UNDECODABLE.search(line)
    if bad is None:
        return
    code = ord(bad.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that surrogateescape kept
        raise HistoryError(source, number, f"not UTF-8 text (byte 0x{code - 0xDC00:02x})")
    raise HistoryError(source, number, f"a lone surrogate (U+{code:04X}), not Unicode text")


def read_text_history(path: str | os.PathLike[str]) -> list[Op]:
    return parse_text_log(read_source(path), str(path))
