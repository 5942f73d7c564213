"""Type-directed decoding: a JSON value checked against a message class's type hints.

The wire codec (:mod:`floodmark.reference.protocol.wire`) carries every message as a JSON
object with a ``"type"`` tag and its fields. A peer may send anything, so the value that
comes back is checked against the dataclass's type hints as it is turned into a message: a
string where an offset belongs is a :class:`WireError` naming the message and the field,
never a crash deep in the protocol code.

The checking also bounds a frame's depth. A field typed ``int`` or ``tuple[int, ...]``
takes nothing deeper, and every message type nests less than :data:`MAX_NESTING` levels
(:func:`schema_depth`, checked when a type is registered), so an accepted value is never
deeper than that, and no separate walk over a decoded frame is needed to bound it. That walk
cost as much as the decoding of a 10,000-partition LeaderAndIsr, which a new controller
sends every broker.

What each class needs is worked out once (a *plan* per field, a *shape* per class). A
complete object whose plain fields have their exact JSON types, as every frame a node sends
does, is decoded by the quick path: those fields fetched in one call and checked in one
pass, the others (lists, nested messages, floats) each through its decoder. Anything else
(defaults left out, a problem to name) goes field by field.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import operator
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from floodmark.inputs.plain_values import nesting_problem
from floodmark.reference.protocol import messages

MAX_NESTING = 32  # messages nest a few levels; a frame nested deeper is not one of ours
# Fields that make a node wait: a peer asking for longer than this is refused, never obeyed
# (a fetch holding for 1e308 seconds would never be answered).
WAIT_FIELDS = frozenset(("max_wait", "timeout"))
MAX_WAIT_SECONDS = 300.0


class WireError(ValueError):
    """Bytes or JSON that are not a valid frame or message; says what is wrong and where."""


class _Mismatch(Exception):
    """A value that does not fit its type; ``path`` is filled in on the way out."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []  # innermost first


def decode_message(data: Any, where: str = "message") -> Any:
    """Build the message a JSON value describes; raises :class:`WireError` if it is malformed."""
    try:
        return _decode_tagged(data)
    except _Mismatch as e:
        raise WireError(f"{where}{''.join(reversed(e.path))}: {e.problem}") from None


def _decode_tagged(data: Any) -> Any:
    if type(data) is not dict:
        raise _Mismatch(f"expected a JSON object with a 'type' tag, got {describe(data)}")
    tag = data.get("type")
    shape = _SHAPES.get(tag) if type(tag) is str else None
    if shape is None:
        shape = _shape_for(tag)
    if len(data) == shape.width:  # every field and the tag, nothing else (if the names match)
        try:
            plain = shape.plain_values(data)
        except KeyError:
            pass
        else:
            if all(map(operator.contains, shape.plain_types, map(type, plain))):
                return _build(shape, data, plain)
    return _decode_fields(shape, data)  # absent defaults, or a problem to name


def _build(shape: _Shape, data: dict[str, Any], plain: tuple[Any, ...]) -> Any:
    """The message of a complete object whose plain fields already have their exact types:
    only the fields that need converting (lists, nested messages, floats) are visited."""
    kwargs = dict(zip(shape.plain_names, plain))
    for field, items in shape.converted:
        value = data.get(field.name, _ABSENT)
        if value is _ABSENT:  # as many keys as fields, but another one instead of this
            return _decode_fields(shape, data)
        if items is not None and type(value) is list and items.issuperset(map(type, value)):
            kwargs[field.name] = tuple(value)  # a list of plain values, without a call
            continue
        kwargs[field.name] = _decode_field(field, value)
    return shape.cls(**kwargs)


def _decode_fields(shape: _Shape, data: dict[str, Any]) -> Any:
    """Field by field: the general way, which also names the first problem it meets."""
    tag = shape.cls.__name__
    kwargs: dict[str, Any] = {}
    for field in shape.plan:
        value = data.get(field.name, _ABSENT)
        if value is _ABSENT:
            if field.required:
                raise _Mismatch(f"{tag} is missing field {field.name!r}")
            continue
        if type(value) in field.exact:  # the common case, without a call
            kwargs[field.name] = value
            continue
        kwargs[field.name] = _decode_field(field, value)
    if len(kwargs) != len(data) - 1:
        extra = sorted(k for k in data if k != "type" and k not in kwargs)
        raise _Mismatch(f"{tag} has no field {_quoted(extra[0])}")
    return shape.cls(**kwargs)


def _decode_field(field: _Field, value: Any) -> Any:
    """One field's value decoded; a problem inside it names the field in its path."""
    try:
        return field.decode(value)
    except _Mismatch as e:
        e.path.append(f".{field.name}")
        raise


Decoder = Callable[[Any], Any]

PLAIN, PLAIN_TUPLE, NESTED = 0, 1, 2  # how a field is encoded


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    decode: Decoder
    required: bool
    kind: int
    exact: tuple[type, ...] = ()  # JSON types taken as they are (plain fields not turned into floats)
    items: frozenset[type] | None = None  # the same for the items of a list of plain values


_ABSENT = object()


@dataclasses.dataclass(frozen=True)
class _Shape:
    """How to decode one message class: its plan, and the split the quick path uses."""

    cls: type
    plan: tuple[_Field, ...]
    width: int  # keys of a complete object: every field and the tag
    plain_names: tuple[str, ...]  # fields taken as they come when their JSON type is exact
    plain_values: Callable[[dict[str, Any]], tuple[Any, ...]]  # KeyError if one is absent
    plain_types: tuple[tuple[type, ...], ...]
    # The other fields, each through its decoder, unless it is a list of plain values
    # whose items all have one of these exact types.
    converted: tuple[tuple[_Field, frozenset[type] | None], ...]


_MESSAGE_TYPES: dict[str, type] = messages.message_types()
_PLANS: dict[type, tuple[_Field, ...]] = {}
_SHAPES: dict[str, _Shape] = {}


def register_message_type(cls: type) -> None:
    """Let the codec carry a message class defined outside ``messages`` (a frozen dataclass
    whose fields nest less than :data:`MAX_NESTING` deep: see :func:`schema_depth`)."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    known = _MESSAGE_TYPES.get(cls.__name__)
    if known is not None and known is not cls:
        raise ValueError(f"another message type is already called {cls.__name__}")
    if schema_depth(cls) >= MAX_NESTING:
        raise TypeError(f"{cls.__name__} nests {MAX_NESTING} or more levels deep (or holds itself)")
    _MESSAGE_TYPES[cls.__name__] = cls


def schema_depth(cls: type) -> int:
    """How deep a message of ``cls`` nests as JSON (an object is one level, a list another),
    at most: the decoder checks every value against its field's type, so an accepted frame
    nests no deeper than its message type allows, and no separate walk over a decoded frame
    is needed to bound it. A type that holds itself counts as :data:`MAX_NESTING`."""
    return _hint_depth(cls, ())


def _hint_depth(hint: Any, inside: tuple[type, ...]) -> int:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if hint in inside:
            return MAX_NESTING
        hints = typing.get_type_hints(hint)
        return 1 + max((_hint_depth(hints[f.name], (*inside, hint)) for f in dataclasses.fields(hint)), default=0)
    args = [a for a in typing.get_args(hint) if a is not Ellipsis]
    nested = max((_hint_depth(a, inside) for a in args), default=0)
    return nested + 1 if typing.get_origin(hint) is tuple else nested


def _shape_for(tag: Any) -> _Shape:
    cls = _MESSAGE_TYPES.get(tag) if isinstance(tag, str) else None
    plan = plan_of(cls) if cls is not None else None
    if cls is None or plan is None:
        raise _Mismatch(f"unknown message type {_quoted(tag)}")
    plain = tuple(f for f in plan if f.exact)
    names = tuple(f.name for f in plain)
    getter = operator.itemgetter(*names) if len(names) > 1 else (
        (lambda data: (data[names[0]],)) if names else (lambda data: ()))
    shape = _Shape(cls, plan, len(plan) + 1, names, getter, tuple(f.exact for f in plain),
                   tuple((f, f.items) for f in plan if not f.exact))
    _SHAPES[tag] = shape
    return shape


def plan_of(cls: type) -> tuple[_Field, ...] | None:
    """How to encode and decode each field of a message class, built once from its type hints."""
    plan = _PLANS.get(cls)
    if plan is None:
        if _MESSAGE_TYPES.get(cls.__name__) is not cls:
            return None
        hints = typing.get_type_hints(cls)
        plan = tuple(
            _Field(f.name, _bounded_wait(f.name, _decoder_for(hints[f.name])) if f.name in WAIT_FIELDS
                   else _decoder_for(hints[f.name]),
                   f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                   _encoding_kind(hints[f.name]), _exact_types(hints[f.name]), _exact_item_types(hints[f.name]))
            for f in dataclasses.fields(cls)
        )
        _PLANS[cls] = plan
    return plan


def _bounded_wait(name: str, decode: Decoder) -> Decoder:
    def bounded(v: Any) -> Any:
        value = decode(v)
        if isinstance(value, int | float) and not 0 <= value <= MAX_WAIT_SECONDS:
            raise _Mismatch(f"{name} must be from 0 to {MAX_WAIT_SECONDS:g} seconds, got {describe(v)}")
        return value

    return bounded


# Exact JSON types each plain hint accepts (``type(v) in ...``: a bool is not an int here).
_PLAIN_TYPES: dict[Any, tuple[type, ...]] = {
    int: (int,), float: (float, int), str: (str,), bool: (bool,), type(None): (type(None),),
}
_PLAIN_NAMES: dict[Any, str] = {
    int: "an integer", float: "a number", str: "a string", bool: "a boolean", type(None): "null",
}


def _plain_types(hint: Any) -> tuple[type, ...] | None:
    """The JSON types of a hint made only of plain values (``int``, ``str | None``), else None."""
    if hint in _PLAIN_TYPES:
        return _PLAIN_TYPES[hint]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        parts = [_plain_types(h) for h in typing.get_args(hint)]
        if all(p is not None for p in parts):
            return tuple(t for p in parts if p is not None for t in p)
    return None


def _exact_types(hint: Any) -> tuple[type, ...]:
    """JSON types a field takes without conversion: those of a plain hint other than float."""
    plain = _plain_types(hint)
    if plain is None or float in plain:
        return ()
    return plain


def _exact_item_types(hint: Any) -> frozenset[type] | None:
    """For ``tuple[X, ...]`` of a plain X: the JSON types its items take without conversion."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return frozenset(_exact_types(args[0])) or None
    return None


def _encoding_kind(hint: Any) -> int:
    if _plain_types(hint) is not None:
        return PLAIN
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and all(a is Ellipsis or _plain_types(a) is not None for a in args):
        return PLAIN_TUPLE
    return NESTED


def _decoder_for(hint: Any) -> Decoder:
    """A function checking (and converting) one JSON value against a type hint."""
    if hint is Any:
        return _untyped
    plain = _plain_types(hint)
    if plain is not None:
        return _plain_decoder(hint, plain)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if len(args) == 2 and type(None) in args:  # X | None: no need to try X on a null
            inner = _decoder_for(args[0] if args[1] is type(None) else args[1])
            return lambda v: None if v is None else _ordescribe(inner, v, hint)
        options = [_decoder_for(h) for h in args]
        return lambda v: _first_that_fits(options, v, hint)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return _list_decoder(_decoder_for(args[0]), _exact_item_types(hint))
        items = [_decoder_for(a) for a in args]
        return lambda v: _fixed_tuple(items, v)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return lambda v: _expect_message(hint, v)
    raise TypeError(f"wire codec cannot handle type hint {hint!r}")


def _untyped(v: Any) -> Any:
    """An untyped field's value as it came, if it nests no deeper than a frame may: the
    schema bounds every other field's depth, but not this one's."""
    problem = nesting_problem(v, MAX_NESTING)
    if problem:
        raise _Mismatch(problem)
    return v


def _plain_decoder(hint: Any, accepted: tuple[type, ...]) -> Decoder:
    expected = _PLAIN_NAMES.get(hint)
    to_float = hint is float

    def decode(v: Any) -> Any:
        if type(v) in accepted:
            if to_float:
                if type(v) is int and not -_FLOAT_INT < v < _FLOAT_INT:
                    raise _Mismatch("expected a number, got an integer out of range")
                return float(v)
            return v
        raise _Mismatch(f"expected {expected}, got {describe(v)}" if expected
                        else f"{describe(v)} does not fit {hint}")

    return decode


_FLOAT_INT = 2**63


def _list_decoder(item: Decoder, exact: frozenset[type] | None) -> Decoder:
    def decode(v: Any) -> tuple[Any, ...]:
        if type(v) is not list:
            raise _Mismatch(f"expected a list, got {describe(v)}")
        if exact is not None and exact.issuperset(map(type, v)):
            return tuple(v)  # the common case, checked in one pass
        try:
            return tuple(map(item, v))
        except _Mismatch:
            return _decode_each(itertools.repeat(item), v)  # again, to say where

    return decode


def _fixed_tuple(items: list[Decoder], v: Any) -> tuple[Any, ...]:
    if type(v) is not list:
        raise _Mismatch(f"expected a list, got {describe(v)}")
    if len(v) != len(items):
        raise _Mismatch(f"expected a list of {len(items)} items, got {len(v)}")
    return _decode_each(items, v)


def _decode_each(decoders: Iterable[Decoder], values: list[Any]) -> tuple[Any, ...]:
    """Each value by its decoder, in order; a mismatch names the index it happened at."""
    out: list[Any] = []
    try:
        for decode, x in zip(decoders, values):
            out.append(decode(x))
    except _Mismatch as e:
        e.path.append(f"[{len(out)}]")  # the values before it all decoded
        raise
    return tuple(out)


def _expect_message(cls: type, v: Any) -> Any:
    message = _decode_tagged(v)
    if not isinstance(message, cls):
        raise _Mismatch(f"expected a {cls.__name__}, got a {type(message).__name__}")
    return message


def _first_that_fits(options: list[Decoder], v: Any, hint: Any) -> Any:
    for option in options:
        try:
            return option(v)
        except _Mismatch:
            continue
    raise _Mismatch(f"{describe(v)} does not fit {hint}")


def _ordescribe(decode: Decoder, v: Any, hint: Any) -> Any:
    try:
        return decode(v)
    except _Mismatch:
        raise _Mismatch(f"{describe(v)} does not fit {hint}") from None


def _quoted(name: Any) -> str:
    """A name from the frame, quoted and cut short: a peer chooses its length."""
    text = repr(name)
    return text if len(text) <= 40 else text[:37] + "..."


def describe(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, str | int | float | bool | type(None)) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."
