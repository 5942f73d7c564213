"""Value identity: when two values in a history are the same value, as EDN and JSON mean it.

A linearizability model compares what a read returned with what the object held, keys ops
by the object they touch, and caches states it has explored. Python's ``==`` and hashing
are the wrong identity for that: ``True == 1``, ``False == 0`` and ``1 == 1.0`` in Python,
and the EDN reader's keywords and strings compare equal by design (``Keyword("x") == "x"``,
so histories read naturally). Clojure, Knossos and Jepsen keep all of those apart (``(= 1
1.0)`` is false, ``:x`` is not ``"x"``, ``#{1 2}`` is not ``[1 2]``), and so does JSON for
``true`` and ``1``. Comparing with ``==`` judged a lost write valid when the read returned
``true`` instead of ``1``, and merged the kv keys ``1`` and ``true``.

So every value enters a model through :func:`canonical`, which returns a hashable,
type-tagged form on which Python's ``==`` and ``hash`` are exactly value identity:

- ``nil``, integers and strings are themselves (most values in a history are these, so the
  search compares and hashes them as cheaply as before);
- booleans, floats, keywords, symbols and characters are ``(tag, payload)`` pairs whose tag
  is an object no value ever canonicalizes to, so no pair can equal a vector or a number;
- vectors and lists are tuples of canonical elements (Clojure: ``(= [1 2] '(1 2))``);
- sets and maps are tagged frozensets (of members, of ``(key, value)`` pairs): equal
  whatever order they were written in, with no ordering of their members needed.

Floats compare as numbers among floats (``0.0`` is ``-0.0``, as in Clojure) but never equal
an integer; ``1N`` is the integer 1, as in Clojure. A NaN (EDN's ``##NaN``, which the reader
keeps as a symbol, or a float NaN) equals no other value, another NaN included: Clojure's
``(= ##NaN ##NaN)`` is false, so Knossos finds a read of ``##NaN`` from a register that holds
``##NaN`` illegal. Each NaN met becomes ``(NAN, occurrence)``, equal only to itself. :func:`order_key` orders canonical values
of any mix of types (for display), :func:`display` turns one back into the plain value a
report shows, and :func:`shown` writes one as EDN for a message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from floodmark.formats import edn
from floodmark.formats.edn import Char, EdnSet, FrozenMap, Keyword, Symbol, Tagged


class _Tag:
    """Marks a canonical form's kind; never itself a canonical value."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


BOOL: Final = _Tag("bool")
FLOAT: Final = _Tag("float")
KEYWORD: Final = _Tag("keyword")
SYMBOL: Final = _Tag("symbol")
CHAR: Final = _Tag("char")
SET: Final = _Tag("set")
MAP: Final = _Tag("map")
TAGGED: Final = _Tag("tagged")
NAN: Final = _Tag("nan")

TRUE: Final = (BOOL, True)
FALSE: Final = (BOOL, False)


class _NaN:
    """One NaN where a history wrote it: equal to nothing but itself (identity ``==`` and
    ``hash``), so two NaNs differ as in Clojure while a state holding one still hashes."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value  # as written (the symbol ##NaN or a float), for display


def _float(value: float) -> tuple[Any, ...]:
    return (FLOAT, value) if value == value else (NAN, _NaN(value))


def _symbol(value: Symbol) -> tuple[Any, ...]:
    text = str.__str__(value)
    return (SYMBOL, text) if text != "##NaN" else (NAN, _NaN(value))


class NotAValue(ValueError):
    """Something in a history that is no EDN or JSON value (only the Python API can pass one)."""


def ordered(value: Any) -> bool:
    """True if ``value`` is a vector or list, whose members have places. A set read from EDN
    is a list too (:class:`~floodmark.formats.edn.EdnSet`) but has no order: read by
    position, ``#{9 10}`` as a cas would swap in whichever member sorts first."""
    return type(value) is list or type(value) is tuple


def canonical(value: Any) -> Any:
    """The hashable form of ``value`` whose ``==`` is EDN/JSON value identity."""
    kind = type(value)
    if kind is int or kind is str or value is None:  # (the common case, kept first and cheap)
        return value
    convert = _CONVERT.get(kind)
    if convert is None:
        raise NotAValue(f"{value!r} is not an EDN or JSON value ({kind.__name__})")
    return convert(value)


def _sequence(value: Any) -> tuple[Any, ...]:
    return tuple(map(canonical, value))


def _set(value: Any) -> tuple[Any, ...]:
    return (SET, frozenset(map(canonical, value)))


def _map(value: Any) -> tuple[Any, ...]:
    return (MAP, frozenset((canonical(k), canonical(v)) for k, v in value.items()))


def _frozen_map(value: Any) -> tuple[Any, ...]:
    return (MAP, frozenset((canonical(k), canonical(v)) for k, v in value))


_CONVERT: dict[type, Callable[[Any], Any]] = {
    bool: lambda v: TRUE if v else FALSE,
    float: _float,
    Keyword: lambda v: (KEYWORD, str.__str__(v)),
    Symbol: _symbol,
    Char: lambda v: (CHAR, str.__str__(v)),
    list: _sequence,
    tuple: _sequence,
    EdnSet: _set,
    frozenset: _set,
    set: _set,
    dict: _map,
    FrozenMap: _frozen_map,
    Tagged: lambda v: (TAGGED, v.tag, canonical(v.value)),
}


def canonical_name(value: Any) -> Any:
    """The canonical form of a value that names something (a register): a keyword, string,
    number, boolean, nil, symbol or character, not a collection."""
    if type(value) not in _NAME_TYPES:
        raise ValueError(f"a register's key is a name (a keyword, a string, a number), not {shown(value)}")
    return canonical(value)


_NAME_TYPES: Final = frozenset((str, int, float, bool, type(None), Keyword, Symbol, Char))


def order_key(form: Any) -> tuple[Any, ...]:
    """A sort key that orders canonical values of any mix of types (a total order), so
    values are shown in the same order every time: ``sorted(forms, key=order_key)``."""
    if form is None:
        return (0,)
    kind = type(form)
    if kind is int:
        return (2, form, 0)
    if kind is str:
        return (3, form)
    tag = form[0] if form else None
    if tag is BOOL:
        return (1, form[1])
    if tag is FLOAT:
        return (2, form[1], 1)  # beside the integers, by value; an integer first at a tie
    if tag is NAN:
        return (2, math.inf, 2)  # (after every number: NaN has no place among them)
    if tag is CHAR:
        return (4, form[1])
    if tag is KEYWORD:
        return (5, form[1])
    if tag is SYMBOL:
        return (6, form[1])
    if tag is SET:
        return (8, tuple(sorted(map(order_key, form[1]))))
    if tag is MAP:
        return (9, tuple(sorted((order_key(k), order_key(v)) for k, v in form[1])))
    if tag is TAGGED:
        return (10, form[1], order_key(form[2]))
    return (7, tuple(map(order_key, form)))  # a vector


def display(form: Any) -> Any:
    """A canonical form as the plain value a report shows (keywords as :x, sets as #{...});
    maps whose keys are not all strings become lists of [key value] pairs, as JSON needs."""
    kind = type(form)
    if kind is not tuple:
        return form
    tag = form[0] if form else None
    if tag is BOOL or tag is FLOAT:
        return form[1]
    if tag is NAN:
        return form[1].value
    if tag is KEYWORD:
        return Keyword(form[1])
    if tag is SYMBOL:
        return Symbol(form[1])
    if tag is CHAR:
        return Char(form[1])
    if tag is SET:
        return EdnSet(display(m) for m in sorted(form[1], key=order_key))
    if tag is MAP:
        pairs = sorted(form[1], key=lambda kv: order_key(kv[0]))
        if all(type(k) is str for k, _ in pairs) or all(type(k) is tuple and k[:1] == (KEYWORD,) for k, _ in pairs):
            return {display(k): display(v) for k, v in pairs}
        return [[display(k), display(v)] for k, v in pairs]
    if tag is TAGGED:
        return Tagged(form[1], display(form[2]))
    return [display(v) for v in form]


def shown(value: Any, limit: int = 60) -> str:
    """A value (plain or canonical) as EDN text for a message, cut short past ``limit``."""
    try:
        text = edn.dumps(display(value), keyword_keys=False)
    except TypeError:  # (not a value EDN can write: say what Python sees)
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def same(a: Any, b: Any) -> bool:
    """Whether two plain values are surely the same value (``same(1, True)`` is False): a
    test for a value echoed back, nearly as cheap as ``==``. It may say False of two equal
    maps written in different orders, never True of two different values."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b) or a != b:
        return False
    # Python finds them equal: they differ only if somewhere inside, two values Python
    # merges (1 and true, :x and "x", a set and a vector) stand at the same place.
    return kind not in _NESTED or _alike(a, b)


_NESTED: Final = frozenset((list, tuple, dict, EdnSet, Tagged))


def _alike(a: Any, b: Any) -> bool:
    """Two collections of one type that Python finds equal: the same value, place by place?"""
    if type(a) is Tagged:
        return type(a.value) is type(b.value) and (type(a.value) not in _NESTED or _alike(a.value, b.value))
    if type(a) is dict:
        for (k, v), (j, w) in zip(a.items(), b.items()):
            if (k is not j and (type(k) is not type(j) or k != j)) or (
                    v is not w and (type(v) is not type(w) or (type(v) in _NESTED and not _alike(v, w)))):
                return False
        return True
    for v, w in zip(a, b):
        if v is not w and (type(v) is not type(w) or (type(v) in _NESTED and not _alike(v, w))):
            return False
    return True
