"""Values from outside: what a parsed JSON or EDN value must be before floodmark holds it.

A parser accepts more than the rest of the program can carry. JSON allows nesting as deep as
the text goes, and every part that walks a value (freezing it for the checker's cache,
writing it back as JSON or EDN, rendering it in a report) recurses, so a value nested a few
thousand deep would end in ``RecursionError`` far from the file that caused it. Python's
``json`` reads ``NaN`` and ``Infinity``, which then compare unequal to themselves; ``"\\ud800"``
decodes to a lone surrogate that no UTF-8 writer can write back; and an integer can be as
long as the text. So every value read from a user's file is checked once, where the file and
line are known: nested at most :data:`MAX_DEPTH` deep, numbers finite, text encodable,
integers of at most :data:`MAX_INT_DIGITS` digits, and no object naming a key twice (which
parsers read as its last, silently: :mod:`floodmark.inputs.duplicate_keys`). The walk is
iterative, so checking a hostile value cannot itself overflow the stack.
"""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from floodmark.inputs.duplicate_keys import duplicate_key, keys_unaccounted

MAX_DEPTH = 100  # Jepsen's and our own histories nest values a few levels deep
MAX_INT_DIGITS = 400  # a 64-bit id has 20; beyond this a number is damage, not data
_MAX_INT = 10**MAX_INT_DIGITS


def value_problem(value: Any, max_depth: int = MAX_DEPTH, max_int_digits: int = MAX_INT_DIGITS) -> str | None:
    """What is wrong with a parsed value, or None when it is fit to hold."""
    if value is None or value is True or value is False:
        return None
    if max_int_digits != MAX_INT_DIGITS:
        return _walk(value, max_depth, 10**max_int_digits, max_int_digits)
    return _walk(value, max_depth, _MAX_INT, MAX_INT_DIGITS)


def nesting_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Only the depth check of :func:`value_problem`, for a value whose scalars are known to
    be fine (orjson parsed it): it visits containers level by level and never a scalar."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 1
    while level:
        if depth > max_depth:
            return f"nested more than {max_depth} levels deep"
        deeper: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            deeper += [child for child in children if isinstance(child, dict | list)]
        level = deeper
        depth += 1
    return None


def _walk(value: Any, max_depth: int, max_int: int, digits: int) -> str | None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple | frozenset | set):
            children = item
        else:
            problem = _scalar_problem(item, max_int, digits)
            if problem:
                return problem
            continue
        if depth > max_depth:
            return f"nested more than {max_depth} levels deep"
        for child in children:
            if isinstance(child, dict | list | tuple | frozenset | set):
                stack.append((child, depth + 1))
            else:
                problem = _scalar_problem(child, max_int, digits)
                if problem:
                    return problem
    return None


def _scalar_problem(item: Any, max_int: int = _MAX_INT, digits: int = MAX_INT_DIGITS) -> str | None:
    if isinstance(item, str):
        return None if item.isascii() else _text_problem(item)
    if isinstance(item, bool) or item is None:
        return None
    if isinstance(item, int):
        return None if -max_int < item < max_int else f"an integer of more than {digits} digits"
    if isinstance(item, float):
        return None if math.isfinite(item) else f"{item!r} is not a finite number"
    return None


def _text_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "text with a lone surrogate (not Unicode)"
    return None


def json_decode_problem(raw: bytes | str, error: json.JSONDecodeError) -> str:
    """What is wrong with malformed JSON and where: "<problem> at column C", or "at line L
    column C" in a text of several lines. A JSON line's newline is not part of its value, so
    the problem is the one of the text without its trailing whitespace: a value cut short is
    faulted where it ends, not at the start of the empty line after it, and a string cut short
    is unterminated, not holding a newline."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    stripped = text.rstrip(" \t\r\n")  # JSON's whitespace only: the diagnosis stays the same
    if len(stripped) < len(text):
        try:
            json.loads(stripped)
        except json.JSONDecodeError as within:
            error = within
        except (RecursionError, ValueError):
            pass
    where = f"column {error.colno}" if error.lineno == 1 else f"line {error.lineno} column {error.colno}"
    # Some of json's problems end in "at" ("Unterminated string starting at").
    return f"{error.msg} {where}" if error.msg.endswith(" at") else f"{error.msg} at {where}"


def parse_json(raw: bytes | str, max_depth: int = MAX_DEPTH, max_int_digits: int = MAX_INT_DIGITS) -> Any:
    """One JSON text as a value fit to hold; raises ValueError with the problem in words.

    orjson (through :mod:`floodmark.inputs.fast_json`) already refuses NaN, infinities and lone
    surrogates, so a value it parsed is walked only when it may nest deeper than allowed.
    """
    from floodmark.inputs.fast_json import parse  # orjson loads in 10 ms: only for readers of JSON

    try:
        value, strict = parse(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({json_decode_problem(raw, e)})") from None
    except UnicodeDecodeError as e:  # where, in a text of lines (a file edited by hand); a
        # line of JSON lines is named by its reader
        line = e.object[: e.start].count(b"\n") + 1
        where = f"line {line}: " if b"\n" in e.object.rstrip(b"\r\n") else ""
        raise ValueError(f"not UTF-8 text ({where}byte 0x{e.object[e.start]:02x})") from None
    except RecursionError:
        raise ValueError(f"nested more than {max_depth} levels deep") from None
    except ValueError:  # an integer literal past Python's conversion limit (4,300 digits):
        # named as a shorter one past ours is, not in Python's words (which advise calling
        # sys.set_int_max_str_digits)
        limit = min(max_int_digits, sys.get_int_max_str_digits() or max_int_digits)
        raise ValueError(f"an integer of more than {limit} digits") from None
    if strict and isinstance(value, int | float | str | bool) or value is None:
        return value
    if not strict or _brackets(raw) > max_depth:
        problem = value_problem(value, max_depth, max_int_digits)
        if problem:
            raise ValueError(problem)
    twice = duplicate_key(raw, value)
    if twice is not None:
        raise ValueError(twice)
    return value


def json_lines_parser(text: bytes | BinaryIO, max_depth: int = MAX_DEPTH) -> Callable[[bytes], Any]:
    """:func:`parse_json` for the lines of ``text`` (bytes, or a stream it reads through
    and rewinds), cheaper per line: whether orjson may read them (no integer literal too
    long for it) is decided once for the whole text, and a line orjson refuses goes to
    :func:`parse_json`, which reads it or names the problem exactly as for a line on its
    own. A history or an event file has tens of thousands."""
    from floodmark.inputs.fast_json import orjson, stream_fits_orjson

    stream = io.BytesIO(text) if isinstance(text, bytes) else text
    if orjson is None or not stream_fits_orjson(stream):
        return lambda raw: parse_json(raw, max_depth)
    loads, refused = orjson.loads, orjson.JSONDecodeError

    def parse_line(raw: bytes) -> Any:
        try:
            value = loads(raw)
        except refused:
            return parse_json(raw, max_depth)
        kind = type(value)
        if kind is dict or kind is list:
            if raw.count(b"[") + raw.count(b"{") > max_depth:
                problem = value_problem(value, max_depth)
                if problem:
                    raise ValueError(problem)
            if keys_unaccounted(raw, value):  # (the screen's first step, for a line of a history)
                twice = duplicate_key(raw, value)
                if twice is not None:
                    raise ValueError(twice)
        return value

    return parse_line


def _brackets(raw: bytes | str) -> int:
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{")
    return raw.count(b"[") + raw.count(b"{")

