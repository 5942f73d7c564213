"""EDN, the data notation Jepsen and Knossos store histories in.

EDN is Clojure's data syntax: ``nil``, booleans, numbers, strings, characters, keywords
(``:ok``), symbols, lists ``( )``, vectors ``[ ]``, maps ``{ }``, sets ``#{ }``, tagged
literals (``#inst "..."``) and the discard form ``#_``. Commas are whitespace and ``;``
starts a comment.

This is a small reader of our own rather than a dependency, so that a malformed history
is reported with its file, line and what is wrong. Keywords, symbols and characters become
:class:`Keyword`, :class:`Symbol` and :class:`Char`, subclasses of ``str`` that compare equal
to the bare name (``Keyword("ok") == "ok"``), so converted histories read naturally in Python
while the writer, and :mod:`floodmark.checkers.values` (which compares values as EDN does),
can still tell a keyword from a string. Vectors and lists become lists, maps dicts, sets
frozensets; a map key or set member that is a collection is frozen (a vector to a tuple, a
map to a :class:`FrozenMap`).

Python's ``==`` merges values that EDN keeps apart (``1``, ``1.0`` and ``true``; ``:x`` and
``"x"``), so one dict or frozenset cannot hold two such keys: a map or set that has them is
refused with a message saying so, rather than misread as one with a key twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from floodmark.errors import SourceError


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
        if char in _CHAR_NAMES:
            return "\\" + _CHAR_NAMES[char]
        return "\\" + (f"u{ord(char):04X}" if len(char) == 1 and (char.isspace() or not char.isprintable()) else char)


class FrozenMap(frozenset):  # type: ignore[type-arg]
    """A map used as a map key or set member: its (key, value) pairs, hashable (a frozenset
    of pairs in Python's eyes; :mod:`floodmark.checkers.values` tells it from a set)."""

    __slots__ = ()


class EdnSet(list):  # type: ignore[type-arg]
    """A set in a history's values: its members as a list (so a history stays JSON-shaped),
    remembered to be a set, which a vector is not."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "#{" + " ".join(map(repr, self)) + "}"


@dataclass(frozen=True)
class Tagged:
    """A tagged literal we do not interpret, e.g. ``#inst "2014-01-01"``."""

    tag: str
    value: Any


class EdnError(SourceError):
    """Malformed EDN: names the source, the line (from 1) and the problem."""


# A string is matched by an unrolled loop (runs of plain characters between escapes) so the
# regex engine keeps no state per character: memory stays linear in the input.
_TOKEN = re.compile(
    r"""
    (?P<ws>[\s,]+)
  | (?P<comment>;[^\n]*)
  | (?P<string>"[^"\\]*(?:\\.[^"\\]*)*")
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
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
_STRING_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f"}
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r"}
_CHAR_NAMES = {v: k for k, v in _CHARS.items()}
_CLOSERS = {"[": "]", "(": ")", "{": "}", "#{": "}"}
MAX_DEPTH = 100  # collections, tags and discards open at once; Jepsen's histories use a few
MAX_DIGITS = 400  # a number longer than this is damage, not data
_COLL, _TAG, _DISCARD = 0, 1, 2


class _Frame:
    """Something open while its contents are read: a collection, a tag or a discard."""

    __slots__ = ("kind", "text", "line", "items")

    def __init__(self, kind: int, text: str, line: int) -> None:
        self.kind = kind
        self.text = text
        self.line = line
        self.items: list[Any] = []


class _Reader:
    """Reads forms with an explicit stack (no recursion), so nesting costs memory, not the
    Python stack, and is refused past :data:`MAX_DEPTH`."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.pos = 0
        self.line = 1

    def error(self, problem: str, line: int | None = None) -> EdnError:
        return EdnError(self.source, self.line if line is None else line, problem)

    def forms(self) -> Iterator[tuple[Any, int]]:
        """Every top-level form with the line it starts on."""
        text = self.text
        match = _TOKEN.match
        stack: list[_Frame] = []
        start_line = 1
        length = len(text)
        while self.pos < length:
            m = match(text, self.pos)
            if m is None:
                if text[self.pos] == '"':
                    raise self.error("string is never closed")
                raise self.error(f"unexpected character {text[self.pos]!r}")
            kind = m.lastgroup
            token = m.group()
            line = self.line
            self.pos = m.end()
            if kind == "ws" or kind == "comment" or kind == "string":
                self.line += token.count("\n")
                if kind != "string":
                    continue
            if not stack:
                start_line = line
            if kind == "open" or kind == "tag" or kind == "discard":
                if len(stack) >= MAX_DEPTH:
                    raise self.error(f"nested more than {MAX_DEPTH} levels deep", line)
                stack.append(_Frame(_COLL if kind == "open" else _TAG if kind == "tag" else _DISCARD, token, line))
                continue
            if kind == "close":
                if not stack:
                    raise self.error(f"unexpected {token!r} (no matching opening bracket)", line)
                frame = stack[-1]
                if frame.kind != _COLL:
                    what = "#_" if frame.kind == _DISCARD else frame.text
                    raise self.error(f"{what} on line {frame.line} is followed by {token!r}, not a form", line)
                if token != _CLOSERS[frame.text]:
                    raise self.error(f"expected {_CLOSERS[frame.text]!r} to close {frame.text!r} from line "
                                     f"{frame.line}, got {token!r}", line)
                stack.pop()
                value = self.collection(frame)
            elif kind == "string":
                value = self.read_string(token, line)
            elif kind == "char":
                value = self.read_char(token[1:], line)
            else:
                value = self.read_atom(token, line)
            # Deliver the value to what is open: tags wrap it, a discard swallows it.
            while stack:
                frame = stack[-1]
                if frame.kind == _COLL:
                    frame.items.append(value)
                    break
                stack.pop()
                if frame.kind == _DISCARD:
                    break
                value = Tagged(frame.text[1:], value)
            else:
                yield value, start_line
        if stack:
            frame = stack[-1]
            if frame.kind == _COLL:
                raise self.error(f"{frame.text!r} opened on line {frame.line} is never closed", frame.line)
            what = "#_" if frame.kind == _DISCARD else frame.text
            raise self.error(f"{what} on line {frame.line} has no form after it", frame.line)

    def collection(self, frame: _Frame) -> Any:
        items = frame.items
        if frame.text == "{":
            if len(items) % 2:
                raise self.error(f"map opened on line {frame.line} has an odd number of forms", frame.line)
            result: dict[Any, Any] = {}
            for i in range(0, len(items), 2):
                key = _hashable(items[i])
                if key in result:
                    raise self.collision("map", "key", frame.line, next(k for k in result if k == key), key)
                result[key] = items[i + 1]
            return result
        if frame.text == "#{":
            members = frozenset(_hashable(x) for x in items)
            if len(members) != len(items):
                seen: dict[Any, Any] = {}
                for member in map(_hashable, items):
                    if member in seen:
                        raise self.collision("set", "member", frame.line, seen[member], member)
                    seen[member] = member
            return members
        return items

    def collision(self, kind: str, what: str, line: int, first: Any, second: Any) -> EdnError:
        """A map key or set member given twice, or two that only Python takes for one."""
        if _same(first, second):
            return self.error(f"{kind} opened on line {line} has the {what} {_shown(second)} twice", line)
        return self.error(f"{kind} opened on line {line} has the {what}s {_shown(first)} and {_shown(second)}, "
                          f"distinct in EDN but one to Python: floodmark cannot hold them apart in one {kind}",
                          line)

    def read_char(self, name: str, line: int) -> str:
        if name in _CHARS:
            return Char(_CHARS[name])
        if len(name) == 5 and name.startswith("u"):
            return Char(self.unicode(chr(int(name[1:], 16)), line))
        return Char(name)

    def read_string(self, text: str, line: int) -> str:
        body = text[1:-1]
        if "\\" not in body:
            return body

        def unescape(m: re.Match[str]) -> str:
            if m.group(1) is not None:
                return chr(int(m.group(1), 16))
            escaped = m.group(2)
            if escaped not in _STRING_ESCAPES:
                raise self.error(f"unknown string escape \\{escaped}", line)
            return _STRING_ESCAPES[escaped]

        value = _ESCAPE.sub(unescape, body)
        if "\\u" in body:
            # \uD83D\uDE00 is one character written as a pair; a half pair is not text.
            try:
                value = value.encode("utf-16", "surrogatepass").decode("utf-16")
            except UnicodeDecodeError:
                raise self.error("string with a lone surrogate (\\uD800-\\uDFFF), not Unicode text", line) from None
        return value

    def unicode(self, char: str, line: int) -> str:
        if "\ud800" <= char <= "\udfff":
            raise self.error(f"character \\u{ord(char):04X} is a lone surrogate, not Unicode text", line)
        return char

    def read_atom(self, text: str, line: int) -> Any:
        if text == "nil":
            return None
        if text == "true":
            return True
        if text == "false":
            return False
        if text[0] == ":":
            if len(text) == 1:
                raise self.error("empty keyword ':'", line)
            return Keyword(text[1:])
        first = text[0]
        if first.isdigit() or (first in "+-" and len(text) > 1 and text[1].isdigit()):
            return self.read_number(text, line)
        return Symbol(text)

    def read_number(self, text: str, line: int) -> Any:
        if len(text) > MAX_DIGITS:
            raise self.error(f"number of {len(text)} characters (at most {MAX_DIGITS})", line)
        if _INT.match(text):
            return int(text.rstrip("N"))
        if _FLOAT.match(text):
            value = float(text.rstrip("M"))
            if value in (float("inf"), float("-inf")):
                raise self.error(f"number {text[:40]!r} is out of range", line)
            return value
        if _RATIO.match(text):
            numerator, denominator = text.split("/")
            try:
                return int(numerator) / int(denominator)
            except ZeroDivisionError:
                raise self.error(f"ratio {text[:40]!r} divides by zero", line) from None
            except OverflowError:
                raise self.error(f"ratio {text[:40]!r} is out of range", line) from None
        raise self.error(f"malformed number {text[:40]!r}", line)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _shown(value: Any) -> str:
    """A value as EDN, cut short for a message."""
    text = dumps(value, keyword_keys=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _hashable(value: Any) -> Any:
    """Map keys and set members must hash: freeze vectors, maps and tagged values (the
    reader bounds their depth, so this recursion is bounded too)."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return FrozenMap((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, Tagged):
        return Tagged(value.tag, _hashable(value.value))
    return value


def _same(a: Any, b: Any) -> bool:
    """Whether two hashable forms that Python finds equal are the same EDN value (not 1 and
    true, :x and "x", a set and a map of pairs)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return all(map(_same, a, b))
    if isinstance(a, frozenset):  # (members Python finds equal, paired up)
        return all(any(m == n and _same(m, n) for n in b) for m in a)
    if isinstance(a, Tagged):
        return a.tag == b.tag and _same(a.value, b.value)
    return True


def iter_forms(text: str, source: str = "<edn>") -> Iterator[tuple[Any, int]]:
    """Read every top-level form, yielding (form, line where it starts)."""
    return _Reader(text, source).forms()


def loads(text: str, source: str = "<edn>") -> Any:
    """Read exactly one EDN form."""
    forms = list(iter_forms(text, source))
    if len(forms) != 1:
        raise EdnError(source, forms[1][1] if len(forms) > 1 else 1,
                       f"expected exactly one form, found {len(forms)}")
    return forms[0][0]


# ---------------------------------------------------------------------------------- writer

def dumps(value: Any, *, keyword_keys: bool = True) -> str:
    """Write a Python value as EDN. With ``keyword_keys``, plain ``str`` keys of maps become
    keywords (Jepsen's maps are keyword-keyed; a JSON history's object keys are strings);
    without it a ``str`` stays a string wherever it is, and only a :class:`Keyword` is a
    keyword (a history read from EDN, written back as it was)."""
    out: list[str] = []
    _write(value, out, keyword_keys)
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


def _write(value: Any, out: list[str], keyword_keys: bool) -> None:
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
