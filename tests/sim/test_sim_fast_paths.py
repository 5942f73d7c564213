"""The simulator's fast paths give what the plain paths they stand for give.

A simulated run must stay byte for byte what it was when the simulator gets cheaper, so each
shortcut taken for speed is checked here against what it replaces: node event files written
at once (``node_events.event_lines``) against one :func:`~floodmark.contracts.node_events.event_line`
per event and the encoding of ``encode_body``; the loop's ``get_debug`` and ``create_future``
against asyncio's; a CPU's price of a follower's fetch against its definition; a request's
timeout, cancelled once by its response, against the loop's count of pending timers; and the
history line the recorder writes without making an ``Op`` against the line of that ``Op``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from floodmark.contracts.history import Op
from floodmark.contracts.node_events import (
    Acked,
    Appended,
    HwChanged,
    KnownKind,
    UnknownKind,
    encode_body,
    event_line,
    event_lines,
)
from floodmark.harness.recorder import Recorder, op_line
from floodmark.reference.protocol import messages as m
from floodmark.reference.sim import SimWorld
from floodmark.reference.sim.cpu import CpuCosts
from floodmark.reference.sim.loop import VirtualTimeLoop

# Beyond 64 bits orjson refuses an integer and the standard library writes the line instead.
numbers = st.integers(-1, 2**31) | st.integers(2**63, 2**70)
names = st.text(max_size=6)
optional_numbers = st.none() | numbers
appended = st.builds(Appended, topic=names, partition=numbers, offset=numbers, epoch=numbers,
                     values=st.lists(names, max_size=3).map(tuple), role=names,
                     epochs=st.none() | st.lists(numbers, max_size=3).map(tuple))
hw_changed = st.builds(HwChanged, topic=names, partition=numbers, leader_epoch=numbers, role=names,
                       previous=numbers, high_watermark=numbers, log_end=numbers)
acked = st.builds(Acked, topic=names, partition=numbers, offset=numbers, first_offset=optional_numbers,
                  high_watermark=numbers, acks=numbers, leader_epoch=optional_numbers)
unknown = st.builds(UnknownKind, kind=st.just("from_a_newer_writer"),
                    fields=st.dictionaries(st.sampled_from(("a", "b", "seq")), numbers, max_size=3))
bodies = appended | hw_changed | acked | unknown
walls = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


def encoded(node: str, seq: int, wall: float, body: KnownKind | UnknownKind) -> bytes:
    """A line as the writer encoded every line before it had an encoder per kind."""
    record = encode_body(body, {"node": node, "seq": seq, "wall": wall, "kind": body.kind})
    try:
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return (json.dumps(record, separators=(",", ":")) + "\n").encode()


@given(names, st.integers(0, 2**40), walls, bodies)
def test_an_event_line_is_the_encoding_of_its_body_after_the_envelope(node: str, seq: int, wall: float,
                                                                      body: KnownKind | UnknownKind) -> None:
    assert event_line(node, seq, wall, body) == encoded(node, seq, wall, body)


@given(names, st.lists(st.tuples(walls, bodies), max_size=6))
def test_a_node_event_file_is_its_events_lines_numbered_from_zero(
        node: str, events: list[tuple[float, KnownKind | UnknownKind]]) -> None:
    assert event_lines(node, events) == b"".join(encoded(node, seq, wall, body)
                                                 for seq, (wall, body) in enumerate(events))


def test_the_loop_says_whether_it_debugs_as_asyncio_does_and_futures_see_it() -> None:
    loop = VirtualTimeLoop()
    try:
        assert loop.get_debug() is False
        plain = loop.create_future()
        assert plain.get_loop() is loop and plain._source_traceback is None  # type: ignore[attr-defined]
        loop.set_debug(True)
        assert loop.get_debug() is True
        # A future made while debugging keeps where it was made: asyncio's C future asks the
        # loop's get_debug() when it is made.
        assert loop.create_future()._source_traceback  # type: ignore[attr-defined]
        loop.set_debug(False)
        assert loop.get_debug() is False
        assert loop.create_future()._source_traceback is None  # type: ignore[attr-defined]
    finally:
        loop.close()


def fetched(records: int, batch: int | None) -> m.FetchResponse:
    return m.FetchResponse(None, tuple(m.Record(o, 1, "v") for o in range(records)),
                           batch=None if batch is None else m.RecordBatch(0, ("v",) * batch, (1,), (batch,)))


@given(st.lists(st.tuples(st.integers(0, 5), st.none() | st.integers(0, 5)), max_size=5))
def test_a_followers_fetch_costs_its_partitions_and_all_their_records(parts: list[tuple[int, int | None]]) -> None:
    costs = CpuCosts()
    response = m.ReplicaFetchResponse(None, tuple(m.PartitionFetchResult("t", p, fetched(records, batch))
                                                  for p, (records, batch) in enumerate(parts)))
    records = sum(records + (batch or 0) for records, batch in parts)
    assert costs.cost(response) == costs.per_message + costs.per_partition * len(parts) + costs.per_record * records


async def echo(sender: str, message: Any) -> Any:
    return m.ProduceResponse(None)


@pytest.mark.parametrize("cpu", [None, CpuCosts()])
def test_an_answered_request_leaves_no_timer_pending_and_the_count_of_pending_timers_true(cpu: CpuCosts | None) -> None:
    world = SimWorld(seed=5, cpu=cpu)
    try:
        n1, n2 = world.add_node("n1"), world.add_node("n2")
        world.run(n2.network.serve(echo))

        async def ask() -> list[Any]:
            return [await n1.network.request("n2", m.ProduceRequest("t", 0, ("v",)), 1.0) for _ in range(5)]

        assert world.run(ask()) == [m.ProduceResponse(None)] * 5
        loop = world.loop
        live = [t for _, _, t in loop._timers if isinstance(t, tuple) or not t._cancelled]
        assert loop.pending_timers() == len(live)
        world.run_for(2.0)  # past every timeout: none fires, none is left
        assert loop.pending_timers() == len([t for _, _, t in loop._timers
                                             if isinstance(t, tuple) or not t._cancelled])
    finally:
        world.close()


def test_a_request_that_times_out_still_times_out() -> None:
    world = SimWorld(seed=5)
    try:
        n1, n2 = world.add_node("n1"), world.add_node("n2")

        async def never(sender: str, message: Any) -> Any:
            await asyncio.sleep(10)

        world.run(n2.network.serve(never))
        start = world.now()
        with pytest.raises(TimeoutError):
            world.run(n1.network.request("n2", m.ProduceRequest("t", 0, ("v",)), 1.0))
        assert world.now() - start == pytest.approx(1.0)
    finally:
        world.close()


json_values = st.recursive(st.none() | st.booleans() | numbers | names | st.floats(allow_nan=False),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names | numbers, inner,
                                                                                       max_size=3),
                           max_leaves=6)


@given(st.lists(st.tuples(st.sampled_from(("invoke", "ok", "fail", "info")), st.integers(0, 9) | st.just("nemesis"),
                          names, json_values, st.none() | names, st.none() | json_values), max_size=5))
def test_a_recorded_line_is_the_line_of_the_op_it_stands_for(
        tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, Any, str, Any, Any, Any]]) -> None:
    path = tmp_path_factory.mktemp("history") / "history.jsonl"
    ticks = iter(range(0, 10**9, 1000))
    recorder = Recorder(path, clock_ns=lambda: next(ticks), durable=False)
    for type_, process, f, value, node, error in ops:
        recorder.record(type_, process, f, value, node=node, error=error)
    recorder.close()
    assert path.read_bytes() == b"".join(op_line(Op(index, 1000 * (index + 1), *op))
                                         for index, op in enumerate(ops))
