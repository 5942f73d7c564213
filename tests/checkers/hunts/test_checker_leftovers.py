"""Four checker findings that earlier oracle hunts left open, each with its regression.

- hw: a node whose event file has no ``started`` event at all (event sets cut down by hand)
  made every broker restart in one leader epoch look like an ``hw-decrease`` (a restarted
  broker recovers its HW from a checkpoint that may lag). Now a restart is also told by
  ``stopped`` and by a log recovered at start-up, and a decrease the events cannot tell from
  a restart is held unproven (unknown), while one the broker states itself stays invalid.
- invariants: two files that do not state their broker id, both inferred to be one broker,
  made the file whose name sorts last that broker (the verdict depended on file names), and
  a guess could beat a file that states the id. Now such a broker is ambiguous (its ISR
  memberships unjudged) and a stated id wins over a guess.
- queue: a failed send of v to partition 1, with v read in partition 0, was G1a; Jepsen's
  ``g1a-cases`` keeps failed writes per key, so it is ``unexpected``, as a read of a value
  sent (successfully) to another partition is.
- leader: epoch regressions were judged against the last epoch seen, not the highest:
  epochs 3, 1, 2 gave one finding (3 to 1), missing the step from 3 back to 2.
"""

from __future__ import annotations

import dataclasses

from checkers_fixtures import History, events
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.checkers.api import CheckInput
from floodmark.checkers.queue import QueueChecker
from floodmark.checkers.white_box.hw import HighWatermarkChecker
from floodmark.checkers.white_box.invariants import InvariantsChecker
from floodmark.checkers.white_box.leader import LeaderChecker
from floodmark.contracts.node_events import (
    Acked,
    Appended,
    BecameFollower,
    BecameLeader,
    ControllerElected,
    HwChanged,
    KnownKind,
    LeaderElected,
    Started,
    Stopped,
    Truncated,
)
from floodmark.contracts.results import CheckerResult
from floodmark.contracts.run_config import TestConfig

# --------------------------------------------------------------------------- hw


def _hw(previous: int, new: int, epoch: int = 1) -> HwChanged:
    return HwChanged(topic="t0", partition=0, leader_epoch=epoch, role="follower", previous=previous,
                     high_watermark=new, log_end=1000)


def _check_hw(*bodies: KnownKind) -> CheckerResult:
    config = TestConfig(acks="all", min_insync_replicas=1, nodes=1)
    return HighWatermarkChecker().check(CheckInput([], {"n1": events("n1", *bodies)}, config))


def test_a_restart_in_a_file_without_started_is_no_proven_hw_decrease() -> None:
    # A follower in epoch 1 reaches HW 5; the broker restarts (its started event cut from the
    # file), recovers HW 3 from its checkpoint and fetches to 4. Old: hw-decrease 5 -> 4, INVALID.
    result = _check_hw(_hw(0, 5), _hw(3, 4))
    assert result.anomalies == []
    assert result.valid == "unknown"
    assert result.stats["unproven_decreases"] == {"n1": 1}
    assert "no process start" in result.stats["unjudged_because"]


def test_a_restart_told_by_stopped_or_by_recovery_starts_afresh() -> None:
    stopped = _check_hw(_hw(0, 5), Stopped(), _hw(3, 4))
    assert stopped.valid is True and stopped.anomalies == []
    recovered = Appended(topic="t0", partition=0, offset=3, epoch=1, values=("v3",), role="recovery")
    assert _check_hw(_hw(0, 5), recovered, _hw(3, 4)).valid is True
    truncated = Truncated(topic="t0", partition=0, leader_epoch=-1, from_offset=5, to_offset=3, reason="recovery")
    assert _check_hw(_hw(0, 5), truncated, _hw(3, 4)).valid is True


def test_a_decrease_within_one_process_stays_invalid() -> None:
    # The broker says itself that it went down from 5 (the HW last seen): no restart between.
    stated = _check_hw(_hw(0, 5), _hw(5, 4))
    assert stated.valid is False and [a.type for a in stated.anomalies] == ["hw-decrease"]
    # A file that shows its starts: no started between the two, so no restart either.
    told = _check_hw(Started(broker=1), _hw(0, 5), _hw(3, 4))
    assert told.valid is False and [a.type for a in told.anomalies] == ["hw-decrease"]
    # A became_leader below the HW it set earlier in the same epoch, in a file with starts.
    leader = BecameLeader(topic="t0", partition=0, leader_epoch=1, isr=(1,), log_end=10, high_watermark=2)
    assert _check_hw(Started(broker=1), _hw(0, 5), leader).valid is False


# Each process: (HW recovered from the checkpoint, below what the last one reached by this
# much; the increments it then makes; where it lowers its HW by one step, if it does).
_PROCESS = st.tuples(st.integers(0, 3), st.lists(st.integers(1, 4), min_size=1, max_size=4),
                     st.one_of(st.none(), st.integers(0, 3)))


@settings(max_examples=200, deadline=None)
@given(processes=st.lists(_PROCESS, min_size=1, max_size=4), with_started=st.booleans())
def test_restarts_never_make_invalid_and_a_decrease_in_one_process_always_does(
        processes: list[tuple[int, list[int], int | None]], with_started: bool) -> None:
    """One follower in leader epoch 1, restarted between processes (each recovers a HW at
    or below where the last one stopped). With or without its started events, the restarts
    are never an hw-decrease; a step down within one process always is."""
    bodies: list[KnownKind] = []
    hw = 0
    decreased = False
    for lag, steps, drop_at in processes:
        if with_started:
            bodies.append(Started(broker=1))
        hw = max(0, hw - lag)  # the checkpoint, which may lag
        for i, step in enumerate(steps):
            bodies.append(_hw(hw, hw + step))
            hw += step
            if drop_at == i:
                bodies.append(_hw(hw, hw - 1))
                hw -= 1
                decreased = True
    result = _check_hw(*bodies)
    found = [a.type for a in result.anomalies]
    if decreased:
        assert result.valid is False and set(found) == {"hw-decrease"}
    else:
        assert found == [] and result.valid is not False
        if with_started or len(processes) == 1:
            assert result.valid is True


# --------------------------------------------------------------------------- invariants



def _invariants_run(stated_n1: bool, other_name: str) -> CheckerResult:
    """Broker 1 (file n1) leads t0/0 with ISR [1, 2] and commits v1; broker 2 (file n2, named)
    holds it. A third file, ``other_name``, leads t0/1 with ISR [1, 3] and no records: it
    is broker 3, but, not stating it, its name's digit and its ISR guess broker 1."""
    n1: list[KnownKind] = [
        Started(broker=1 if stated_n1 else None),
        BecameLeader(topic="t0", partition=0, leader_epoch=0, isr=(1, 2), log_end=0, high_watermark=0),
        Appended(topic="t0", partition=0, offset=0, epoch=0, values=("v1",), role="leader"),
        HwChanged(topic="t0", partition=0, leader_epoch=0, role="leader", previous=0, high_watermark=1, log_end=1),
        Acked(topic="t0", partition=0, offset=0, first_offset=0, high_watermark=1, acks=-1, leader_epoch=0)]
    n2: list[KnownKind] = [
        Started(broker=None),
        BecameFollower(topic="t0", partition=0, leader_epoch=0, leader=1, log_end=0),
        Appended(topic="t0", partition=0, offset=0, epoch=0, values=("v1",), role="follower", epochs=(0,))]
    other: list[KnownKind] = [
        Started(broker=None),
        BecameLeader(topic="t0", partition=1, leader_epoch=0, isr=(1, 3), log_end=0, high_watermark=0)]
    h = History()
    h.send(0, 0, "v1", 0)
    config = TestConfig(cluster="sim", nodes=3, topics=1, partitions=2, replication_factor=3,
                        min_insync_replicas=2)
    files = {"n1": events("n1", *n1), "n2": events("n2", *n2), other_name: events(other_name, *other)}
    return InvariantsChecker().check(CheckInput(h.ops, files, config))


def test_a_broker_two_files_are_guessed_to_be_is_ambiguous_whatever_their_names() -> None:
    # Old: file x1 (sorting after n1) was taken for broker 1, whose commit of v1 it lacks:
    # isr-member-lacks-committed, INVALID; named a1 (sorting before n1), the run was not.
    verdicts = {}
    for name in ("a1", "x1"):
        result = _invariants_run(stated_n1=False, other_name=name)
        assert [a.type for a in result.anomalies] == []
        assert result.stats["brokers_ambiguous"] == {"1": sorted(["n1", name])}
        assert 1 in result.stats["isr_members_unjudged"]
        assert "nothing tells which is it" in result.stats["unjudged_because"]
        verdicts[name] = result.valid
    assert verdicts == {"a1": "unknown", "x1": "unknown"}


def test_a_stated_broker_id_wins_over_a_guess() -> None:
    # Old: n1 says it is broker 1, yet x1's guess (sorting last) took broker 1 over: INVALID.
    for name in ("a1", "x1"):
        result = _invariants_run(stated_n1=True, other_name=name)
        assert [a.type for a in result.anomalies] == []
        assert "brokers_ambiguous" not in result.stats
        assert 1 not in result.stats.get("isr_members_unjudged", [])


# --------------------------------------------------------------------------- queue


def _queue(h: History) -> CheckerResult:
    return QueueChecker().check(CheckInput(h.ops, {}, TestConfig(topics=1, partitions=2, acks="all")))


def test_a_value_failed_to_one_partition_and_read_in_another_is_unexpected() -> None:
    h = History()
    h.send(0, 1, "v", None, outcome="fail")  # sent to partition 1, definitely failed
    h.send(0, 0, "w", 0)
    h.poll(1, 0, 0, [(0, "w"), (1, "v")], f="drain")  # ... and read in partition 0
    h.poll(2, 1, 0, [], f="drain")
    # Old: G1a (the failed send's value read), though partition 0 was never sent v.
    assert [(a.type, a.partition, a.offsets) for a in _queue(h).anomalies] == [("unexpected", 0, (1,))]
    ok_elsewhere = History()  # the same with the send to partition 1 acknowledged: unexpected, as before
    ok_elsewhere.send(0, 1, "v", 0)
    ok_elsewhere.send(0, 0, "w", 0)
    ok_elsewhere.poll(1, 0, 0, [(0, "w"), (1, "v")], f="drain")
    ok_elsewhere.poll(2, 1, 0, [(0, "v")], f="drain")
    assert [a.type for a in _queue(ok_elsewhere).anomalies] == ["unexpected"]


def test_a_value_failed_to_its_own_partition_is_still_g1a() -> None:
    h = History()
    h.send(0, 0, "v", None, outcome="fail")
    h.send(0, 1, "v", None, outcome="fail")
    h.poll(1, 0, 0, [(0, "v")], f="drain")
    h.poll(2, 1, 0, [], f="drain")
    assert [(a.type, a.partition) for a in _queue(h).anomalies] == [("G1a", 0)]


# --------------------------------------------------------------------------- leader


def _follow(epoch: int) -> BecameFollower:
    return BecameFollower(topic="t0", partition=0, leader_epoch=epoch, leader=2, log_end=0)


def _leader_check(node_events: dict[str, list[KnownKind]]) -> CheckerResult:
    config = dataclasses.replace(TestConfig(), nodes=len(node_events))
    return LeaderChecker().check(CheckInput([], {n: events(n, *b) for n, b in node_events.items()}, config))


def test_each_step_back_below_the_highest_epoch_is_a_regression() -> None:
    # Old: 3, 1, 2 gave one finding (3 to 1); the broker also went back from 3 to 2.
    result = _leader_check({"n1": [_follow(3), _follow(1), _follow(2)]})
    found = [(a.details["from_epoch"], a.details["to_epoch"]) for a in result.anomalies if a.type == "epoch-regression"]
    assert found == [(3, 1), (3, 2)]
    # Staying at the old epoch is one step, not two; going forward again is none.
    same = _leader_check({"n1": [_follow(3), _follow(1), _follow(1), _follow(4), _follow(5)]})
    assert [a.details["to_epoch"] for a in same.anomalies] == [1]


def test_a_controller_stepping_back_below_its_highest_is_a_regression_each_time() -> None:
    def elect(epoch: int) -> LeaderElected:
        return LeaderElected(topic="t0", partition=0, leader=1, leader_epoch=epoch, isr=(1,), controller_epoch=1,
                             zk_version=epoch, unclean=False)
    decided = _leader_check({"n1": [elect(3), elect(1), elect(2)]})
    assert [(a.details["from_epoch"], a.details["to_epoch"]) for a in decided.anomalies
            if a.type == "epoch-regression" and "source" not in a.details] == [(3, 1), (3, 2)]
    controllers = _leader_check({"n1": [ControllerElected(controller_epoch=e, broker=1) for e in (3, 1, 2)]})
    assert [a.details["controller_epoch"] for a in controllers.anomalies
            if a.type == "controller-epoch-regression"] == [1, 2]


@settings(max_examples=200, deadline=None)
@given(epochs=st.lists(st.integers(0, 6), min_size=1, max_size=10))
def test_regressions_are_the_changes_of_view_below_the_highest(epochs: list[int]) -> None:
    result = _leader_check({"n1": [_follow(e) for e in epochs]})
    expected = [(max(epochs[:i]), e) for i, e in enumerate(epochs)
                if i and e < max(epochs[:i]) and e != epochs[i - 1]]
    assert [(a.details["from_epoch"], a.details["to_epoch"]) for a in result.anomalies] == expected
