"""The convergence checker: every replica in sync again once the faults have healed.

It judges one nemesis op, the runner's wait for whole ISRs after the final reads: valid when
no partition was short, invalid per partition still short or never checked though the node
events show it exists (one an admin fault added) and when ZooKeeper named no controller by its
end, unknown when the wait could not ask, never ended or cannot be read. A history that does not record the wait is not judged by
it at all (real clusters' runs, foreign histories), unless it is a simulator run's: unknown.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from checkers_fixtures import History, elected, events, follows
from hypothesis import given, settings

from floodmark.checkers.api import CheckInput
from floodmark.checkers.convergence import (
    AWAIT_FULL_ISR,
    NO_CONTROLLER,
    UNDER_REPLICATED,
    ConvergenceChecker,
)
from floodmark.checkers.registry import check_history, checker_names_for, default_checker_names
from floodmark.contracts.history import NEMESIS
from floodmark.contracts.run_config import TestConfig


def waited(found: Any, outcome: str = "ok") -> History:
    h = History()
    h.send(0, 0, "a", 0)
    h.poll(1, 0, 0, [(0, "a")], f="drain")
    h.invoke(NEMESIS, AWAIT_FULL_ISR, {"timeout": 30.0})
    if outcome != "none":
        h.add(outcome, NEMESIS, AWAIT_FULL_ISR, found)
    return h


def judged(h: History) -> Any:
    return ConvergenceChecker().check(CheckInput(h.ops))


def short(*partitions: tuple[str | None, int | None, str]) -> dict[str, Any]:
    return {"waited": 30.0, "timeout": 30.0,
            "short": [{"topic": t, "partition": p, "why": why} for t, p, why in partitions]}


def test_every_partition_whole_is_valid() -> None:
    result = judged(waited({"waited": 0.25, "timeout": 30.0, "short": []}))
    assert result.valid is True and result.stats["waited"] == 0.25


def test_a_partition_still_short_is_invalid_naming_it_and_why() -> None:
    result = judged(waited(short(("t0", 1, "ISR [1, 2] of replicas [1, 2, 3], below 3"), ("t1", 0, "no leader"))))
    assert result.valid is False
    assert [(a.type, a.topic, a.partition) for a in result.anomalies] == [
        (UNDER_REPLICATED, "t0", 1), (UNDER_REPLICATED, "t1", 0)]
    assert "ISR [1, 2] of replicas [1, 2, 3]" in result.anomalies[0].explanation
    assert result.anomalies[0].ops == (5,)  # the wait's completion


def test_no_controller_at_the_end_of_the_wait_is_invalid_whatever_the_isrs_say() -> None:
    # Brokers list the ISRs they last heard of, whole or not, when no controller is left.
    none = judged(waited({**short(), "controller": -1}))
    assert none.valid is False and none.stats["controller"] == -1
    [anomaly] = none.anomalies
    assert anomaly.type == NO_CONTROLLER and anomaly.ops == (5,) and "ZooKeeper named none" in anomaly.explanation
    named = judged(waited({**short(), "controller": 2}))
    assert named.valid is True and named.stats["controller"] == 2
    unread = judged(waited(short()))  # ZooKeeper could not be read, or a wait from before it looked
    assert unread.valid is True and unread.stats["controller"] == "not recorded"
    for malformed in ("2", True, -2, 1.5, None, [1]):
        result = judged(waited({**short(), "controller": malformed}))
        assert result.valid == "unknown" and "'controller'" in result.stats["unjudged_because"], malformed


def test_a_wait_that_could_not_ask_never_ended_or_failed_is_unknown() -> None:
    unasked = judged(waited(short((None, None, "no broker answered the metadata request"))))
    assert unasked.valid == "unknown" and "no broker answered" in unasked.stats["unjudged_because"]
    assert judged(waited(None, outcome="none")).valid == "unknown"
    failed = judged(waited({"waited": 1.0, "timeout": 30.0, "short": []}, outcome="info"))
    assert failed.valid == "unknown" and "ended info" in failed.stats["unjudged_because"]


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["waited", "timeout", "short", "topic", "partition", "why", "controller"]),
                        inner,
                        max_size=6), max_leaves=12))
@settings(max_examples=300, deadline=None)
def test_any_recorded_value_gives_a_verdict_and_valid_only_for_a_well_formed_empty_wait(found: Any) -> None:
    result = judged(waited(found))
    assert result.valid in (True, False, "unknown")
    if result.valid is True:
        assert isinstance(found, dict) and found["short"] == []
        assert type(found["waited"]) in (int, float) and type(found["timeout"]) in (int, float)
        assert 0 <= found["waited"] < float("inf") and 0 <= found["timeout"] < float("inf")
        assert type(found.get("controller", 0)) is int and found.get("controller", 0) >= 0
    if result.valid is False:
        assert all((isinstance(a.topic, str) and isinstance(a.partition, int))
                   or (a.type == NO_CONTROLLER and found["controller"] == -1) for a in result.anomalies)


def test_only_a_history_that_records_the_wait_is_judged_by_it() -> None:
    recorded = waited({"waited": 0.0, "timeout": 30.0, "short": []}).ops
    assert default_checker_names("queue", recorded)[-2:] == ("convergence", "stats")
    assert "convergence" in default_checker_names("log-lin", recorded)
    assert "convergence" not in default_checker_names("queue", recorded[:2])  # a run recorded before it
    assert "convergence" not in default_checker_names(None, recorded)  # judged for linearizability alone
    assert "convergence" in checker_names_for(None, recorded)  # a history file of a queue run
    assert check_history(recorded, {}, TestConfig())["checkers"]["convergence"]["valid"] is True
    assert "convergence" not in check_history(recorded[:2], {}, TestConfig())["checkers"]


def test_a_simulator_run_without_the_wait_is_unknown_not_left_unjudged() -> None:
    """The simulator records the wait after every run's final reads: a history that lacks it
    was cut at a line's end (its last two lines gone) or edited, and was VALID with no
    convergence verdict at all; a real cluster's run does not wait and is not judged by it."""
    recorded = waited({"waited": 0.0, "timeout": 30.0, "short": []}).ops
    sim = TestConfig(cluster="sim")
    assert "convergence" in checker_names_for(sim, recorded[:2])
    results = check_history(recorded[:2], {}, sim)
    convergence = results["checkers"]["convergence"]
    assert convergence["valid"] == "unknown" and results["valid"] == "unknown"
    assert "simulator" in convergence["stats"]["unjudged_because"]
    assert check_history(recorded, {}, sim)["checkers"]["convergence"]["valid"] is True
    assert "convergence" not in check_history(recorded[:2], {}, TestConfig(cluster="docker"))["checkers"]


@pytest.mark.parametrize("seconds", [-1, -0.5, float("inf")])
def test_a_wait_of_no_possible_length_is_unknown(seconds: float) -> None:
    """A timeout of -1 s (or a wait that took forever) was judged as any other."""
    for key in ("waited", "timeout"):
        found = {"waited": 1.0, "timeout": 30.0, "short": [], key: seconds}
        result = judged(waited(found))
        assert result.valid == "unknown" and "not a number of seconds" in result.stats["unjudged_because"]


def checked(*partitions: tuple[str, int], shorts: tuple[tuple[str, int, str], ...] = ()) -> dict[str, Any]:
    return {**short(*shorts), "checked": [{"topic": t, "partition": p, "replicas": [1, 2, 3]} for t, p in partitions]}


# Three brokers' events: t0/0..1 as test.yaml declares (two partitions), t0/2 added during the
# run (the controller elected its first leader, a broker follows it); t9 is no topic of the test.
ADDED = {"n1": events("n1", elected(0, 1, 1), elected(1, 2, 1), elected(2, 3, 1)),
         "n2": events("n2", follows(2, leader=3)), "n3": events("n3", follows(5, topic="t9"))}
TWO_PARTITIONS = TestConfig(cluster="sim", topics=1, partitions=2)


def judged_with(found: dict[str, Any], config: TestConfig | None = TWO_PARTITIONS) -> Any:
    return ConvergenceChecker().check(CheckInput(waited(found).ops, ADDED, config))


def test_a_partition_the_node_events_show_but_the_wait_never_checked_is_invalid() -> None:
    # An add-partitions fault made t0/2; the wait held only test.yaml's t0/0 and t0/1 to whole
    # ISRs, so a t0/2 that never caught up passed as converged.
    result = judged_with(checked(("t0", 0), ("t0", 1)))
    assert result.valid is False and [(a.topic, a.partition) for a in result.anomalies] == [("t0", 2)]
    assert "metadata never listed it" in result.anomalies[0].explanation
    whole = judged_with(checked(("t0", 0), ("t0", 1), ("t0", 2)))
    assert whole.valid is True and whole.stats["partitions_checked"] == 3
    added_short = judged_with(checked(("t0", 0), ("t0", 1), ("t0", 2), shorts=(("t0", 2, "ISR [3] of replicas [3, 1]"),)))
    assert [(a.topic, a.partition) for a in added_short.anomalies] == [("t0", 2)]
    assert judged_with(checked(("t0", 0), ("t0", 1)), config=None).valid is False  # t9/5 too, with no test


def test_a_wait_recorded_before_it_listed_what_it_checked_is_unknown_where_partitions_were_added() -> None:
    old = short()
    result = judged_with(old)
    assert result.valid == "unknown" and "the node events name t0/2 too" in result.stats["unjudged_because"]
    assert judged_with(old, TestConfig(cluster="sim", topics=1, partitions=3)).valid is True
    assert judged(waited(old)).valid is True  # no node events: as it always was judged


@pytest.mark.parametrize("entries", [{"t0": 1}, [{"topic": "t0", "partition": 0}],
                                     [{"topic": "t0", "partition": -1, "replicas": [1]}],
                                     [{"topic": "t0", "partition": 0, "replicas": ["1"]}]])
def test_a_checked_list_that_cannot_be_read_is_unknown(entries: Any) -> None:
    result = judged(waited({**short(), "checked": entries}))
    assert result.valid == "unknown" and "'checked'" in result.stats["unjudged_because"]


def test_every_wait_a_history_holds_is_judged_not_the_last_alone() -> None:
    # The first wait found t0/0 short at its deadline; a second, later, found it whole. Only
    # the last was judged: VALID. A partition short at a wait's deadline is a finding.
    h = waited(short(("t0", 0, "its ISR [1] lacks replica 2")))
    h.invoke(NEMESIS, AWAIT_FULL_ISR, {"timeout": 30.0})
    h.ok(NEMESIS, AWAIT_FULL_ISR, short())
    result = judged(h)
    assert result.valid is False and [a.partition for a in result.anomalies] == [0]
    assert result.stats["waits"] == 4  # (the ops of two waits)
    # An earlier wait whose record cannot be read: a later one found whole is not enough.
    h = waited({"waited": "long"})
    h.invoke(NEMESIS, AWAIT_FULL_ISR, {"timeout": 30.0})
    h.ok(NEMESIS, AWAIT_FULL_ISR, short())
    result = judged(h)
    assert result.valid == "unknown" and "no record of a wait" in result.stats["unjudged_because"]
