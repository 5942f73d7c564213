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

What Clojure's reader also takes is read as it reads it, since Jepsen writes with it:
metadata (``^{:a 1} form``, ``^:a form``) is dropped (and refused where Clojure refuses it,
on a form that cannot carry it: ``^:m 1``, ``^:m "s"``, ``^:m :k``, ``^:m nil``; only a
symbol, list, vector, map or set can), a namespaced map (``#:ns{:a 1}``) has its keys
qualified, and characters include ``\\formfeed``, ``\\backspace`` and ``\\o101``. A
character is everything from its backslash to a delimiter, so ``\\ab`` is refused, never
read as ``\\a`` then ``b``, and so is any ``#`` that starts nothing EDN defines (``#1``,
``#?``). A ratio (``2/4``) or a BigDecimal (``1.50M``) has no Python type the
checkers compare as Clojure does (a float would make ``1/2`` equal ``0.5``, and merge
decimals that differ past the 17th digit), so it is read exactly, as the symbol of its one
spelling: ``1/2``, ``1.5M`` (a whole ratio, ``4/2``, is the integer ``2``, as in Clojure).
Such a symbol equals every spelling of its value and nothing else, and is written back as
the number it spells. ``##Inf``, ``##-Inf`` and ``##NaN`` are kept as the symbols they are.
``#inst`` and ``#uuid``, the tags every EDN reader knows, hold the one spelling of their
instant or UUID (:mod:`floodmark.formats.edn_instants`), so two spellings of one are equal.

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

import decimal
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from floodmark.errors import SourceError
from floodmark.formats.edn_instants import inst_text, uuid_text
from floodmark.formats.edn_tokens import tokens_by_line
from floodmark.formats.edn_values import (
    CHAR_NAMES,
    Char,
    EdnSet,
    FrozenMap,
    Keyword,
    Symbol,
    Tagged,
    dumps,
    keyword,
)

__all__ = ["Char", "EdnError", "EdnSet", "FrozenMap", "Keyword", "MAX_DEPTH", "MAX_DIGITS", "Symbol", "Tagged",
           "dumps", "iter_forms", "keyword", "loads"]


class EdnError(SourceError):
    """Malformed EDN: names the source, the line (from 1) and the problem."""


# ASCII digits only (Python's \d takes any script's: '٣' would read as 3, which Clojure refuses),
# and no integer but 0 starting with 0 (EDN forbids it; Clojure reads 010 as octal 8, so the
# same history would hold another value to each reader: refused, as hex and radix numbers are).
_INT = re.compile(r"[+-]?(?:0|[1-9][0-9]*)N?$")
_LEADING_ZERO = re.compile(r"[+-]?0[0-9]+N?$")
_FLOAT = re.compile(r"[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?M?$")
_RATIO = re.compile(r"[+-]?[0-9]+/[0-9]+$")
_HEX = re.compile(r"[0-9a-fA-F]{4}$")
_OCTAL = re.compile(r"[0-7]{1,3}$")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
_STRING_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f"}
_CLOSERS = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_NOT_ATOMS = frozenset('[](){}#"\\^')  # first characters of the tokens that are not atoms
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")  # a tag starts with one
# EDN's built-in tags, each with what reads its string as the one spelling of its value.
_BUILT_IN_TAGS = {"inst": inst_text, "uuid": uuid_text}
MAX_DEPTH = 100  # collections, tags and discards open at once; Jepsen's histories use a few
MAX_DIGITS = 400  # a number longer than this is damage, not data
# Distinct keywords, symbols and short strings remembered, so that a history's thousands of
# ':process' read as one shared (immutable) object: read once, stored once. Bounded, so a
# file of a million distinct keywords costs no more than reading them.
_MAX_REMEMBERED = 1 << 16
_MAX_REMEMBERED_STRING = 64
OPENS: Any = object()  # what iter_forms(spread=True) gives for a first vector's '[' (or list's '(')
CLOSES: Any = object()  # and for its closing bracket
_MISSING: Any = object()
_DISCARDED: Any = object()
_META_TARGET = "^ "  # (no token has a blank) waits for the form that metadata was given to
_SPECIAL_FLOATS = frozenset(("##Inf", "##-Inf", "##NaN"))  # kept as the symbols they are spelled as
# BigDecimals are normalized exactly: as many digits as a number may have, any exponent.
_DECIMALS = decimal.Context(prec=MAX_DIGITS, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


class _Reader:
    """Reads forms with an explicit stack (no recursion), so nesting costs memory, not the
    Python stack, and is refused past :data:`MAX_DEPTH`."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.remembered: dict[str, Any] = {"nil": None, "true": True, "false": False}

    def error(self, problem: str, line: int) -> EdnError:
        return EdnError(self.source, line, problem)

    def forms(self, spread: bool = False) -> Iterator[tuple[Any, int]]:
        """Every top-level form with the line it starts on; with ``spread``, a first form that
        is a vector or list comes as its elements, each with its own line, between
        :data:`OPENS` and :data:`CLOSES` (with the lines of its brackets)."""
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
        level = 0  # how many collections enclose a top-level form: 1 inside a spread vector
        for line, tokens in tokens_by_line(self.text):
            for token in tokens:
                first = token[0]
                if first not in not_atoms:
                    value = recall(token, _MISSING)
                    if value is _MISSING:
                        if (len(token) <= MAX_DIGITS and token.isdigit() and token.isascii()
                                and (first != "0" or len(token) == 1)):
                            value = int(token)  # the commonest number, without the patterns of number()
                        else:
                            value = self.atom(token, line)
                elif first in "{[(" or token == "#{":
                    if len(stack) + len(pending) >= MAX_DEPTH:
                        raise self.error(f"nested more than {MAX_DEPTH} levels deep", line)
                    if not top and len(stack) == level:
                        top = line
                    stack.append((items, token, line))
                    items = []
                    append = items.append
                    if spread and len(stack) == 1:
                        spread = False
                        if first in "[(" and not pending:  # the first form is a vector: spread it
                            toplevel, level, top = items, 1, 0
                            yield OPENS, line
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
                    if level and not stack:  # the spread vector is closed
                        toplevel, level = items, 0
                        yield CLOSES, line
                        continue
                elif first == '"':
                    value = recall(token, _MISSING)
                    if value is _MISSING:
                        value = self.string(token, line)
                elif token == "#_" or token == "^" or (first == "#" and (token[1:2] in _LETTERS or (
                        token[1:2] == ":" and self.namespace(token, line)))):
                    # A discard, metadata, a tag or a map's namespace: it applies to the next form.
                    if len(stack) + len(pending) >= MAX_DEPTH:
                        raise self.error(f"nested more than {MAX_DEPTH} levels deep", line)
                    if not top and len(stack) == level:
                        top = line
                    pending.append((len(stack), token, line))
                    continue
                elif first == "\\" and len(token) > 1:
                    value = self.char(token[1:], line)
                else:  # an atom that starts like something else: ##Inf, a backslash alone
                    value = self.odd_atom(token, line)
                if pending and pending[-1][0] == len(stack):
                    value = self.unwrap(value, pending, token)
                    if value is _DISCARDED:
                        if len(stack) == level and not pending:
                            top = 0  # the discarded form was all there was
                        continue
                if items is not toplevel:
                    append(value)
                    continue
                yield value, top or line
                top, spread = 0, False
        if pending and pending[-1][0] == len(stack):
            raise self.dangling(pending[-1], "has no form after it", pending[-1][2])
        if stack:
            opener, opened = stack[-1][1], stack[-1][2]
            raise self.error(f"{opener!r} opened on line {opened} is never closed", opened)

    def unwrap(self, value: Any, pending: list[tuple[int, str, int]], read_from: str) -> Any:
        """``value`` (read from the token ``read_from``) given to the tags and discards waiting
        at its level, innermost first: a discard drops it (and is done); metadata (``^``) is
        dropped too, and leaves the form after it to go on to what waits below, which must be
        one that carries metadata; a tag wraps it; ``#:ns`` qualifies its keys."""
        depth = pending[-1][0]
        while pending and pending[-1][0] == depth:
            _, token, at = pending.pop()
            if token == "#_":
                return _DISCARDED
            if token == "^":
                kind = type(value)
                if not (kind is dict or kind is str or kind is Keyword or (kind is Symbol and _symbol(read_from))):
                    raise self.error(f"metadata (^ on line {at}) must be a map, keyword, symbol or string, "
                                     f"not {_shown(value)}", at)
                pending.append((depth, _META_TARGET, at))
                return _DISCARDED
            if token == _META_TARGET:
                if not _carries_metadata(value, read_from):
                    # (Clojure's reader refuses it: "Metadata can only be applied to IMetas")
                    raise self.error(f"metadata (^ on line {at}) is given to {_shown(value)}, which cannot "
                                     "carry it (only a symbol, list, vector, map or set can)", at)
                continue
            if token[1] == ":":
                value = self.qualified(token[2:], value, at)
            else:
                value = self.tagged(token[1:], value, at)
        return value

    def tagged(self, tag: str, value: Any, line: int) -> Tagged:
        """``#tag value``; EDN's built-in ``#inst`` and ``#uuid`` read as the one spelling of
        the value they name (:mod:`floodmark.formats.edn_instants`), refused where Clojure
        refuses them."""
        spelling = _BUILT_IN_TAGS.get(tag)
        if spelling is None:
            return Tagged(tag, value)
        if type(value) is not str:
            raise self.error(f"#{tag} on line {line} is followed by {_shown(value)}, not a string", line)
        try:
            return Tagged(tag, spelling(value))
        except ValueError as e:
            raise self.error(f"#{tag} {_shown(value)} on line {line}: {e}", line) from None

    def dangling(self, waiting: tuple[int, str, int], problem: str, line: int) -> EdnError:
        _, token, at = waiting
        return self.error(f"{token.rstrip()} on line {at} {problem}", line)

    def namespace(self, token: str, line: int) -> bool:
        """Whether ``token`` is a map's namespace (``#:jepsen.op``), which qualifies the
        unqualified keyword and symbol keys of the map after it; refused when it is none."""
        if len(token) == 2 or token[2] == ":":
            raise self.error(f"{token[:40]!r}: a namespaced map needs its namespace named (#:ns{{...}})", line)
        return True

    def qualified(self, namespace: str, value: Any, line: int) -> dict[Any, Any]:
        """The map after ``#:namespace`` with its keys qualified, as Clojure reads it: ``:a``
        becomes ``:namespace/a``, ``:_/a`` becomes ``:a``, a qualified key stays as it is."""
        if type(value) is not dict:
            raise self.error(f"#:{namespace[:40]} on line {line} is followed by {_shown(value)}, not a map", line)
        result: dict[Any, Any] = {}
        for key, item in value.items():
            if type(key) in (Keyword, Symbol):
                name = str.__str__(key)
                if name.startswith("_/"):
                    key = type(key)(name[2:])
                elif "/" not in name:
                    key = type(key)(f"{namespace}/{name}")
            if key in result:
                first = next(k for k in result if k == key)
                raise self.collision("map", "key", line, first, key)
            result[key] = item
        return result

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
        """A character from what follows its backslash: one character, a name (``newline``),
        ``u`` and four hexadecimal digits or ``o`` and up to three octal ones (to ``\\o377``)."""
        if len(name) == 1:
            return Char(name)
        if name in CHAR_NAMES:
            return Char(CHAR_NAMES[name])
        if len(name) == 5 and name[0] == "u" and _HEX.match(name, 1):
            char = chr(int(name[1:], 16))
            if "\ud800" <= char <= "\udfff":
                raise self.error(f"character \\u{ord(char):04X} is a lone surrogate, not Unicode text", line)
            return Char(char)
        if len(name) <= 4 and name[0] == "o" and _OCTAL.match(name, 1) and int(name[1:], 8) <= 0o377:
            return Char(chr(int(name[1:], 8)))
        raise self.error(f"unsupported character \\{name[:40]}", line)

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

    def odd_atom(self, text: str, line: int) -> Any:
        """An atom that starts like no atom: ``##Inf``, ``##-Inf`` and ``##NaN`` (kept as the
        symbols they are spelled as, written back the same); anything else is refused."""
        if text in _SPECIAL_FLOATS:
            return self.atom(text, line)
        if text == "\\":
            raise self.error("a backslash with no character after it", line)
        raise self.error(f"{text[:40]!r}: '#' followed by something EDN does not define", line)

    def number(self, text: str, line: int) -> Any:
        if len(text) > MAX_DIGITS:
            raise self.error(f"number of {len(text)} characters (at most {MAX_DIGITS})", line)
        if _INT.match(text):
            return int(text.rstrip("N"))
        if _LEADING_ZERO.match(text):
            raise self.error(f"integer {text[:40]!r} starts with 0, which EDN does not allow "
                             "(Clojure reads it as octal, other readers as decimal)", line)
        if _FLOAT.match(text):
            if text[-1] == "M":
                return _decimal(text)
            value = float(text)
            if value in (float("inf"), float("-inf")):
                raise self.error(f"number {text[:40]!r} is out of range", line)
            return value
        if _RATIO.match(text):
            numerator, denominator = text.split("/")
            try:
                ratio = Fraction(int(numerator), int(denominator))
            except ZeroDivisionError:
                raise self.error(f"ratio {text[:40]!r} divides by zero", line) from None
            # As Clojure reads one: in lowest terms, and an integer when it is whole.
            return ratio.numerator if ratio.denominator == 1 else Symbol(str(ratio))
        raise self.error(f"malformed number {text[:40]!r}", line)


def _decimal(text: str) -> Symbol:
    """A BigDecimal (``1.50M``) as the symbol of its value's one spelling (``1.5M``): equal
    to every BigDecimal of that value and to nothing else, as Clojure's ``=`` has it."""
    number = _DECIMALS.normalize(decimal.Decimal(text[:-1]))
    if number.is_zero():
        return Symbol("0M")
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)  # (a finite number)
    # Plain digits (100M, 0.001M) unless that would be long (1E+400M is written so).
    return Symbol(f"{number:f}M" if -40 <= exponent <= 40 else f"{number}M")


def _symbol(token: str) -> bool:
    """Whether an atom's token is a symbol's, not a number's that is read as a symbol (a ratio,
    a BigDecimal, ``##Inf``): told by how it is spelled, as the reader told it."""
    first = token[0]
    return not (first.isdigit() or first == "#" or (first in "+-" and len(token) > 1 and token[1].isdigit()))


def _carries_metadata(value: Any, read_from: str) -> bool:
    """Whether Clojure lets metadata onto ``value`` (read from the token ``read_from``): a
    symbol, list, vector, map or set does, and a record literal (``#ns.Op{...}``); a number,
    string, keyword, character, nil, a boolean or another tagged literal does not."""
    kind = type(value)
    if kind is dict or kind is list or kind is frozenset:
        return True
    if kind is Symbol:
        return _symbol(read_from)
    if kind is Tagged:
        name = value.tag.rpartition(".")[2]
        return type(value.value) is dict and "." in value.tag and name[:1].isupper()
    return False


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


def iter_forms(text: str, source: str = "<edn>", *, spread: bool = False) -> Iterator[tuple[Any, int]]:
    """Read every top-level form, yielding (form, line where it starts); with ``spread``, a
    first form that is a vector or list comes as :data:`OPENS`, its elements (each with the
    line it starts on, so that a history written as one vector can name the line of an op)
    and :data:`CLOSES`."""
    return _Reader(text, source).forms(spread)


def loads(text: str, source: str = "<edn>") -> Any:
    """Read exactly one EDN form."""
    forms = list(iter_forms(text, source))
    if len(forms) != 1:
        raise EdnError(source, forms[1][1] if len(forms) > 1 else 1,
                       f"expected exactly one form, found {len(forms)}")
    return forms[0][0]
