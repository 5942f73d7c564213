"""EDN values as Python holds them, and how they are written back as EDN.

:mod:`floodmark.formats.edn` reads EDN into these, and :func:`dumps` writes them (and the
JSON-shaped values of our own histories) as EDN, so that a history can be fed to Jepsen's
tools. Keywords, symbols and characters are subclasses of ``str`` that compare equal to the
bare name (``Keyword("ok") == "ok"``), so converted histories read naturally in Python, while
the writer and :mod:`floodmark.checkers.linearizability.values` can still tell a keyword
from a string. They live apart from the reader so that each module stays one concern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from floodmark.formats.edn_tokens import JAVA_SPACE

# Characters EDN writes by name (and the reader reads by it), name -> character.
CHAR_NAMES = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "formfeed": "\f", "backspace": "\b"}
_NAME_OF_CHAR = {v: k for k, v in CHAR_NAMES.items()}


class Keyword(str):
    """An EDN keyword, e.g. ``:invoke``; its ``str`` value is the name without the colon."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f":{str.__str__(self)}"


class Symbol(str):
    """An EDN symbol other than nil/true/false."""

    __slots__ = ()


class Char(str):
    """An EDN character, e.g. ``\\a``: in EDN a character is not the one-letter string."""

    __slots__ = ()

    def __repr__(self) -> str:
        """The character as EDN writes it: ``\\a``, ``\\newline``, ``\\u000B``."""
        char = str.__str__(self)
        if char in _NAME_OF_CHAR:
            return "\\" + _NAME_OF_CHAR[char]
        # (\\uXXXX has four digits: a character past U+FFFF is written as itself)
        return "\\" + (f"u{ord(char):04X}" if len(char) == 1 and ord(char) <= 0xFFFF
                        and (char.isspace() or not char.isprintable()) else char)


class FrozenMap(frozenset):  # type: ignore[type-arg]
    """A map used as a map key or set member: its (key, value) pairs, hashable (a frozenset
    of pairs in Python's eyes; :mod:`floodmark.checkers.linearizability.values` tells it from a set)."""

    __slots__ = ()


class EdnSet(list):  # type: ignore[type-arg]
    """A set in a history's values: its members as a list (so a history stays JSON-shaped),
    remembered to be a set, which a vector is not."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "#{" + " ".join(map(repr, self)) + "}"


@dataclass(frozen=True)
class Tagged:
    """A tagged literal, e.g. ``#jepsen.history.Op {...}``: its tag and the value it tags (for
    ``#inst`` and ``#uuid``, the one spelling of the value: :mod:`floodmark.formats.edn_instants`)."""

    tag: str
    value: Any

def dumps(value: Any, *, keyword_keys: bool = True) -> str:
    """Write a Python value as EDN. With ``keyword_keys``, plain ``str`` keys of maps become
    keywords (Jepsen's maps are keyword-keyed; a JSON history's object keys are strings);
    without it a ``str`` stays a string wherever it is, and only a :class:`Keyword` is a
    keyword (a history read from EDN, written back as it was)."""
    out: list[str] = []
    _write(value, out, keyword_keys)
    return "".join(out)


_SAFE_KEYWORD = re.compile(r"[A-Za-z*+!_?<>=-][A-Za-z0-9*+!_?<>=./-]*$")
_KEYWORD_NAME = re.compile(f'[^{JAVA_SPACE},\\[\\](){{}}";^]+')  # what the reader reads as one atom


def keyword(name: str) -> str:
    """``name`` as an EDN keyword, or as a string if it cannot be one."""
    return f":{name}" if _SAFE_KEYWORD.match(name) else _string(name)


def _string(s: str) -> str:
    escaped = (
        s.replace("\\", "\\\\").replace('"', '\\"')
        .replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    )
    if _CONTROL.search(escaped):
        # Every other control character as \uXXXX: written raw, a NUL made the file one that
        # readers (floodmark's own among them) take for binary data.
        escaped = _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04X}", escaped)
    return '"' + escaped + '"'


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _write(value: Any, out: list[str], keyword_keys: bool) -> None:
    if value is None:
        out.append("nil")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, Keyword):
        name = str.__str__(value)  # (any name the reader reads as one keyword stays one: :a:b, :é)
        out.append(f":{name}" if _KEYWORD_NAME.fullmatch(name) else keyword(name))
    elif isinstance(value, Symbol):
        out.append(str.__str__(value))
    elif isinstance(value, Char):
        out.append(repr(value) if len(value) == 1 else _string(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int | float):
        out.append(repr(value))
    elif isinstance(value, dict | FrozenMap):  # (a FrozenMap is a frozenset: before sets)
        out.append("{")
        for i, (k, v) in enumerate(value.items() if isinstance(value, dict) else value):
            if i:
                out.append(", ")
            if keyword_keys and type(k) is str:
                out.append(keyword(k))
            else:
                _write(k, out, keyword_keys)
            out.append(" ")
            _write(v, out, keyword_keys)
        out.append("}")
    elif isinstance(value, set | frozenset | EdnSet):  # (an EdnSet is a list: before vectors)
        out.append("#{")
        out.append(" ".join(dumps(v, keyword_keys=keyword_keys) for v in sorted(value, key=repr)))
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(" ")
            _write(v, out, keyword_keys)
        out.append("]")
    elif isinstance(value, Tagged):
        out.append(f"#{value.tag} ")
        _write(value.value, out, keyword_keys)
    else:
        raise TypeError(f"cannot write {type(value).__name__} as EDN")
