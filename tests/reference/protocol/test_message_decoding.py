"""Tests of type-directed decoding (floodmark.reference.protocol.message_decoding): the quick
path for complete objects decides as the field-by-field path does, and the schema, not a
walk over each frame, bounds how deep an accepted frame nests."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.inputs.plain_values import nesting_problem
from floodmark.reference.protocol import message_decoding as decoding
from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import wire


def outcome(decode: Any, data: Any) -> Any:
    """The message, or the one-line problem, that ``decode`` makes of ``data``."""
    try:
        return decode(data)
    except wire.WireError as e:
        return str(e)


def field_by_field(data: Any) -> Any:
    """The general path alone (what the decoder did before it had a quick path)."""
    try:
        shape = decoding._shape_for(data.get("type"))
        return decoding._decode_fields(shape, data)
    except decoding._Mismatch as e:
        raise wire.WireError(f"message{''.join(reversed(e.path))}: {e.problem}") from None


STATE = wire.encode_message(m.PartitionState("t", 3, 1, 4, (1, 2), 9, (1, 2, 3), 5, elr=(3,)))
ODD_VALUES = st.sampled_from([None, True, 1.5, -1, "x", [], [1, True], [1, "2"], {"type": "TopicPartition"},
                              [[1]], 2 ** 70])


@settings(max_examples=300, deadline=None)
@given(changes=st.lists(st.tuples(st.sampled_from([*STATE, "extra"]), st.one_of(ODD_VALUES, st.none())),
                        max_size=3),
       dropped=st.sets(st.sampled_from([k for k in STATE if k != "type"]), max_size=2))
def test_the_quick_path_decides_as_the_field_by_field_path(changes: list[tuple[str, Any]], dropped: set[str]) -> None:
    data = dict(STATE)
    for key, value in changes:
        data[key] = value
    for key in dropped:
        data.pop(key, None)
        data.setdefault("extra", 1)  # as many keys as before, one of them wrong
    assert outcome(wire.decode_message, data) == outcome(field_by_field, data)


def test_every_message_type_nests_less_than_a_frame_may() -> None:
    for cls in m.message_types().values():
        assert decoding.schema_depth(cls) < wire.MAX_NESTING, cls
    # request, its list of partitions, a partition's state, its ISR: as deep as the JSON goes
    request = m.LeaderAndIsrRequest(1, 4, 0, (m.PartitionState("t", 0, 1, 2, (1, 2), 0, (1, 2), 4),), ())
    assert decoding.schema_depth(m.LeaderAndIsrRequest) == 4
    as_json = json.loads(json.dumps(wire.encode_message(request)))
    assert nesting_problem(as_json, 4) is None
    assert nesting_problem(as_json, 3) is not None


@dataclasses.dataclass(frozen=True)
class Chain:
    rest: tuple[Chain, ...]


@dataclasses.dataclass(frozen=True)
class LooselyTyped:
    payload: Any


wire.register_message_type(LooselyTyped)


def test_a_type_that_holds_itself_cannot_be_registered() -> None:
    with pytest.raises(TypeError, match="holds itself"):
        wire.register_message_type(Chain)


def test_a_valid_frame_is_decoded_without_walking_its_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    def walked(*args: Any) -> str:
        raise AssertionError("a frame the schema accepts needs no nesting walk")

    monkeypatch.setattr(wire, "nesting_problem", walked)
    states = tuple(m.PartitionState("t", p, 1, 2, (1, 2), 0, (1, 2, 3), 4) for p in range(50))
    message = m.LeaderAndIsrRequest(1, 4, 0, states, (m.BrokerInfo(1, "h:1"),), is_init=True)
    assert wire.decode_payload(wire.encode_frame(3, message)[4:]) == (3, message)
    assert wire.round_trip(message) == message


@pytest.mark.parametrize("body", [
    '{"type": "MetadataRequest", "topics": %s"t"%s}',  # deep where a list of strings belongs
    '{"type": "LooselyTyped", "payload": %s1%s}',  # deep in a field the schema does not bound
])
def test_a_value_nested_too_deep_inside_a_message_is_refused(body: str) -> None:
    depth = wire.MAX_NESTING + 1
    payload = ('{"id": 1, "body": ' + body % ("[" * depth, "]" * depth) + "}").encode()
    with pytest.raises(wire.WireError, match=f"nested more than {wire.MAX_NESTING} levels deep"):
        wire.decode_payload(payload)


def test_a_shallow_untyped_value_is_taken_as_it_came() -> None:
    assert wire.decode_message({"type": "LooselyTyped", "payload": [[1, {"a": [2]}]]}).payload == [[1, {"a": [2]}]]
