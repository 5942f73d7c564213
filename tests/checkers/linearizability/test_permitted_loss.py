"""A log partition without a linearization carries ``permitted_by`` exactly when a loss the
run's configuration permits explains it, as the queue checkers' losses do."""

from __future__ import annotations

import io
import json
from pathlib import Path

from checkers_fixtures import History

from floodmark.checkers.api import CheckInput
from floodmark.checkers.linearizability.checker import LinearizableChecker
from floodmark.checkers.permitted import NO_CONFIGURATION
from floodmark.contracts.results import CheckerResult
from floodmark.contracts.run_config import TestConfig
from floodmark.run.runner import Runner

P = {"topic": "t0", "partition": 0}
ACKS_1 = TestConfig(workload="log-lin", acks=1)


def append(h: History, process: int, value: str, offset: int) -> None:
    h.call(process, "append", {**P, "value": value}, {**P, "value": value, "offset": offset})


def read(h: History, process: int, offset: int, value: str) -> None:
    h.call(process, "read", {**P, "offset": offset}, {**P, "offset": offset, "value": value})


def lost_tail(*, read_it: bool) -> History:
    """``a`` is acknowledged at offset 1 (and read there, if ``read_it``), then lost: ``b`` is
    acknowledged at offset 1 and read there."""
    h = History()
    append(h, 0, "x", 0)
    append(h, 0, "a", 1)
    if read_it:
        read(h, 2, 1, "a")
    append(h, 1, "b", 1)
    read(h, 2, 1, "b")
    return h


def check(h: History, config: TestConfig | None) -> CheckerResult:
    return LinearizableChecker().check(CheckInput(h.ops, config=config))


def test_losing_what_only_an_acknowledgement_vouched_for_is_permitted_by_acks_below_all() -> None:
    result = check(lost_tail(read_it=False), ACKS_1)
    assert result.valid is False  # still reported, as the queue checkers report permitted losses
    [anomaly] = result.anomalies
    assert anomaly.details["permitted_by"] == "acks=1 (only acks=all promises durability)"
    assert (result.stats["permitted"], result.stats["violations"]) == (1, 0)


def test_losing_what_a_consumer_read_is_a_violation_under_acks_below_all() -> None:
    result = check(lost_tail(read_it=True), ACKS_1)
    [anomaly] = result.anomalies
    assert "permitted_by" not in anomaly.details
    assert (result.stats["permitted"], result.stats["violations"]) == (0, 1)


def test_acks_all_permits_nothing() -> None:
    result = check(lost_tail(read_it=False), TestConfig(workload="log-lin"))
    assert result.valid is False and "permitted_by" not in result.anomalies[0].details
    assert result.stats["violations"] == 1


def test_a_permission_reaching_every_record_excuses_a_read_record_lost_and_written_again() -> None:
    result = check(lost_tail(read_it=True), TestConfig(workload="log-lin", min_insync_replicas=1))
    assert result.anomalies[0].details["permitted_by"].startswith("min_insync_replicas=1")
    assert check(lost_tail(read_it=True), None).anomalies[0].details["permitted_by"] == NO_CONFIGURATION


def test_what_no_loss_explains_is_never_permitted() -> None:
    # A record from nowhere and a record that moved are no losses, whatever the configuration.
    phantom = History()
    append(phantom, 0, "x", 0)
    read(phantom, 1, 0, "y")
    moved = History()
    append(moved, 0, "x", 0)
    append(moved, 0, "a", 1)
    read(moved, 1, 0, "a")
    for h in (phantom, moved):
        for config in (ACKS_1, TestConfig(workload="log-lin", min_insync_replicas=1)):
            result = check(h, config)
            assert result.valid is False and "permitted_by" not in result.anomalies[0].details, (h.ops, config)


def test_a_simulated_acks_1_run_that_lost_acknowledged_appends_counts_them_permitted(tmp_path: Path) -> None:
    # Seed 8 under every fault loses appends acknowledged by a leader alone (before: an
    # anomaly without permitted_by, counted as a contract violation).
    config = TestConfig(cluster="sim", workload="log-lin", acks=1, seed=8, time_limit=20)
    outcome = Runner(config, tmp_path, out=io.StringIO(), report=False).run()
    linearizable = json.loads(outcome.run_dir.results.read_text())["checkers"]["linearizable"]
    assert linearizable["valid"] is False and linearizable["anomalies"]
    assert all(a["permitted_by"] == "acks=1 (only acks=all promises durability)" for a in linearizable["anomalies"])
    assert linearizable["stats"]["violations"] == 0


def final_read(h: History, process: int, *values: str) -> None:
    h.call(process, "final-read", {**P, "offset": 0},
           {**P, "offset": 0, "records": [[o, v] for o, v in enumerate(values)], "high_watermark": len(values)})


def test_an_acknowledged_append_a_final_read_lacks_is_lost_and_acks_below_all_permit_that() -> None:
    h = History()
    append(h, 0, "x", 0)
    append(h, 0, "a", 1)
    final_read(h, 9, "x")
    acks_all = check(h, TestConfig(workload="log-lin"))
    assert acks_all.valid is False and "permitted_by" not in acks_all.anomalies[0].details
    assert check(h, ACKS_1).anomalies[0].details["permitted_by"].startswith("acks=1")
    whole = History()
    append(whole, 0, "x", 0)
    append(whole, 0, "a", 1)
    final_read(whole, 9, "x", "a")
    assert check(whole, TestConfig(workload="log-lin")).valid is True


def test_a_final_read_that_saw_a_record_a_read_lacks_later_under_acks_below_all_is_a_violation() -> None:
    # What a final read returned was committed: losing it is no acknowledged-only loss.
    h = History()
    append(h, 0, "x", 0)
    final_read(h, 8, "x")
    h.call(1, "read", {**P, "offset": 0}, {**P, "offset": 0, "value": "y"})
    append(h, 0, "y", 0)
    result = check(h, ACKS_1)
    assert result.valid is False and "permitted_by" not in result.anomalies[0].details


def test_a_read_record_a_final_read_lacks_is_permitted_only_by_a_permission_reaching_every_record() -> None:
    h = History()
    append(h, 0, "x", 0)
    append(h, 0, "a", 1)
    read(h, 1, 1, "a")
    final_read(h, 9, "x")
    assert "permitted_by" not in check(h, ACKS_1).anomalies[0].details
    every = check(h, TestConfig(workload="log-lin", unclean_leader_election=True))
    assert every.anomalies[0].details["permitted_by"].startswith("unclean leader election is enabled")
