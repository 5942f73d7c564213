"""Duplicate keys: a JSON object that names one key twice, found cheaply after parsing.

JSON's grammar lets an object name a key twice, and every parser floodmark uses (orjson, the
standard library) keeps the last one without a word: ``{"type": "fail", "type": "ok"}``
reads as an ``ok``. An op or a node event written so is damaged or forged, and which of the
two was meant cannot be told, so readers refuse it, naming the key (:func:`duplicate_key`).

Parsing again with a hook on every object would cost a history reader several times its
parsing; instead each parsed value is screened by counting colons. Every key of the text
is followed by a colon, so a text holds at least as many colons as keys, and a value parsed
from it holds fewer keys than the text names exactly when some object names one twice.
Three steps, each run only when the one before cannot decide:

1. the colons of the text against a lower bound of the value's keys, those of some of its
   objects: equal, and no key can be missing. For a line of a history or an event file
   (:func:`keys_unaccounted`, the readers' hot path) the line's object and those of its
   ``"value"``; else the objects of the value's top two levels. An op or an event whose
   strings hold no colon is decided here;
2. the colons of the text (and its ``\\u003a`` escapes) against those of the value written
   back as JSON, which has one colon per key it holds plus those its strings hold: equal,
   and no key is missing (a string's colons are in both; every key dropped takes one);
3. the text parsed again with the standard library, every object's keys compared, which
   names the key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

_ESCAPED_COLONS = (b"\\u003a", b"\\u003A")


def keys_unaccounted(raw: bytes, value: Any) -> bool:
    """Whether step 1 cannot decide for a line of a history or an event file: True unless the
    text has as many colons as ``value`` (an object) and the objects of its ``"value"`` (one,
    or a list of them: an op's) have keys. Then :func:`duplicate_key` decides."""
    if type(value) is not dict:
        return type(value) is list
    unaccounted = raw.count(b":") - len(value)
    if unaccounted:
        inner = value.get("value")
        if type(inner) is dict:
            unaccounted -= len(inner)
        elif type(inner) is list:
            for item in inner:
                if type(item) is dict:
                    unaccounted -= len(item)
    return unaccounted != 0


def duplicate_key(raw: bytes | str, value: Any) -> str | None:
    """What is wrong with ``raw`` if some object of it names a key twice ("the key 'x' twice
    in one object"), else None; ``value`` is ``raw`` as parsed (which kept the last)."""
    if not isinstance(value, dict | list):
        return None
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    colons = data.count(b":")
    if colons == keys_near_top(value):
        return None
    if b"\\u" in data:
        colons += sum(data.count(escape) for escape in _ESCAPED_COLONS)
    written = _written(value)
    if written is not None and written.count(b":") == colons:
        return None
    return _exact(data)


def keys_near_top(value: Any) -> int:
    """How many keys the objects of ``value``'s top two levels hold (at most all it holds)."""
    inner: Iterable[Any]
    if type(value) is dict:
        keys, inner = len(value), value.values()
    elif type(value) is list:
        keys, inner = 0, value
    else:
        return 0
    for item in inner:
        kind = type(item)
        if kind is dict:
            keys += len(item)
        elif kind is list:
            for element in item:
                if type(element) is dict:
                    keys += len(element)
    return keys


_dumps: list[Callable[[Any], bytes]] = []  # orjson's, once a screen first needs it (not at import)


def _written(value: Any) -> bytes | None:
    """``value`` as JSON, one colon per key and those its strings hold; None if it cannot be."""
    if not _dumps:
        try:
            import orjson
        except ImportError:  # pragma: no cover - a node without orjson: the standard library writes
            _dumps.append(lambda v: _standard(v) or b"")
        else:
            _dumps.append(orjson.dumps)
    try:
        return _dumps[0](value)
    except TypeError:  # an integer beyond 64 bits: the standard library writes it
        return _standard(value)


def _standard(value: Any) -> bytes | None:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, RecursionError):
        return None


class _Twice(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Twice(key)
            seen.add(key)
    return found


def _exact(data: bytes) -> str | None:
    try:
        json.loads(data, object_pairs_hook=_pairs)
    except _Twice as twice:
        return f"the key {_shown(twice.key)} twice in one object (which one was meant cannot be told)"
    except (ValueError, RecursionError):  # (the text parsed once already: a reader's own limits)
        return None
    return None


def _shown(key: str) -> str:
    text = repr(key)
    return text if len(text) <= 60 else text[:57] + "..."
