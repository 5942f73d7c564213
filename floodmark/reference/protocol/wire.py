"""The wire codec: how a message becomes bytes on a connection and back.

Every message is a frozen dataclass from :mod:`floodmark.reference.protocol.messages`, so one generic
codec serves them all: a message is a JSON object carrying a ``"type"`` tag (the class name)
and its fields; nested messages are tagged objects in turn, tuples travel as JSON lists and
come back as tuples. Decoding is checked against the dataclass's type hints, so a peer that
sends a string where an offset belongs gets a clear :class:`WireError` naming the message and
the field, instead of a crash deep in the protocol code.

On a connection every message travels in a *frame*: a 4-byte big-endian length followed by
that many bytes of JSON ``{"id": correlation id, "body": message}``. The correlation id
pairs a response with its request, so many requests can be in flight on one connection.
Frames longer than :data:`MAX_FRAME_BYTES` are refused before they are read. A peer may
send anything, so a frame's JSON must also be fit for the protocol: nested at most
:data:`MAX_NESTING` deep, numbers finite, strings Unicode text, and a
wait (``max_wait``, ``timeout``) of at most :data:`MAX_WAIT_SECONDS`; anything else is a
:class:`WireError`, which a server answers by closing the connection with one log line.

JSON is written with orjson when it is installed (the harness has it; a broker image may
not), else with the standard library, and parsed by :mod:`floodmark.fast_json`: both ways
produce and accept the same JSON, huge integers included.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import operator
import struct
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from floodmark import fast_json
from floodmark.plain_values import nesting_problem, value_problem
from floodmark.reference.protocol import messages

try:
    import orjson
except ImportError:  # pragma: no cover - a node without orjson uses the standard library
    orjson = None  # type: ignore[assignment]

MAX_FRAME_BYTES = 16 * 1024 * 1024
LENGTH_PREFIX = struct.Struct(">I")
MAX_NESTING = 32  # messages nest a few levels; a frame nested deeper is not one of ours
# Fields that make a node wait: a peer asking for longer than this is refused, never obeyed
# (a fetch holding for 1e308 seconds would never be answered).
WAIT_FIELDS = frozenset(("max_wait", "timeout"))
MAX_WAIT_SECONDS = 300.0


class WireError(ValueError):
    """Bytes or JSON that are not a valid frame or message; says what is wrong and where."""


# --------------------------------------------------------------------------- encoding


def encode_message(message: Any) -> dict[str, Any]:
    """A message as a JSON-ready dict with its ``type`` tag (tuples stay tuples: JSON lists)."""
    encoder = _ENCODERS.get(type(message))
    if encoder is None:
        encoder = _encoder_for(type(message))
    return encoder(message)


def _encoder_for(cls: type) -> Callable[[Any], dict[str, Any]]:
    """Build (once per class) a function encoding its instances: all fields fetched in one
    ``attrgetter`` call, only nested fields visited further. A 10,000-partition LeaderAndIsr
    is encoded this way once per request, so the per-field overhead matters."""
    plan = _plan(cls)
    if plan is None:
        raise WireError(f"cannot encode {cls.__name__}: not a message type of floodmark.reference.protocol.messages")
    tag = cls.__name__
    names = tuple(field.name for field in plan)
    nested = tuple(field.name for field in plan if field.kind == _NESTED)
    getter = operator.attrgetter(*names) if len(names) > 1 else None

    def encode(message: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"type": tag}
        if getter is not None:
            out.update(zip(names, getter(message)))
        elif names:
            out[names[0]] = getattr(message, names[0])
        for name in nested:
            out[name] = _encode_value(out[name])
        return out

    _ENCODERS[cls] = encode
    return encode


def _encode_value(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, tuple | list):
        return [_encode_value(v) for v in value]
    return encode_message(value)


# --------------------------------------------------------------------------- decoding


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
        raise _Mismatch(f"expected a JSON object with a 'type' tag, got {_describe(data)}")
    tag = data.get("type")
    cls = _MESSAGE_TYPES.get(tag) if isinstance(tag, str) else None
    plan = _plan(cls) if cls is not None else None
    if cls is None or plan is None:
        raise _Mismatch(f"unknown message type {_quoted(tag)}")
    kwargs: dict[str, Any] = {}
    for field in plan:
        value = data.get(field.name, _ABSENT)
        if value is _ABSENT:
            if field.required:
                raise _Mismatch(f"{tag} is missing field {field.name!r}")
            continue
        if type(value) in field.exact:  # the common case, without a call
            kwargs[field.name] = value
            continue
        try:
            kwargs[field.name] = field.decode(value)
        except _Mismatch as e:
            e.path.append(f".{field.name}")
            raise
    if len(kwargs) != len(data) - 1:
        extra = sorted(k for k in data if k != "type" and k not in kwargs)
        raise _Mismatch(f"{tag} has no field {_quoted(extra[0])}")
    return cls(**kwargs)


Decoder = Callable[[Any], Any]

_PLAIN, _PLAIN_TUPLE, _NESTED = 0, 1, 2  # how a field is encoded


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    decode: Decoder
    required: bool
    kind: int
    exact: tuple[type, ...] = ()  # JSON types taken as they are (plain fields not turned into floats)


_ABSENT = object()


_MESSAGE_TYPES: dict[str, type] = messages.message_types()
_PLANS: dict[type, tuple[_Field, ...]] = {}
_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def register_message_type(cls: type) -> None:
    """Let the codec carry a message class defined outside ``messages`` (a frozen dataclass)."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    known = _MESSAGE_TYPES.get(cls.__name__)
    if known is not None and known is not cls:
        raise ValueError(f"another message type is already called {cls.__name__}")
    _MESSAGE_TYPES[cls.__name__] = cls


def _plan(cls: type) -> tuple[_Field, ...] | None:
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
                   _encoding_kind(hints[f.name]), _exact_types(hints[f.name]))
            for f in dataclasses.fields(cls)
        )
        _PLANS[cls] = plan
    return plan


def _bounded_wait(name: str, decode: Decoder) -> Decoder:
    def bounded(v: Any) -> Any:
        value = decode(v)
        if isinstance(value, int | float) and not 0 <= value <= MAX_WAIT_SECONDS:
            raise _Mismatch(f"{name} must be from 0 to {MAX_WAIT_SECONDS:g} seconds, got {_describe(v)}")
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


def _encoding_kind(hint: Any) -> int:
    if _plain_types(hint) is not None:
        return _PLAIN
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and all(a is Ellipsis or _plain_types(a) is not None for a in args):
        return _PLAIN_TUPLE
    return _NESTED


def _decoder_for(hint: Any) -> Decoder:
    """A function checking (and converting) one JSON value against a type hint."""
    if hint is Any:
        return lambda v: v
    plain = _plain_types(hint)
    if plain is not None:
        return _plain_decoder(hint, plain)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if len(args) == 2 and type(None) in args:  # X | None: no need to try X on a null
            inner = _decoder_for(args[0] if args[1] is type(None) else args[1])
            return lambda v: None if v is None else _or_describe(inner, v, hint)
        options = [_decoder_for(h) for h in args]
        return lambda v: _first_that_fits(options, v, hint)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return _list_decoder(_decoder_for(args[0]), _plain_types(args[0]))
        items = [_decoder_for(a) for a in args]
        return lambda v: _fixed_tuple(items, v)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return lambda v: _expect_message(hint, v)
    raise TypeError(f"wire codec cannot handle type hint {hint!r}")


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
        raise _Mismatch(f"expected {expected}, got {_describe(v)}" if expected
                        else f"{_describe(v)} does not fit {hint}")

    return decode


_FLOAT_INT = 2**63


def _list_decoder(item: Decoder, plain: tuple[type, ...] | None) -> Decoder:
    def decode(v: Any) -> tuple[Any, ...]:
        if type(v) is not list:
            raise _Mismatch(f"expected a list, got {_describe(v)}")
        if plain is not None and float not in plain and all(type(x) in plain for x in v):
            return tuple(v)  # the common case, checked in one pass
        return _decode_each(itertools.repeat(item), v)

    return decode


def _fixed_tuple(items: list[Decoder], v: Any) -> tuple[Any, ...]:
    if type(v) is not list:
        raise _Mismatch(f"expected a list, got {_describe(v)}")
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
    raise _Mismatch(f"{_describe(v)} does not fit {hint}")


def _or_describe(decode: Decoder, v: Any, hint: Any) -> Any:
    try:
        return decode(v)
    except _Mismatch:
        raise _Mismatch(f"{_describe(v)} does not fit {hint}") from None


def _quoted(name: Any) -> str:
    """A name from the frame, quoted and cut short: a peer chooses its length."""
    text = repr(name)
    return text if len(text) <= 40 else text[:37] + "..."


def _describe(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, str | int | float | bool | type(None)) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- frames


def encode_frame(correlation_id: int, message: Any) -> bytes:
    """A complete frame: the length prefix and the JSON payload."""
    payload = b'{"id":%d,"body":%b}' % (correlation_id, _encoded_body(message))
    if len(payload) > MAX_FRAME_BYTES:
        raise WireError(f"frame of {len(payload)} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    return LENGTH_PREFIX.pack(len(payload)) + payload


# The controller sends one UpdateMetadata object to every broker: a large body is encoded
# once and reused while it is recent. Messages are frozen, so the same object always encodes
# the same; holding the object keeps its identity from being reused.
_SHARED_BODY_MIN_BYTES = 64 * 1024
_recent_bodies: collections.deque[tuple[Any, bytes]] = collections.deque(maxlen=4)


def _encoded_body(message: Any) -> bytes:
    for known, body in _recent_bodies:
        if known is message:
            return body
    body = _dumps(encode_message(message))
    if len(body) >= _SHARED_BODY_MIN_BYTES:
        _recent_bodies.append((message, body))
    return body


def frame_length(prefix: bytes) -> int:
    """The payload length announced by a 4-byte prefix; refuses oversized frames."""
    (length,) = LENGTH_PREFIX.unpack(prefix)
    if length > MAX_FRAME_BYTES:
        raise WireError(f"frame announces {length} bytes, over the limit of {MAX_FRAME_BYTES}")
    return int(length)


def _dumps(data: Any) -> bytes:
    if orjson is not None:
        try:
            return orjson.dumps(data)
        except TypeError:  # orjson.JSONEncodeError: let the standard library decide
            pass
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(payload: bytes) -> Any:
    """The JSON of a frame, fit for the protocol: nested at most :data:`MAX_NESTING` deep,
    numbers finite, integers of at most 400 digits, strings Unicode text (a peer may send anything)."""
    try:
        value, strict = fast_json.parse(payload)
    except UnicodeDecodeError as e:
        raise WireError(f"frame is not UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise WireError(f"frame is not valid JSON ({e.msg} at character {e.pos})") from None
    except RecursionError:
        raise WireError(f"frame is nested more than {MAX_NESTING} levels deep") from None
    except ValueError as e:  # an integer literal past Python's conversion limit
        raise WireError(f"frame holds an unusable number ({str(e)[:80]})") from None
    # orjson took only finite numbers, 64-bit integers and Unicode text, so what it parsed
    # needs only its depth checked (over containers: a LeaderAndIsr of 10,000 partitions has
    # a million scalars); what the standard library parsed is checked whole.
    problem = value_problem(value, MAX_NESTING) if not strict else (
        nesting_problem(value, MAX_NESTING) if payload.count(b"[") + payload.count(b"{") > MAX_NESTING else None)
    if problem:
        raise WireError(f"frame holds {problem}")
    return value


def decode_payload(payload: bytes) -> tuple[int, Any]:
    """The (correlation id, message) of one frame's payload."""
    return _frame(_loads(payload))


def _frame(data: Any) -> tuple[int, Any]:
    if not isinstance(data, dict) or set(data) != {"id", "body"}:
        raise WireError("frame must be a JSON object with exactly the keys 'id' and 'body'")
    correlation_id = data["id"]
    if type(correlation_id) is not int:
        raise WireError(f"frame.id: expected an integer, got {_describe(correlation_id)}")
    return correlation_id, decode_message(data["body"], "frame.body")


def round_trip(message: Any) -> Any:
    """Encode and decode a message (the simulated network uses this to check messages):
    the same JSON writer and parser as frames on a real connection, so what a real
    connection refuses fails in the simulation too."""
    return decode_message(_loads(_dumps(encode_message(message))))
