"""Property tests: correct histories are always valid; each planted anomaly is always caught.

Histories come from :mod:`floodmark.checkers.synthetic` (a correct replicated log under
random concurrency, leader changes, unknown and failed sends) and
:mod:`floodmark.checkers.linearizability.synthetic` (correct objects under concurrent clients), with
Hypothesis drawing the seed and the shape.
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from floodmark.checkers.api import CheckInput
from floodmark.checkers.linearizability.checker import LinearizableChecker
from floodmark.checkers.linearizability.synthetic import corrupt_read, log_lin_run, register_run
from floodmark.checkers.registry import check_history
from floodmark.checkers.synthetic import (
    ANOMALY_CHECKER,
    CannotInject,
    SyntheticRun,
    inject,
    queue_run,
)

LOG_CHECKERS = ["durability", "queue", "hw", "leader"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def queue_runs(draw: st.DrawFn) -> SyntheticRun:
    return queue_run(
        draw(st.integers(0, 2**32)),
        ops=draw(st.integers(40, 400)),
        processes=draw(st.integers(1, 8)),
        topics=draw(st.integers(1, 2)),
        partitions=draw(st.integers(1, 3)),
        nodes=draw(st.integers(2, 4)),
        leader_change_rate=draw(st.sampled_from([0.0, 0.01, 0.05])),
        info_rate=draw(st.sampled_from([0.0, 0.05, 0.2])),
    )


@SETTINGS
@given(queue_runs())
def test_correct_queue_histories_are_valid(run: SyntheticRun) -> None:
    results = check_history(run.history, run.events, run.config, checkers=LOG_CHECKERS)
    for name, result in results["checkers"].items():
        assert result["valid"] is True, (name, result["anomalies"][:2])


@SETTINGS
@given(queue_runs(), st.sampled_from(sorted(ANOMALY_CHECKER)), st.integers(0, 1000))
def test_every_planted_anomaly_is_caught_with_its_type(run: SyntheticRun, anomaly: str, seed: int) -> None:
    try:
        broken = inject(run, anomaly, seed)
    except CannotInject:
        assume(False)
    results = check_history(broken.history, broken.events, broken.config, checkers=LOG_CHECKERS)
    verdict = results["checkers"][ANOMALY_CHECKER[anomaly]]
    assert verdict["valid"] is False
    assert anomaly in verdict["anomaly_counts"], verdict["anomaly_counts"]
    assert results["valid"] is False


@SETTINGS
@given(st.integers(0, 2**32), st.integers(1, 8), st.integers(1, 3), st.integers(20, 300))
def test_correct_log_lin_histories_are_linearizable_and_a_corrupt_read_is_not(
        seed: int, processes: int, partitions: int, ops: int) -> None:
    run = log_lin_run(seed, ops=ops, processes=processes, partitions=partitions, info_rate=0.05)
    assume(any(op.f == "read" and op.type == "ok" for op in run.history))
    checker = LinearizableChecker()
    assert checker.check(CheckInput(run.history, config=run.config, time_limit=30)).valid is True
    broken = corrupt_read(run, seed)
    assert checker.check(CheckInput(broken.history, config=broken.config, time_limit=30)).valid is False


@SETTINGS
@given(st.integers(0, 2**32), st.integers(1, 6), st.integers(20, 200))
def test_correct_register_histories_are_linearizable_and_a_corrupt_read_is_not(
        seed: int, processes: int, ops: int) -> None:
    run = register_run(seed, ops=ops, processes=processes, info_rate=0.05)
    assume(any(op.f == "read" and op.type == "ok" for op in run.history))
    checker = LinearizableChecker(model="cas-register")
    assert checker.check(CheckInput(run.history, time_limit=30)).valid is True
    broken = corrupt_read(run, seed)
    assert checker.check(CheckInput(broken.history, time_limit=30)).valid is False


def test_planting_anomalies_leaves_the_run_it_copies_unchanged() -> None:
    # The generator shares equal objects between ops and events to save memory (the empty
    # extra fields, one values list per appended record): copies must never write through them.
    run = queue_run(5, ops=300, leader_change_rate=0.05, info_rate=0.1)
    before = ([op.to_json() for op in run.history], {n: [e.to_dict() for e in es] for n, es in run.events.items()})
    for anomaly in sorted(ANOMALY_CHECKER):
        try:
            inject(run, anomaly, 3)
        except CannotInject:
            continue
    after = ([op.to_json() for op in run.history], {n: [e.to_dict() for e in es] for n, es in run.events.items()})
    assert after == before
    assert all(op.extra == {} for op in run.history)
    assert [e.seq for e in run.events["n1"]] == list(range(len(run.events["n1"])))
