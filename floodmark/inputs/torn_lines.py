"""A line cut short: what a writer killed in the middle of a line leaves at the end of a file.

The history, the node events and every other append-only JSON-lines file of a run are
written a line at a time, so a harness or a node killed mid-write leaves the beginning of a
JSON text with no newline after it. Readers forgive that last line, and only that one: a
last line that is complete (with or without its newline), or malformed where it stands
(garbage, a bracket that closes nothing, an invalid escape), is as wrong as any other line,
and forgiving it would drop an op without a word. :func:`cut_short` tells the two apart.
"""

from __future__ import annotations

import json
import re

from floodmark.inputs.plain_values import MAX_DEPTH

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')  # a whole JSON string, escapes and all
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
# An escape the line's end cut: json names the escape, not the string, when a string ends in
# one (at its backslash or at its "u"; "\u" with all four digits too, when nothing follows).
_PARTIAL_ESCAPE = re.compile(r"\\?u[0-9a-fA-F]{0,4}|\\")
_UNICODE_ESCAPE_START = re.compile(r"u[0-9a-fA-F]{0,3}$")  # "u" (after a backslash) and fewer than four hex digits
# What a literal or number at the very end may be made of (sought from the end, with
# str.rstrip: a search anchored at the end would try every position of a long line).
_FRAGMENT_CHARS = "-+._0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_CLOSING = {"[": "]", "{": "}"}
_DUE = {"value": "0", "property": '"":0', "':'": ":0"}  # json's "Expecting <what>" -> what gives it


def cut_short(raw: bytes, max_depth: int = MAX_DEPTH) -> bool:
    """Whether ``raw`` is the beginning of a JSON text cut short (what a writer killed
    mid-line leaves), rather than a complete text or one malformed where it stands.

    It is when some ending completes it. The standard library's parser says where the text
    stops making sense; what follows must be the last token, cut: a string that never
    closes (perhaps inside an escape), a literal or a number, or nothing. The ending closes
    that token, gives a key or value still due and closes the brackets left open before
    it, and the whole must then parse. A text that parses as it is was not cut. Every step
    is a C loop (parsing, regular expressions, string methods), so a long line costs about
    what parsing it does; a text nested deeper than ``max_depth`` is not one a reader takes.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":
            return False
        text = raw[: e.start].decode("utf-8")  # a character cut in the middle of its bytes
    text = text.rstrip(" \t\r\n")
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        stopped, problem = e.pos, e.msg
    except (ValueError, RecursionError):
        return False  # a number too long to convert, or nesting without end: not a cut
    else:
        return False  # whole
    rest = text[stopped:]
    if problem.startswith("Unterminated string"):
        last, ending = stopped, _string_ending(rest)
    elif problem.startswith("Invalid \\u") or problem.startswith("Invalid \\escape"):
        if not _PARTIAL_ESCAPE.fullmatch(rest):
            return False
        last = _string_start(text, stopped)  # json stopped inside the string, at the escape
        ending = _string_ending(text[last:])
    elif rest.strip(_FRAGMENT_CHARS):
        return False  # something other than a cut token
    else:
        last, ending = stopped, _fragment_ending(text)
    closing = _closing(text[:last], max_depth)
    if closing is None:
        return False
    # What is still due (a value, a key and its value, ...): the likeliest first, as json said.
    dues = sorted(("", "0", ":0", '"":0'), key=lambda due: due != _DUE.get(problem.split(" ")[1], ""))
    return any(_parses(text + ending + due + closing) for due in dues)


def _closing(prefix: str, max_depth: int) -> str | None:
    """What closes the brackets a JSON text's ``prefix`` (whose strings all close) leaves
    open; None when it closes one it did not open, or nests deeper than ``max_depth``."""
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", prefix))
    for _ in range(max_depth + 1):
        paired = brackets.replace("[]", "").replace("{}", "")
        if paired == brackets:
            break
        brackets = paired
    if brackets.strip("[{") or len(brackets) > max_depth:
        return None
    return "".join(_CLOSING[b] for b in reversed(brackets))


def _string_start(text: str, inside: int) -> int:
    """Where the string holding position ``inside`` opens: the quote before it that no
    backslash escapes (outside strings JSON has no backslashes, so that is the opening one)."""
    quote = text.rfind('"', 0, inside)
    while quote > 0 and text[quote - 1] == "\\":
        quote = text.rfind('"', 0, quote - 1)
    return quote


def _string_ending(string: str) -> str:
    """What closes an unterminated string: its quote, after what an escape still lacks."""
    escape = _UNICODE_ESCAPE_START.search(string[-4:])
    if escape is not None:
        before = string[: len(string) - len(escape.group())]
        if (len(before) - len(before.rstrip("\\"))) % 2 == 1:
            return "0" * (5 - len(escape.group())) + '"'  # the \u escape's missing hex digits
    if (len(string) - len(string.rstrip("\\"))) % 2 == 1:
        return 'n"'  # a lone backslash: any escape completes it
    return '"'


def _fragment_ending(text: str) -> str:
    """What finishes a literal or a number cut at the end of ``text`` (nothing if none is)."""
    cut = text[len(text.rstrip(_FRAGMENT_CHARS)):]
    if not cut:
        return ""
    for literal in ("true", "false", "null"):
        if literal.startswith(cut):
            return literal[len(cut):]
    return "0" if cut[-1] in "-+.eE" else ""


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
