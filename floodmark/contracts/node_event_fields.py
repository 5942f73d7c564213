"""The fields of node events as JSON: what each kind's fields must be when read.

Each kind's body type (:mod:`floodmark.contracts.node_event_kinds`) is its schema: the reader derives
from the type hints what JSON type every field has (an array for a tuple, its elements
checked), which fields may be absent, and what a message says a field must be. A line of a
known kind whose field is missing or of the wrong JSON type is malformed, and so is an integer
no node can write where it stands: every integer field (and every integer inside a list) has
a range, what the field is in Kafka's protocol (offsets are 64-bit and from 0, leader epochs
32-bit and from -1, ``acks`` -1, 0 or 1, ...), declared once by field name in
:mod:`floodmark.contracts.node_event_ranges` and held tighter where a kind makes a value
impossible (a leader's epoch is never -1). An integer beyond its field's width would otherwise
be judged as written, and give a wrong verdict rather than an error. Readers stay tolerant
of what the contract allows: a kind they do not know reads as
:class:`~floodmark.contracts.node_event_kinds.UnknownKind` with its fields, and fields a known
kind does not declare are handed back apart (``NodeEvent.extra``).
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from floodmark.contracts.node_event_kinds import KnownKind, UnknownKind
from floodmark.contracts.node_event_ranges import Range, range_of
from floodmark.errors import SourceError

ENVELOPE = frozenset(("node", "seq", "wall", "kind"))

class NodeEventError(SourceError):
    """A malformed event file: names the file, the line and the problem."""


class _Invalid(ValueError):
    """A field's value is not what its type says."""


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    json_type: type  # the JSON type a present value has
    convert: Callable[[Any], Any] | None  # arrays to tuples, their elements checked
    optional: bool
    expected: str


@dataclass(frozen=True, slots=True)
class Bound:
    """A field holding integers, and their range."""

    name: str
    range: Range
    integers: Callable[[Any], tuple[int, ...]]  # the integers of a present value
    shape: str  # "integer", "integers" (a list of them) or "nested" (in a list's items)


@dataclass(frozen=True, slots=True)
class Schema:
    body: type[KnownKind]
    fields: tuple[Field, ...]
    names: frozenset[str]
    bounds: tuple[Bound, ...]  # the fields holding integers
    outside: Callable[[dict[str, Any]], bool]  # whether an integer of these values is outside its range


def _json_type(hint: Any) -> tuple[type, Callable[[Any], Any] | None, str]:
    """How a field typed ``hint`` reads from JSON: its JSON type, a conversion, and what it
    must be (for errors)."""
    scalar = _SCALARS.get(hint)
    if scalar is not None:
        return hint, None, scalar
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        element, convert, what = _json_type(args[0])
        what = _PLURALS.get(what, f"{what} items")

        def array(value: list[Any]) -> tuple[Any, ...]:
            for item in value:
                if type(item) is not element:
                    raise _Invalid()
            return tuple(value) if convert is None else tuple(convert(item) for item in value)

        return list, array, f"a list of {what}"
    if typing.get_origin(hint) is tuple and args and Ellipsis not in args:
        parts = [_json_type(a) for a in args]

        def fixed(value: list[Any]) -> tuple[Any, ...]:
            if len(value) != len(parts) or any(type(v) is not p[0] for v, p in zip(value, parts)):
                raise _Invalid()
            return tuple(v if p[1] is None else p[1](v) for v, p in zip(value, parts))

        return list, fixed, "[" + ", ".join(p[2] for p in parts) + "]"
    raise TypeError(f"node event field type {hint!r} has no JSON form")


_SCALARS: dict[Any, str] = {bool: "true or false", int: "an integer", str: "a string"}
_PLURALS = {"an integer": "integers", "a string": "strings", "true or false": "booleans"}


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving the values of ``names``, as a tuple whatever their number."""
    if not names:
        return lambda body: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda body: (one(body),)
    return operator.attrgetter(*names)


def _integers(hint: Any) -> Callable[[Any], tuple[int, ...]] | None:
    """A function giving the integers of a value of a field typed ``hint`` (a present one,
    as read), or None if it holds none."""
    if hint is int:
        return lambda value: (value,)
    args = typing.get_args(hint)
    if typing.get_origin(hint) is not tuple:
        return None
    if len(args) == 2 and args[1] is Ellipsis:
        if args[0] is int:
            return lambda value: cast(tuple[int, ...], value)
        inner = _integers(args[0])
        return None if inner is None else (lambda value: tuple(i for item in value for i in inner(item)))
    parts = [(k, f) for k, f in enumerate(_integers(a) for a in args) if f is not None]
    return (lambda value: tuple(i for k, f in parts for i in f(value[k]))) if parts else None


def _schema(body: type[KnownKind]) -> Schema:
    hints = typing.get_type_hints(body)
    described, bounds = [], []
    for f in dataclasses.fields(body):
        hint = hints[f.name]
        args = typing.get_args(hint)
        optional = isinstance(hint, types.UnionType) and type(None) in args
        if optional:
            [hint] = [a for a in args if a is not type(None)]
        json_type, convert, expected = _json_type(hint)
        described.append(Field(f.name, json_type, convert, optional, expected))
        integers = _integers(hint)
        if integers is not None:
            bounded = range_of(body.kind, f.name)
            if bounded is None:
                raise TypeError(f"node event field {body.kind}.{f.name} holds integers but has no range "
                                "(floodmark.contracts.node_event_ranges)")
            shape = "integer" if hint is int else "integers" if hint == tuple[int, ...] else "nested"
            bounds.append(Bound(f.name, bounded, integers, shape))
    return Schema(body, tuple(described), frozenset(f.name for f in described), tuple(bounds),
                  _outside({f.name: f for f in described}, tuple(bounds)))


def _outside(fields: dict[str, Field], bounds: tuple[Bound, ...]) -> Callable[[dict[str, Any]], bool]:
    """A function telling whether any integer of a kind's values is outside its field's
    range, generated for the kind (one expression: a simulated minute writes some 40,000
    events, and a loop over the bounds was a tenth of reading them)."""
    tests = []
    namespace: dict[str, Any] = {}
    for number, bound in enumerate(bounds):
        name, lowest, highest = bound.name, bound.range.lowest, bound.range.highest
        value = f"v[{name!r}]"
        if bound.shape == "integer":
            outside = f"not {lowest} <= {value} <= {highest}"
        elif bound.shape == "integers":
            outside = f"({value} and not ({lowest} <= min({value}) and max({value}) <= {highest}))"
        else:  # integers inside a list's items (the partition numbers of (topic, partition) pairs)
            namespace[f"integers{number}"] = bound.integers
            outside = f"not all({lowest} <= i <= {highest} for i in integers{number}({value}))"
        tests.append(f"({value} is not None and {outside})" if fields[name].optional else outside)
    exec(f"def outside(v):\n  return {' or '.join(tests) or 'False'}", namespace)  # noqa: S102 (field names)
    return cast(Callable[[dict[str, Any]], bool], namespace["outside"])


SCHEMAS: dict[str, Schema] = {body.kind: _schema(body) for body in typing.get_args(KnownKind)}
KINDS: frozenset[str] = frozenset(SCHEMAS)
NAMES: dict[type, tuple[str, ...]] = {s.body: tuple(f.name for f in s.fields) for s in SCHEMAS.values()}
# Each kind's field values in declared order, read in one call.
VALUES: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    body: _values_of(names) for body, names in NAMES.items()
}


def encode_body(body: KnownKind | UnknownKind, into: dict[str, Any] | None = None) -> dict[str, Any]:
    """A body's fields as written (declared order, ``None`` left out), added to ``into``."""
    written: dict[str, Any] = {} if into is None else into
    if isinstance(body, UnknownKind):
        written.update((k, v) for k, v in body.fields.items() if k not in ENVELOPE)
        return written
    kind = type(body)
    for name, value in zip(NAMES[kind], VALUES[kind](body)):
        if value is not None:
            written[name] = value
    return written


def read_body(kind: str, fields: Mapping[str, Any], envelope: int, source: str,
              line: int) -> tuple[KnownKind | UnknownKind, tuple[tuple[str, Any], ...]]:
    """The typed body of ``kind`` from ``fields``, and the fields it does not declare.
    ``envelope``: how many of ``fields`` are the envelope's (they are neither)."""
    schema = SCHEMAS.get(kind)
    if schema is None:
        return UnknownKind(kind, {k: v for k, v in fields.items() if k not in ENVELOPE}), ()
    values: dict[str, Any] = {}
    present = envelope
    for f in schema.fields:
        value = fields.get(f.name, _ABSENT)
        if type(value) is f.json_type:
            present += 1
            if f.convert is not None:
                try:
                    value = f.convert(value)
                except _Invalid:
                    raise NodeEventError(source, line, f"{kind}: {f.name} must be {f.expected}, "
                                                       f"got {short(value)}") from None
        elif value is None and f.optional:
            present += 1
        elif value is _ABSENT and f.optional:
            value = None
        elif value is _ABSENT or value is None:
            raise NodeEventError(source, line, f"{kind}: missing field {f.name!r}")
        else:
            raise NodeEventError(source, line, f"{kind}: {f.name} must be {f.expected}, got {short(value)}")
        values[f.name] = value
    if schema.outside(values):
        for bound in schema.bounds:
            value = values[bound.name]
            for integer in () if value is None else bound.integers(value):
                problem = bound.range.problem(bound.name, integer)
                if problem is not None:
                    raise NodeEventError(source, line, f"{kind}: {problem}")
    extra: tuple[tuple[str, Any], ...] = ()
    if len(fields) > present:
        extra = tuple((k, v) for k, v in fields.items() if k not in schema.names and k not in ENVELOPE)
    return schema.body(**values), extra


_ABSENT: Any = object()


def short(value: Any) -> str:
    """A field's value for a message: as written, within bounds."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return "a number of more than 40 digits"
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "an object"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


