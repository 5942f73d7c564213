"""A send naming a partition the run does not have is a malformed op (unknown, naming the op);
a value read in a partition other than the (real) one it was sent to is an anomaly (invalid)."""

from __future__ import annotations

from typing import Any

import pytest
from checkers_fixtures import History
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.checkers.queue import QueueChecker
from floodmark.checkers.queue_index import build_index, index_for
from floodmark.contracts.results import CheckerResult
from floodmark.contracts.run_config import TestConfig

CONFIG = TestConfig(acks="all", topics=1, partitions=3)


def judged(h: History, config: TestConfig | None = CONFIG) -> dict[str, CheckerResult]:
    run = CheckInput(h.ops, {}, config)
    return {"queue": QueueChecker().check(run), "durability": DurabilityChecker().check(run)}


def sent_elsewhere(partition: Any, *, drained: bool = True) -> History:
    """v0 sent to ``partition`` of t0 and acknowledged there, then read at offset 0 of t0/0."""
    h = History()
    h.send(0, partition, "v0", 0)
    h.poll(1, 0, 0, [(0, "v0")])
    if drained:
        h.poll(2, 0, 0, [(0, "v0")], f="drain")
    return h


@pytest.mark.parametrize("partition", [7, 3, "x", None, -1, 1.0, True])
def test_a_send_to_a_partition_the_run_does_not_have_is_malformed_not_an_unexpected_read(partition: Any) -> None:
    # Before: queue INVALID (1 unexpected), the read of v0 in t0/0 taken for a record from nowhere.
    results = judged(sent_elsewhere(partition))
    for name, result in results.items():
        assert result.valid == "unknown", (name, result.anomalies)
        assert result.anomalies == [], name
        malformed = result.stats["malformed_ops"]
        assert malformed[0]["op"] == 0, malformed  # the send's invocation is named
        assert "partition" in malformed[0]["problem"]


def test_the_malformed_send_names_what_the_run_has() -> None:
    problem = judged(sent_elsewhere(7))["queue"].stats["malformed_ops"][0]["problem"]
    assert "t0/7" in problem and "test.yaml states 1 topic of 3 partitions" in problem


def test_a_read_in_another_partition_than_the_real_one_sent_to_is_unexpected() -> None:
    # Sent to t0/1 (which the run has), read in t0/0: a real anomaly.
    result = judged(sent_elsewhere(1))["queue"]
    assert result.valid is False
    assert [a.type for a in result.anomalies] == ["unexpected"]
    assert result.anomalies[0].partition == 0 and "malformed_ops" not in result.stats


def test_a_topic_the_run_does_not_have_is_malformed_too() -> None:
    h = History()
    h.send(0, 0, "v0", 0, topic="t5")
    h.poll(1, 0, 0, [(0, "v0")])
    result = judged(h)["queue"]
    assert result.valid == "unknown" and "t5/0" in result.stats["malformed_ops"][0]["problem"]


def test_a_poll_of_a_partition_the_run_does_not_have_is_malformed_and_read_in_no_order() -> None:
    h = History()
    h.send(0, 0, "v0", 0)
    h.poll(1, 9, 0, [(0, "v0"), (5, "v9")])
    h.poll(2, 0, 0, [(0, "v0")], f="drain")
    result = judged(h)["queue"]
    assert result.valid == "unknown" and result.anomalies == []
    assert "t0/9" in result.stats["malformed_ops"][0]["problem"]


def test_a_failed_send_to_a_partition_the_run_does_not_have_is_no_aborted_read() -> None:
    h = History()
    h.send(0, 7, "v0", None, outcome="fail")
    h.poll(1, 0, 0, [(0, "v0")])
    h.poll(2, 0, 0, [(0, "v0")], f="drain")
    result = judged(h)["queue"]
    assert result.valid == "unknown" and result.anomalies == []


def test_a_history_that_states_no_configuration_is_held_to_none() -> None:
    result = judged(sent_elsewhere(7), None)["queue"]
    assert result.valid is False and [a.type for a in result.anomalies] == ["unexpected"]


def test_the_index_is_built_again_for_another_configuration() -> None:
    h = sent_elsewhere(7)
    assert not index_for(h.ops, None).malformed
    assert index_for(h.ops, CONFIG).malformed
    assert not build_index(h.ops).malformed


@settings(max_examples=60, deadline=None)
@given(st.integers(-3, 12), st.integers(1, 4), st.sampled_from(("ok", "info", "fail")))
def test_property_a_send_is_placed_only_in_a_partition_the_run_has(partition: int, partitions: int,
                                                                  outcome: str) -> None:
    """Whatever partition a send names, the verdict is never valid unless the run has it, and
    never invalid for reading its value in partition 0 unless it names a real other one."""
    config = TestConfig(acks="all", topics=1, partitions=partitions)
    h = History()
    h.send(0, partition, "v0", 0 if outcome == "ok" else None, outcome=outcome)
    h.poll(1, 0, 0, [(0, "v0")])
    h.poll(2, 0, 0, [(0, "v0")], f="drain")
    result = judged(h, config)["queue"]
    if not 0 <= partition < partitions:
        assert result.valid == "unknown" and result.stats["malformed_ops"][0]["op"] == 0
    elif partition == 0:
        assert result.valid is (outcome != "fail")  # a failed send read back is G1a
    else:
        assert result.valid is False
