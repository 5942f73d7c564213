"""fast_frozen_init: an instance is what the generated frozen ``__init__`` would have built.

Each case declares the same class twice, once with the dataclass's own ``__init__`` and once
with :func:`fast_frozen_init`'s, and compares what construction stores (values, their
order in ``__dict__``, slots), how it fails and what stays frozen.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from floodmark.contracts.history import Op
from floodmark.contracts.node_event_kinds import Appended
from floodmark.frozen_init import fast_frozen_init
from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol.zk_layout import LeaderIsr
from floodmark.reference.runtime import Stat


def state(obj: Any) -> list[tuple[str, Any]]:
    """Everything an instance holds, in storage order."""
    if hasattr(obj, "__dict__"):
        return list(vars(obj).items())
    return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]


def twins(decorate: Any) -> tuple[type, type]:
    return decorate(), fast_frozen_init(decorate())


def plain() -> type:
    @dataclass(frozen=True)
    class Plain:
        a: int
        b: str
        c: tuple[int, ...] = ()
        d: int | None = None
        e: list[int] = field(default_factory=list)

    return Plain


def slotted() -> type:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Base:
        topic: str
        partition: int

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Slotted(Base):
        offset: int
        values: dict[str, int] = field(default_factory=dict)
        note: str = "x"

    return Slotted


def mixed() -> type:
    @dataclass(frozen=True, slots=True)
    class Base:
        a: int

    @dataclass(frozen=True)
    class Mixed(Base):  # no slots of its own: b lives in __dict__, a in its base's slot
        b: int = 2

    return Mixed


@pytest.mark.parametrize("args, kwargs", [((1, "x"), {}), ((1, "x", (2,)), {"d": 4}),
                                          ((), {"b": "y", "a": 3, "e": [1]})])
def test_positional_and_keyword_arguments_store_the_same_values_in_the_same_order(
        args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    generated, fast = twins(plain)
    expected, got = generated(*args, **kwargs), fast(*args, **kwargs)
    assert state(got) == state(expected)
    assert [k for k, _ in state(got)] == ["a", "b", "c", "d", "e"]
    assert repr(got).replace(fast.__qualname__, "") == repr(expected).replace(generated.__qualname__, "")


def test_default_factories_give_each_instance_its_own_value() -> None:
    _, fast = twins(plain)
    first, second = fast(1, "x"), fast(1, "x")
    assert first.e == [] and first.e is not second.e


def test_slots_and_inherited_slots_are_filled_through_their_descriptors() -> None:
    generated, fast = twins(slotted)
    expected = generated(topic="t", partition=1, offset=5)
    got = fast(topic="t", partition=1, offset=5)
    assert not hasattr(got, "__dict__")
    assert state(got) == state(expected)
    assert fast(topic="t", partition=1, offset=5, values={"a": 1}).values == {"a": 1}


def test_a_class_with_slots_and_a_dict_fills_each_where_it_lives() -> None:
    generated, fast = twins(mixed)
    assert state(fast(1)) == state(generated(1)) == [("b", 2)]
    assert fast(1).a == 1


@pytest.mark.parametrize("make, call", [
    (plain, lambda c: c()),
    (plain, lambda c: c(1, "x", (), None, [], 6)),
    (plain, lambda c: c(1, "x", z=1)),
    (plain, lambda c: c(1, a=1)),
    (slotted, lambda c: c("t", 1, 5)),
    (slotted, lambda c: c(topic="t", partition=1)),
])
def test_wrong_arguments_fail_as_with_the_generated_init(make: Any, call: Any) -> None:
    generated, fast = twins(make)
    with pytest.raises(TypeError):
        call(generated)
    with pytest.raises(TypeError):
        call(fast)


def test_instances_stay_frozen_comparable_hashable_and_picklable() -> None:
    _, fast = twins(slotted)
    one = fast(topic="t", partition=1, offset=5, values={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.offset = 6  # type: ignore[attr-defined]
    assert one == fast(topic="t", partition=1, offset=5)
    record = m.Record(3, 1, "v")
    assert hash(record) == hash(m.Record(3, 1, "v"))
    assert pickle.loads(pickle.dumps(record)) == record
    assert dataclasses.replace(record, offset=4) == m.Record(4, 1, "v")


def test_post_init_runs() -> None:
    seen: list[int] = []

    @fast_frozen_init
    @dataclass(frozen=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            seen.append(self.a)

    Checked(7)
    assert seen == [7]


def test_what_it_cannot_reproduce_is_refused_at_decoration() -> None:
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class Hidden:
        a: int
        b: int = field(default=0, init=False)

    @dataclass(frozen=True)
    class WithInitVar:
        a: int
        scale: dataclasses.InitVar[int] = 1

    @dataclass(frozen=True)
    class Clashing:
        self: int  # a name the generated __init__ uses itself

    for cls in (Mutable, Hidden, WithInitVar, Clashing):
        with pytest.raises(TypeError):
            fast_frozen_init(cls)


def test_the_hot_types_serialise_as_before() -> None:
    """orjson reads a dataclass's fields in declaration order, as it did."""
    response = m.FetchResponse(None, (), 4, 5, 0, 2, batch=m.RecordBatch.of([m.Record(4, 2, "v")]))
    assert orjson.dumps(response) == orjson.dumps(dataclasses.asdict(response))
    event = Appended(topic="t", partition=0, offset=3, epoch=1, values=("v",), role="leader")
    assert orjson.dumps(event) == orjson.dumps(dataclasses.asdict(event))
    op = Op(0, 5, "invoke", 1, "send", {"v": 1})
    assert op.extra == {} and op.to_dict() == {"index": 0, "time": 5, "type": "invoke", "process": 1,
                                               "f": "send", "value": {"v": 1}}


@pytest.mark.parametrize("cls", [m.PartitionState, m.BrokerInfo, m.PartitionError, LeaderIsr, Stat])
def test_what_a_failover_builds_by_the_ten_thousand_skips_object_setattr(cls: type) -> None:
    # A new controller reads, writes and sends 10,000 of each; a broker decodes as many.
    assert "__ffi_FACTORY" in cls.__init__.__globals__  # type: ignore[misc]
