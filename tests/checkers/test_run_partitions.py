"""How many partitions a run's node events may name (``checkers/run_partitions.py``): what
test.yaml states, more where an admin fault added some, unbounded when such a fault's
outcome is unknown; and the event reader refusing a partition beyond the bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.checkers.run_partitions import PartitionBounds, partition_bounds
from floodmark.contracts.history import NEMESIS, Op
from floodmark.contracts.node_events import NodeEventError, read_events_dir
from floodmark.contracts.run_config import TestConfig

CONFIG = TestConfig(topics=2, partitions=3)


def _admin(index: int, op_type: str, value: dict[str, Any]) -> Op:
    return Op(index, index, op_type, NEMESIS, "start-admin", value)  # type: ignore[arg-type]


def _added(topic: str, count: int, outcome: str = "ok") -> list[Op]:
    return [_admin(0, "invoke", {"fault": 0, "shape": "add-partitions", "duration": 5.0}),
            _admin(1, outcome, {"shape": "add-partitions", "partitions_before": 3, "topic": topic, "count": count,
                                "partitions": count, "led": count})]


def test_the_configured_partitions_bound_every_topic() -> None:
    assert partition_bounds(CONFIG, []) == {"t0": 3, "t1": 3}
    assert partition_bounds(None, []) is None  # a history that states no configuration: no bound


def test_an_admin_fault_that_added_partitions_raises_its_topics_bound_only() -> None:
    assert partition_bounds(CONFIG, _added("t1", 5)) == {"t0": 3, "t1": 5}
    # (another shape of admin fault adds none)
    moved = [_admin(0, "invoke", {"fault": 0, "shape": "reassign"}), _admin(1, "ok", {"shape": "reassign"})]
    assert partition_bounds(CONFIG, moved) == {"t0": 3, "t1": 3}


@pytest.mark.parametrize("outcome", ["info", None])
def test_an_add_partitions_whose_outcome_is_unknown_leaves_the_partitions_unbounded(outcome: str | None) -> None:
    ops = _added("t1", 5, outcome or "ok")
    if outcome is None:
        ops = ops[:1]  # no completion at all: the run was cut short
    else:
        ops[1] = _admin(1, "info", {"shape": "add-partitions"})
    assert partition_bounds(CONFIG, ops) is None


def test_the_bounds_are_the_same_seen_one_op_at_a_time() -> None:
    bounds = PartitionBounds(CONFIG)
    for op in _added("t0", 4):
        bounds.see(op)
    assert bounds.bounds() == partition_bounds(CONFIG, _added("t0", 4)) == {"t0": 4, "t1": 3}


def _events_dir(tmp_path: Path, topic: str, partition: int) -> Path:
    events = tmp_path / "events"
    events.mkdir(exist_ok=True)
    line = {"node": "n1", "seq": 1, "wall": 0.0, "kind": "hw_changed", "topic": topic, "partition": partition,
            "leader_epoch": 1, "role": "leader", "previous": 0, "high_watermark": 1, "log_end": 1}
    (events / "n1.jsonl").write_text(json.dumps(line) + "\n")
    return events


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
# (a partition number is 32-bit: one beyond is refused whatever the run, see test_node_event_ranges)
@given(partition=st.integers(0, 2**31 - 1) | st.integers(0, 10), bound=st.integers(1, 8))
def test_an_event_is_read_if_and_only_if_its_partition_is_within_the_bound(
        tmp_path: Path, partition: int, bound: int) -> None:
    events = _events_dir(tmp_path, "t0", partition)
    read = lambda: read_events_dir(events, topics=("t0",), partitions={"t0": bound})  # noqa: E731
    if partition < bound:
        assert [e.body.partition for e in read()["n1"]] == [partition]  # type: ignore[attr-defined]
    else:
        with pytest.raises(NodeEventError, match=f"n1.jsonl:1: hw_changed names partition {partition} of topic "
                                                 f"'t0', which never had more than {bound}"):
            read()
    # Without a bound (no configuration, or an admin fault of unknown outcome) it is read.
    assert len(read_events_dir(events, topics=("t0",))["n1"]) == 1
