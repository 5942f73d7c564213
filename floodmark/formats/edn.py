"""EDN, the data notation Jepsen and Knossos store histories in.

EDN is Clojure's data syntax: ``nil``, booleans, numbers, strings, characters, keywords
(``:ok``), symbols, lists ``( )``, vectors ``[ ]``, maps ``{ }``, sets ``#{ }``, tagged
literals (``#inst "..."``) and the discard form ``#_``. Commas are whitespace and ``;``
starts a comment.

This is a small reader of our own rather than a dependency, so that a malformed history
is reported with its file, line and what is wrong. Keywords and symbols become
:class:`Keyword` and :class:`Symbol`, subclasses of ``str`` that compare equal to the bare
name (``Keyword("ok") == "ok"``), so converted histories read naturally in Python while the
writer can still tell a keyword from a string. Vectors and lists become lists, maps dicts
(unhashable keys are frozen to tuples), sets frozensets.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


class Keyword(str):
    """An EDN keyword, e.g. ``:invoke``; its ``str`` value is the name without the colon."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f":{str.__str__(self)}"


class Symbol(str):
    """An EDN symbol other than nil/true/false."""

    __slots__ = ()


@dataclass(frozen=True)
class Tagged:
    """A tagged literal we do not interpret, e.g. ``#inst "2014-01-01"``."""

    tag: str
    value: Any


class EdnError(ValueError):
    """Malformed EDN: names the source, the line and the problem."""

    def __init__(self, source: str, line: int, problem: str) -> None:
        super().__init__(f"{source}:{line}: {problem}")
        self.source = source
        self.line = line
        self.problem = problem


_TOKEN = re.compile(
    r"""
    (?P<ws>[\s,]+)
  | (?P<comment>;[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<open>\#\{|[\[({])
  | (?P<close>[\])}])
  | (?P<discard>\#_)
  | (?P<tag>\#[A-Za-z][^\s,\[\](){}"]*)
  | (?P<char>\\(?:newline|space|tab|return|u[0-9a-fA-F]{4}|\S))
  | (?P<atom>[^\s,\[\](){}";]+)
    """,
    re.VERBOSE | re.DOTALL,
)
_INT = re.compile(r"[+-]?\d+N?$")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_RATIO = re.compile(r"[+-]?\d+/\d+$")
_STRING_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f"}
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r"}
_CLOSERS = {"[": "]", "(": ")", "{": "}", "#{": "}"}


class _Reader:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.pos = 0
        self.line = 1

    def error(self, problem: str, line: int | None = None) -> EdnError:
        return EdnError(self.source, self.line if line is None else line, problem)

    def next_token(self) -> tuple[str, str, int] | None:
        """The next meaningful token as (kind, text, line), or None at the end."""
        text = self.text
        while self.pos < len(text):
            m = _TOKEN.match(text, self.pos)
            if m is None:
                if text[self.pos] == '"':
                    raise self.error("string is never closed")
                raise self.error(f"unexpected character {text[self.pos]!r}")
            kind = m.lastgroup or ""
            token = m.group()
            line = self.line
            self.pos = m.end()
            self.line += token.count("\n")
            if kind in ("ws", "comment"):
                continue
            return kind, token, line
        return None

    def read_form(self, token: tuple[str, str, int] | None) -> Any:
        if token is None:
            raise self.error("unexpected end of input")
        kind, text, line = token
        if kind == "open":
            return self.read_collection(text, line)
        if kind == "close":
            raise self.error(f"unexpected {text!r} (no matching opening bracket)", line)
        if kind == "discard":
            self.read_form(self.next_token())
            return self.read_form(self.next_token())
        if kind == "tag":
            value = self.read_form(self.next_token())
            return Tagged(text[1:], value)
        if kind == "string":
            return self.read_string(text, line)
        if kind == "char":
            name = text[1:]
            if name in _CHARS:
                return _CHARS[name]
            if len(name) == 5 and name.startswith("u"):
                return chr(int(name[1:], 16))
            return name
        return self.read_atom(text, line)

    def read_collection(self, opener: str, line: int) -> Any:
        closer = _CLOSERS[opener]
        items: list[Any] = []
        while True:
            token = self.next_token()
            if token is None:
                raise self.error(f"{opener!r} opened on line {line} is never closed", line)
            if token[0] == "close":
                if token[1] != closer:
                    raise self.error(
                        f"expected {closer!r} to close {opener!r} from line {line}, got {token[1]!r}",
                        token[2],
                    )
                break
            items.append(self.read_form(token))
        if opener == "{":
            if len(items) % 2:
                raise self.error(f"map opened on line {line} has an odd number of forms", line)
            return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
        if opener == "#{":
            return frozenset(_hashable(x) for x in items)
        return items

    def read_string(self, text: str, line: int) -> str:
        body = text[1:-1]
        if "\\" not in body:
            return body
        out: list[str] = []
        i = 0
        while i < len(body):
            c = body[i]
            if c != "\\":
                out.append(c)
                i += 1
                continue
            nxt = body[i + 1]
            if nxt in _STRING_ESCAPES:
                out.append(_STRING_ESCAPES[nxt])
                i += 2
            elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[i + 2 : i + 6]):
                out.append(chr(int(body[i + 2 : i + 6], 16)))
                i += 6
            else:
                raise self.error(f"unknown string escape \\{nxt}", line)
        return "".join(out)

    def read_atom(self, text: str, line: int) -> Any:
        if text == "nil":
            return None
        if text == "true":
            return True
        if text == "false":
            return False
        if text.startswith(":"):
            if len(text) == 1:
                raise self.error("empty keyword ':'", line)
            return Keyword(text[1:])
        first = text[0]
        if first.isdigit() or (first in "+-" and len(text) > 1 and text[1].isdigit()):
            if _INT.match(text):
                return int(text.rstrip("N"))
            if _FLOAT.match(text):
                return float(text.rstrip("M"))
            if _RATIO.match(text):
                numerator, denominator = text.split("/")
                return int(numerator) / int(denominator)
            raise self.error(f"malformed number {text!r}", line)
        return Symbol(text)


def _hashable(value: Any) -> Any:
    """Map keys and set members must hash: freeze vectors and maps."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted(((repr(k), _hashable(v)) for k, v in value.items())))
    return value


def iter_forms(text: str, source: str = "<edn>") -> Iterator[tuple[Any, int]]:
    """Read every top-level form, yielding (form, line where it starts)."""
    reader = _Reader(text, source)
    while True:
        token = reader.next_token()
        if token is None:
            return
        if token[0] == "discard":
            reader.read_form(reader.next_token())
            continue
        yield reader.read_form(token), token[2]


def loads(text: str, source: str = "<edn>") -> Any:
    """Read exactly one EDN form."""
    forms = list(iter_forms(text, source))
    if len(forms) != 1:
        raise EdnError(source, forms[1][1] if len(forms) > 1 else 1,
                       f"expected exactly one form, found {len(forms)}")
    return forms[0][0]


# ---------------------------------------------------------------------------------- writer

def dumps(value: Any) -> str:
    """Write a Python value as EDN. ``str`` keys of dicts become keywords (Jepsen's maps
    are keyword-keyed); other strings stay strings unless they are :class:`Keyword`."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


_SAFE_KEYWORD = re.compile(r"[A-Za-z*+!_?<>=-][A-Za-z0-9*+!_?<>=./-]*$")


def keyword(name: str) -> str:
    """``name`` as an EDN keyword, or as a string if it cannot be one."""
    return f":{name}" if _SAFE_KEYWORD.match(name) else _string(name)


def _string(s: str) -> str:
    escaped = (
        s.replace("\\", "\\\\").replace('"', '\\"')
        .replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    )
    return '"' + escaped + '"'


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("nil")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, Keyword):
        out.append(keyword(str.__str__(value)))
    elif isinstance(value, Symbol):
        out.append(str.__str__(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int | float):
        out.append(repr(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(", ")
            if isinstance(k, str) and not isinstance(k, Keyword | Symbol):
                out.append(keyword(k))
            else:
                _write(k, out)
            out.append(" ")
            _write(v, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(" ")
            _write(v, out)
        out.append("]")
    elif isinstance(value, set | frozenset):
        out.append("#{")
        out.append(" ".join(dumps(v) for v in sorted(value, key=repr)))
        out.append("}")
    elif isinstance(value, Tagged):
        out.append(f"#{value.tag} ")
        _write(value.value, out)
    else:
        raise TypeError(f"cannot write {type(value).__name__} as EDN")
