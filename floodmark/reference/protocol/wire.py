"""The wire codec: how a message becomes bytes on a connection and back.

Every message is a frozen dataclass from :mod:`floodmark.reference.protocol.messages`, so one generic
codec serves them all: a message is a JSON object carrying a ``"type"`` tag (the class name)
and its fields; nested messages are tagged objects in turn, tuples travel as JSON lists and
come back as tuples. Decoding is checked against the dataclass's type hints
(:mod:`~floodmark.reference.protocol.message_decoding`), so a peer that sends a string where
an offset belongs gets a clear :class:`WireError` naming the message and the field, instead
of a crash deep in the protocol code.

On a connection every message travels in a *frame*: a 4-byte big-endian length followed by
that many bytes of JSON ``{"id": correlation id, "body": message}``. The correlation id
pairs a response with its request, so many requests can be in flight on one connection.
Frames longer than :data:`MAX_FRAME_BYTES` are refused before they are read. A peer may
send anything, so a frame's JSON must also be fit for the protocol: nested at most
:data:`MAX_NESTING` deep, numbers finite, strings Unicode text, and a
wait (``max_wait``, ``timeout``) of at most :data:`MAX_WAIT_SECONDS`; anything else is a
:class:`WireError`, which a server answers by closing the connection with one log line.

JSON is written with orjson when it is installed (the harness has it; a broker image may
not), else with the standard library, and parsed by :mod:`floodmark.inputs.fast_json`: both ways
produce and accept the same JSON, huge integers included.
"""

from __future__ import annotations

import collections
import json
import operator
import struct
from collections.abc import Callable
from typing import Any, TypeVar

from floodmark.inputs import fast_json
from floodmark.inputs.plain_values import nesting_problem, value_problem

# The decoder's names that callers of the codec use, re-exported here.
from floodmark.reference.protocol.message_decoding import (  # noqa: F401
    MAX_NESTING,
    MAX_WAIT_SECONDS,
    NESTED,
    WireError,
    decode_message,
    describe,
    plan_of,
    register_message_type,
)

try:
    import orjson
except ImportError:  # pragma: no cover - a node without orjson uses the standard library
    orjson = None  # type: ignore[assignment]

MAX_FRAME_BYTES = 16 * 1024 * 1024
LENGTH_PREFIX = struct.Struct(">I")
R = TypeVar("R")

_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


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
    plan = plan_of(cls)
    if plan is None:
        raise WireError(f"cannot encode {cls.__name__}: not a message type of floodmark.reference.protocol.messages")
    tag = cls.__name__
    names = tuple(field.name for field in plan)
    nested = tuple(field.name for field in plan if field.kind == NESTED)
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


def _loads(payload: bytes) -> tuple[Any, bool]:
    """The JSON of a frame, and whether orjson parsed it. What orjson parsed has only finite
    numbers, 64-bit integers and Unicode text, and its depth is bounded by the schema-directed
    decoding that follows (:func:`schema_depth`); what the standard library parsed is checked
    whole here: nested at most :data:`MAX_NESTING` deep, numbers finite, integers of at most
    400 digits, strings Unicode text (a peer may send anything)."""
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
    problem = None if strict else value_problem(value, MAX_NESTING)
    if problem:
        raise WireError(f"frame holds {problem}")
    return value, strict


def _decoded(payload: bytes, decode: Callable[[Any], R]) -> R:
    """``decode`` applied to a frame's JSON. A frame it refuses that is also nested too deep
    is refused for its depth: the likelier intent of a peer that sends one."""
    value, strict = _loads(payload)
    try:
        return decode(value)
    except WireError:
        problem = nesting_problem(value, MAX_NESTING) if strict else None
        if problem:
            raise WireError(f"frame holds {problem}") from None
        raise


def decode_payload(payload: bytes) -> tuple[int, Any]:
    """The (correlation id, message) of one frame's payload."""
    return _decoded(payload, _frame)


def _frame(data: Any) -> tuple[int, Any]:
    if not isinstance(data, dict) or set(data) != {"id", "body"}:
        raise WireError("frame must be a JSON object with exactly the keys 'id' and 'body'")
    correlation_id = data["id"]
    if type(correlation_id) is not int:
        raise WireError(f"frame.id: expected an integer, got {describe(correlation_id)}")
    return correlation_id, decode_message(data["body"], "frame.body")


def round_trip(message: Any) -> Any:
    """Encode and decode a message (the simulated network uses this to check messages):
    the same JSON writer and parser as frames on a real connection, so what a real
    connection refuses fails in the simulation too."""
    return _decoded(_dumps(encode_message(message)), decode_message)
