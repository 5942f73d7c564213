"""Tests of the wire codec (floodmark.reference.protocol.wire)."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest

from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import wire


def sample_value(hint: Any, name: str) -> Any:
    """A non-default value for a field, so a round trip proves every field travels."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is bool:
        return True
    if hint is int:
        return 7
    if hint is float:
        return 2.5
    if hint is str:
        return f"{name}-é"
    if origin in (typing.Union, __import__("types").UnionType):
        return sample_value(next(a for a in args if a is not type(None)), name)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return (sample_value(args[0], name), sample_value(args[0], name))
        return tuple(sample_value(a, name) for a in args)
    if dataclasses.is_dataclass(hint):
        return sample_message(hint)
    raise AssertionError(f"no sample for {hint}")


def sample_message(cls: Any) -> Any:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: sample_value(hints[f.name], f.name) for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("name", sorted(m.message_types()))
def test_every_message_round_trips(name: str) -> None:
    message = sample_message(m.message_types()[name])
    assert wire.round_trip(message) == message
    correlation_id, decoded = wire.decode_payload(wire.encode_frame(99, message)[4:])
    assert (correlation_id, decoded) == (99, message)
    # Tuples come back as tuples (JSON has only lists), so messages stay hashable.
    hash(decoded)


def test_defaults_may_be_left_out_but_required_fields_may_not() -> None:
    assert wire.decode_message({"type": "FetchRequest", "topic": "t", "partition": 0, "offset": 5}) == \
        m.FetchRequest("t", 0, 5)
    with pytest.raises(wire.WireError, match="FetchRequest is missing field 'offset'"):
        wire.decode_message({"type": "FetchRequest", "topic": "t", "partition": 0})


@pytest.mark.parametrize("data, problem", [
    ([1, 2], "expected a JSON object"),
    ({"type": "Nope"}, "unknown message type 'Nope'"),
    ({"partition": 1}, "unknown message type None"),
    ({"type": "FetchRequest", "topic": "t", "partition": "0", "offset": 1}, "message.partition: expected an integer"),
    ({"type": "FetchRequest", "topic": "t", "partition": True, "offset": 1}, "message.partition: expected an integer"),
    ({"type": "FetchRequest", "topic": "t", "partition": 0, "offset": 1, "evil": 1}, "has no field 'evil'"),
    ({"type": "FetchResponse", "error": None, "records": [{"type": "Record", "offset": 1, "leader_epoch": 0}]},
     r"message.records\[0\]: Record is missing field 'value'"),
    ({"type": "FetchResponse", "error": None, "records": [{"type": "BrokerInfo", "broker_id": 1, "address": "a"}]},
     r"message.records\[0\]: expected a Record, got a BrokerInfo"),
    ({"type": "FetchResponse", "error": 5}, "message.error: 5 does not fit"),
    ({"type": "UpdateMetadataRequest", "controller_id": 1, "controller_epoch": 1, "brokers": [],
      "partitions": [], "offline_replicas": [["t", 1]]}, r"offline_replicas\[0\]: expected a list of 3 items"),
])
def test_malformed_messages_are_rejected_with_a_clear_error(data: Any, problem: str) -> None:
    with pytest.raises(wire.WireError, match=problem):
        wire.decode_message(data)


@pytest.mark.parametrize("payload, problem", [
    (b"\xff\xfe", "not UTF-8"),
    (b"{not json", "not valid JSON"),
    (b'{"id": 1}', "exactly the keys 'id' and 'body'"),
    (b'{"id": "one", "body": {"type": "MetadataRequest"}}', "frame.id: expected an integer"),
    (b'{"id": 1, "body": {"type": "Unknown"}}', "frame.body: unknown message type"),
])
def test_malformed_frames_are_rejected(payload: bytes, problem: str) -> None:
    with pytest.raises(wire.WireError, match=problem):
        wire.decode_payload(payload)


@pytest.mark.parametrize("body", ["1", '"x"', "1e400"])
def test_a_frame_nested_too_deep_is_refused_however_it_was_parsed(body: str) -> None:
    # orjson parses the first two (only the depth is checked), json the third (1e400)
    deep = b'{"id": 1, "body": ' + b"[" * wire.MAX_NESTING + body.encode() + b"]" * wire.MAX_NESTING + b"}"
    with pytest.raises(wire.WireError, match=f"nested more than {wire.MAX_NESTING} levels deep"):
        wire.decode_payload(deep)


def test_a_wide_shallow_frame_is_not_too_deep() -> None:
    states = tuple(m.PartitionState("t", p, 1, 2, (1, 2), 0, (1, 2, 3), 4) for p in range(100))
    message = m.LeaderAndIsrRequest(1, 4, 0, states, ())
    assert wire.decode_payload(wire.encode_frame(7, message)[4:]) == (7, message)


def test_oversized_frames_are_refused_from_the_prefix() -> None:
    with pytest.raises(wire.WireError, match="over the limit"):
        wire.frame_length((wire.MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
    assert wire.frame_length((1234).to_bytes(4, "big")) == 1234
    huge = m.ProduceRequest("t", 0, ("x" * 1024,) * (wire.MAX_FRAME_BYTES // 1024 + 1))
    with pytest.raises(wire.WireError, match="exceeds the limit"):
        wire.encode_frame(1, huge)


def test_only_message_types_can_be_encoded_unless_registered() -> None:
    @dataclasses.dataclass(frozen=True)
    class Probe:
        value: int

    with pytest.raises(wire.WireError, match="not a message type"):
        wire.encode_message(Probe(1))
    wire.register_message_type(Probe)
    assert wire.round_trip(Probe(3)) == Probe(3)


def test_frame_is_length_prefixed_json() -> None:
    frame = wire.encode_frame(5, m.MetadataRequest(("a",)))
    length = int.from_bytes(frame[:4], "big")
    assert length == len(frame) - 4
    assert json.loads(frame[4:]) == {"id": 5, "body": {"type": "MetadataRequest", "topics": ["a"]}}


def test_frames_round_trip_values_beyond_64_bits_and_every_unicode_value() -> None:
    # orjson refuses integers beyond 64 bits; the codec falls back to the standard library.
    big = m.ProduceResponse(None, 2 ** 70, 3, 1)
    text = m.ProduceRequest("t", 0, ("ünï ✓", "\u0000", "a\"b\\c"))
    for message in (big, text):
        frame = wire.encode_frame(9, message)
        assert wire.decode_payload(frame[4:]) == (9, message)


def test_an_optional_field_takes_null_or_a_value_that_fits() -> None:
    batch = m.RecordBatch(4, ("x", "y"), (1,), (2,))
    assert wire.round_trip(m.FetchResponse(None, batch=batch)).batch == batch
    assert wire.round_trip(m.FetchResponse(None)).batch is None
    with pytest.raises(wire.WireError, match=r"message.batch: 5 does not fit"):
        wire.decode_message({"type": "FetchResponse", "error": None, "batch": 5})


@pytest.mark.parametrize("number", [2 ** 63 - 1, -(2 ** 63) - 1, 2 ** 64, -(10 ** 30)])
def test_integers_of_any_size_decode_as_integers(number: int) -> None:
    payload = b'{"id":1,"body":{"type":"ProduceResponse","error":null,"base_offset":%d}}' % number
    assert wire.decode_payload(payload) == (1, m.ProduceResponse(None, number))


def test_a_huge_integer_in_an_untyped_field_stays_an_integer() -> None:
    @dataclasses.dataclass(frozen=True)
    class Untyped:
        payload: Any

    wire.register_message_type(Untyped)
    for value in (2 ** 64, -(2 ** 63) - 1, 0.5, (1, 2.5, "x"), ("deep", (2 ** 70, 0.25))):
        frame = wire.encode_frame(4, Untyped(value))
        (_, decoded) = wire.decode_payload(frame[4:])
        assert json.dumps(decoded.payload) == json.dumps(value)  # integers stay integers


def test_a_record_batch_holds_its_records_in_runs_of_epochs_and_gives_them_back() -> None:
    records = [m.Record(7 + i, epoch, f"v{i}") for i, epoch in enumerate((1, 1, 2, 4, 4, 4))]
    batch = m.RecordBatch.of(records)
    assert batch == m.RecordBatch(7, ("v0", "v1", "v2", "v3", "v4", "v5"), (1, 2, 4), (2, 1, 3))
    assert batch.records() == records
    assert m.RecordBatch.of(tuple(records[:1])).records() == records[:1]
    assert m.RecordBatch.of([]) == m.RecordBatch(0, (), (), ())
    assert m.RecordBatch.of([]).records() == []
