"""EDN, the data notation Jepsen and Knossos store histories in.

EDN is Clojure's data syntax: ``nil``, booleans, numbers, strings, characters, keywords
(``:ok``), symbols, lists ``( )``, vectors ``[ ]``, maps ``{ }``, sets ``#{ }``, tagged
literals (``#inst "..."``) and the discard form ``#_``. Commas are whitespace and ``;``
starts a comment.

This is a small reader of our own rather than a dependency, so that a malformed history
is reported with its file, line and what is wrong. Keywords, symbols and characters become
:class:`Keyword`, :class:`Symbol` and :class:`Char`, subclasses of ``str`` that compare equal
to the bare name (``Keyword("ok") == "ok"``), so converted histories read naturally in Python
while the writer, and :mod:`floodmark.checkers.linearizability.values` (which compares values as EDN does),
can still tell a keyword from a string. Vectors and lists become lists, maps dicts, sets
frozensets; a map key or set member that is a collection is frozen (a vector to a tuple, a
map to a :class:`FrozenMap`).

Python's ``==`` merges values that EDN keeps apart (``1``, ``1.0`` and ``true``; ``:x`` and
``"x"``), so one dict or frozenset cannot hold two such keys: a map or set that has them is
refused with a message saying so, rather than misread as one with a key twice.

A history is megabytes of the same few keywords around distinct numbers, so reading is
built for that: the text is split into tokens a line at a time
(:mod:`floodmark.formats.edn_tokens`, mostly by ``str.split`` in C), and each distinct
keyword, symbol and short string is made once and shared by every place it occurs (they are
immutable), which saves both the making and the memory of a hundred thousand ``:process``
keys. What is refused is refused alike: nesting past :data:`MAX_DEPTH`, numbers past
:data:`MAX_DIGITS`, bad escapes, lone surrogates, duplicate keys and members.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from floodmark.errors import SourceError
from floodmark.formats.edn_tokens import tokens_by_line


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
    """A tagged literal we do not interpret, e.g. ``#inst "2014-01-01"``."""

    tag: str
    value: Any


class EdnError(SourceError):
    """Malformed EDN: names the source, the line (from 1) and the problem."""


_INT = re.compile(r"[+-]?\d+N?$")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_RATIO = re.compile(r"[+-]?\d+/\d+$")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
_STRING_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f"}
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r"}
_CHAR_NAMES = {v: k for k, v in _CHARS.items()}
_CLOSERS = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_NOT_ATOMS = frozenset('[](){}#"\\')  # first characters of the tokens that are not atoms
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")  # a tag starts with one
MAX_DEPTH = 100  # collections, tags and discards open at once; Jepsen's histories use a few
MAX_DIGITS = 400  # a number longer than this is damage, not data
# Distinct keywords, symbols and short strings remembered, so that a history's thousands of
# ':process' read as one shared (immutable) object: read once, stored once. Bounded, so a
# file of a million distinct keywords costs no more than reading them.
_MAX_REMEMBERED = 1 << 16
_MAX_REMEMBERED_STRING = 64
_MISSING: Any = object()
_DISCARDED: Any = object()


class _Reader:
    """Reads forms with an explicit stack (no recursion), so nesting costs memory, not the
    Python stack, and is refused past :data:`MAX_DEPTH`."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.remembered: dict[str, Any] = {"nil": None, "true": True, "false": False}

    def error(self, problem: str, line: int) -> EdnError:
        return EdnError(self.source, line, problem)

    def forms(self) -> Iterator[tuple[Any, int]]:
        """Every top-level form with the line it starts on."""
        recall = self.remembered.get
        not_atoms = _NOT_ATOMS
        # The collections enclosing the one being read: (the enclosing one's items, the
        # opening token, its line); ``items`` are the innermost open collection's.
        stack: list[tuple[list[Any], str, int]] = []
        items: list[Any] = []
        toplevel = items  # a form read while this is innermost is a top-level form
        append = items.append
        # Tags and discards waiting for their form: (collections open when it came, the
        # token, its line); a tag's form is wrapped, a discard's dropped.
        pending: list[tuple[int, str, int]] = []
        top = 0  # the line the top-level form being read starts on, once it has an opening token
        for line, tokens in tokens_by_line(self.text):
            for token in tokens:
                first = token[0]
                if first not in not_atoms:
                    value = recall(token, _MISSING)
                    if value is _MISSING:
                        if len(token) <= MAX_DIGITS and token.isdigit() and token.isascii():
                            value = int(token)  # the commonest number, without the patterns of number()
                        else:
                            value = self.atom(token, line)
                elif first in "{[(" or token == "#{":
                    if len(stack) + len(pending) >= MAX_DEPTH:
                        raise self.error(f"nested more than {MAX_DEPTH} levels deep", line)
                    if not top and not stack:
                        top = line
                    stack.append((items, token, line))
                    items = []
                    append = items.append
                    continue
                elif first in "}])":
                    if pending and pending[-1][0] == len(stack):
                        raise self.dangling(pending[-1], f"is followed by {token!r}, not a form", line)
                    if not stack:
                        raise self.error(f"unexpected {token!r} (no matching opening bracket)", line)
                    enclosing, opener, opened = stack.pop()
                    if _CLOSERS[opener] != token:
                        raise self.error(f"expected {_CLOSERS[opener]!r} to close {opener!r} from line "
                                         f"{opened}, got {token!r}", line)
                    if opener == "{":
                        value = self.mapping(items, opened)
                    elif opener == "#{":
                        value = self.members(items, opened)
                    else:
                        value = items
                    items = enclosing
                    append = items.append
                elif first == '"':
                    value = recall(token, _MISSING)
                    if value is _MISSING:
                        value = self.string(token, line)
                elif token == "#_" or (first == "#" and token[1:2] in _LETTERS):
                    # A discard or a tag: it applies to the next form.
                    if len(stack) + len(pending) >= MAX_DEPTH:
                        raise self.error(f"nested more than {MAX_DEPTH} levels deep", line)
                    if not top and not stack:
                        top = line
                    pending.append((len(stack), token, line))
                    continue
                elif first == "\\" and len(token) > 1:
                    value = self.char(token[1:], line)
                else:  # an atom that starts like something else: ##Inf, a backslash alone
                    value = self.atom(token, line)
                if pending and pending[-1][0] == len(stack):
                    value = self.unwrap(value, pending)
                    if value is _DISCARDED:
                        if not stack and not pending:
                            top = 0  # the discarded form was all there was
                        continue
                if items is not toplevel:
                    append(value)
                    continue
                yield value, top or line
                top = 0
        if pending and pending[-1][0] == len(stack):
            raise self.dangling(pending[-1], "has no form after it", pending[-1][2])
        if stack:
            opener, opened = stack[-1][1], stack[-1][2]
            raise self.error(f"{opener!r} opened on line {opened} is never closed", opened)

    def unwrap(self, value: Any, pending: list[tuple[int, str, int]]) -> Any:
        """``value`` given to the tags and discards waiting at its level, innermost first: a
        discard drops it (and is done), a tag wraps it."""
        depth = pending[-1][0]
        while pending and pending[-1][0] == depth:
            _, token, _ = pending.pop()
            if token == "#_":
                return _DISCARDED
            value = Tagged(token[1:], value)
        return value

    def dangling(self, waiting: tuple[int, str, int], problem: str, line: int) -> EdnError:
        _, token, at = waiting
        return self.error(f"{token} on line {at} {problem}", line)

    def mapping(self, items: list[Any], opened: int) -> dict[Any, Any]:
        count = len(items)
        if count & 1:
            raise self.error(f"map opened on line {opened} has an odd number of forms", opened)
        pairs = iter(items)
        try:
            result = dict(zip(pairs, pairs))
        except TypeError:  # a key that is a collection: frozen, so that it hashes
            result = {_hashable(items[i]): items[i + 1] for i in range(0, count, 2)}
        if len(result) * 2 != count:
            seen: dict[Any, Any] = {}
            for key in map(_hashable, items[::2]):
                if key in seen:
                    raise self.collision("map", "key", opened, seen[key], key)
                seen[key] = key
        return result

    def members(self, items: list[Any], opened: int) -> frozenset[Any]:
        try:
            members = frozenset(items)
        except TypeError:  # a member that is a collection: frozen, so that it hashes
            members = frozenset(_hashable(x) for x in items)
        if len(members) != len(items):
            seen: dict[Any, Any] = {}
            for member in map(_hashable, items):
                if member in seen:
                    raise self.collision("set", "member", opened, seen[member], member)
                seen[member] = member
        return members

    def collision(self, kind: str, what: str, line: int, first: Any, second: Any) -> EdnError:
        """A map key or set member given twice, or two that only Python takes for one."""
        if _same(first, second):
            return self.error(f"{kind} opened on line {line} has the {what} {_shown(second)} twice", line)
        return self.error(f"{kind} opened on line {line} has the {what}s {_shown(first)} and {_shown(second)}, "
                          f"distinct in EDN but one to Python: floodmark cannot hold them apart in one {kind}",
                          line)

    def char(self, name: str, line: int) -> str:
        if name in _CHARS:
            return Char(_CHARS[name])
        if len(name) == 5 and name.startswith("u"):
            char = chr(int(name[1:], 16))
            if "\ud800" <= char <= "\udfff":
                raise self.error(f"character \\u{ord(char):04X} is a lone surrogate, not Unicode text", line)
            return Char(char)
        return Char(name)

    def string(self, token: str, line: int) -> str:
        if len(token) == 1:
            raise self.error("string is never closed", line)
        body = token[1:-1]
        if "\\" in body:
            body = self.unescape(body, line)
        if len(token) <= _MAX_REMEMBERED_STRING and len(self.remembered) < _MAX_REMEMBERED:
            self.remembered[token] = body
        return body

    def unescape(self, body: str, line: int) -> str:
        def escape(m: re.Match[str]) -> str:
            if m.group(1) is not None:
                return chr(int(m.group(1), 16))
            escaped = m.group(2)
            if escaped not in _STRING_ESCAPES:
                raise self.error(f"unknown string escape \\{escaped}", line)
            return _STRING_ESCAPES[escaped]

        value = _ESCAPE.sub(escape, body)
        if "\\u" in body:
            # \uD83D\uDE00 is one character written as a pair; a half pair is not text.
            try:
                value = value.encode("utf-16", "surrogatepass").decode("utf-16")
            except UnicodeDecodeError:
                raise self.error("string with a lone surrogate (\\uD800-\\uDFFF), not Unicode text", line) from None
        return value

    def atom(self, text: str, line: int) -> Any:
        """A keyword, symbol or number not met before (nil, true and false always have been)."""
        first = text[0]
        if first == ":":
            if len(text) == 1:
                raise self.error("empty keyword ':'", line)
            value: Any = Keyword(text[1:])
        elif first.isdigit() or (first in "+-" and len(text) > 1 and text[1].isdigit()):
            # Numbers are not remembered: a history's times and values are mostly distinct.
            return self.number(text, line)
        else:
            value = Symbol(text)
        if len(self.remembered) < _MAX_REMEMBERED:
            self.remembered[text] = value
        return value

    def number(self, text: str, line: int) -> Any:
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
