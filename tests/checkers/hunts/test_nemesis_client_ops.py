"""A client's op recorded under the nemesis' name, or a poll under an assign's, is read by
no checker: never valid.

Every checker passes over the nemesis' ops as records of faults. A history that holds a
send, a poll or a log read under ``process: "nemesis"`` (an edited or hostile run directory)
showed whatever it read to nobody: a poll reading one record twice, or a read of a value
nobody appended, was VALID (found by mutating run directories).
"""

from __future__ import annotations

from checkers_fixtures import History

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.checkers.linearizability.checker import LinearizableChecker
from floodmark.checkers.queue import QueueChecker
from floodmark.contracts.run_config import TestConfig


def test_a_poll_recorded_by_the_nemesis_is_malformed_not_valid() -> None:
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", 1)
    h.poll(1, 0, 0, [(0, "a"), (1, "b")])
    h.poll("nemesis", 0, 0, [(0, "a"), (0, "a"), (1, "b")])  # reads offset 0 twice: nonmonotonic
    h.poll(2, 0, 0, [(0, "a"), (1, "b")], f="drain")
    run = CheckInput(h.ops, {}, TestConfig(topics=1, partitions=1, acks="all"))
    queue, durability = QueueChecker().check(run), DurabilityChecker().check(run)
    assert queue.valid == "unknown" and durability.valid == "unknown"
    assert "nemesis" in queue.stats["malformed_ops"][0]["problem"]


def test_a_send_recorded_by_the_nemesis_may_be_anywhere() -> None:
    h = History()
    h.send("nemesis", 0, "x", 0)
    h.poll(1, 0, 0, [(0, "x")])
    h.poll(2, 0, 0, [(0, "x")], f="drain")
    queue = QueueChecker().check(CheckInput(h.ops, {}, TestConfig(topics=1, partitions=1, acks="all")))
    assert queue.valid == "unknown" and queue.anomalies == []  # (its value read is no "unexpected")


def test_a_log_read_recorded_by_the_nemesis_is_not_valid() -> None:
    h = History()
    h.call(0, "append", {"topic": "t0", "partition": 0, "value": "a"},
           {"topic": "t0", "partition": 0, "value": "a", "offset": 0})
    h.call(1, "read", {"topic": "t0", "partition": 0, "offset": 0},
           {"topic": "t0", "partition": 0, "offset": 0, "value": "a"})
    h.call("nemesis", "read", {"topic": "t0", "partition": 0, "offset": 0},
           {"topic": "t0", "partition": 0, "offset": 0, "value": "never-appended"})
    result = LinearizableChecker(model="log").check(CheckInput(h.ops))
    assert result.valid == "unknown" and "nemesis" in result.stats["unjudged_because"]


def test_the_nemesis_own_ops_change_nothing() -> None:
    h = History()
    h.call("nemesis", "start-partition", {"shape": "halves"}, {"cut": []})
    h.call(0, "append", {"topic": "t0", "partition": 0, "value": "a"},
           {"topic": "t0", "partition": 0, "value": "a", "offset": 0})
    h.call(1, "read", {"topic": "t0", "partition": 0, "offset": 0},
           {"topic": "t0", "partition": 0, "offset": 0, "value": "a"})
    assert LinearizableChecker(model="log").check(CheckInput(h.ops)).valid is True


def test_a_poll_renamed_assign_is_malformed_not_valid() -> None:
    # The same blind spot under another name (the run-directory hunt's leftover): an assign's
    # value names positions; one that holds a poll's batch of records showed what it read
    # to nobody (reading offset 0 twice here), and the run was VALID.
    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", 1)
    h.poll(1, 0, 0, [(0, "a"), (0, "a"), (1, "b")], f="assign")
    h.poll(2, 0, 0, [(0, "a"), (1, "b")], f="drain")
    run = CheckInput(h.ops, {}, TestConfig(topics=1, partitions=1, acks="all"))
    queue = QueueChecker().check(run)
    assert queue.valid == "unknown"
    assert "assign op holds records" in queue.stats["malformed_ops"][0]["problem"]
    h = History()  # an assign of positions, as a consumer makes one: nothing wrong
    h.send(0, 0, "a", 0)
    h.call(1, "assign", [{"topic": "t0", "partition": 0, "offset": 0}], [{"topic": "t0", "partition": 0, "offset": 0}])
    h.poll(1, 0, 0, [(0, "a")])
    h.poll(2, 0, 0, [(0, "a")], f="drain")
    assert QueueChecker().check(CheckInput(h.ops, {}, TestConfig(topics=1, partitions=1, acks="all"))).valid is True
