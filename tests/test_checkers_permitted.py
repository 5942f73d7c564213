"""Which configurations permit losing acknowledged records: read from the configuration and the
node events, never from knowledge of the implementation."""

from __future__ import annotations

import ast
from pathlib import Path

from checkers_fixtures import History, elected, events

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.checkers.permitted import NO_CONFIGURATION, acks_all, loss_permitted_by
from floodmark.run_config import TestConfig

ROOT = Path(__file__).resolve().parent.parent


def test_the_durable_configuration_permits_nothing() -> None:
    assert loss_permitted_by(TestConfig(acks="all", min_insync_replicas=2, variant="default")) is None
    assert loss_permitted_by(TestConfig()) is None
    assert acks_all(TestConfig(acks="all")) and not acks_all(TestConfig(acks=1))


def test_each_permitting_setting_is_named() -> None:
    assert "acks=0" in (loss_permitted_by(TestConfig(acks=0)) or "")
    assert "min_insync_replicas=1" in (loss_permitted_by(TestConfig(min_insync_replicas=1)) or "")
    unclean = loss_permitted_by(TestConfig(variant="unclean-election", unclean_leader_election=True)) or ""
    assert "unclean leader election is enabled" in unclean and "unclean-election" in unclean
    assert loss_permitted_by(TestConfig(variant="truncate-to-hw")) is None  # a flaw, not a permission


def test_the_configuration_states_the_permission_not_the_variant_name() -> None:
    # Whatever a variant is called, only the recorded setting permits: a checker does not
    # know which variants of the implementation enable unclean elections.
    assert loss_permitted_by(TestConfig(variant="unclean-election")) is None
    assert loss_permitted_by(TestConfig(variant="some-foreign-setup", unclean_leader_election=True)) is not None


def test_an_observed_unclean_election_permits_loss() -> None:
    clean = {"n1": events("n1", elected(0, leader=2, epoch=2))}
    assert loss_permitted_by(TestConfig(), clean) is None
    unclean = {"n1": events("n1", elected(0, leader=2, epoch=3, unclean=True))}
    assert loss_permitted_by(TestConfig(), unclean) == "unclean leader election of t0/0 in epoch 3 (event n1#0)"


def test_a_run_without_configuration_is_not_assumed_to_promise_durability() -> None:
    assert loss_permitted_by(None) == NO_CONFIGURATION
    assert not acks_all(None)


def test_permitted_losses_are_read_from_the_configuration_by_the_checkers() -> None:
    h = History()
    for i in range(3):
        h.send(0, 0, f"v{i}", i)
    h.poll(3, 0, 0, [(0, "v0"), (2, "v2")], f="drain")  # v1 is lost
    durable = DurabilityChecker().check(CheckInput(h.ops, {}, TestConfig()))
    assert durable.valid is False and durable.stats["violations"] == 1 and durable.stats["permitted"] == 0
    for config, reason in ((TestConfig(acks=1), "acks=1"), (TestConfig(min_insync_replicas=1), "min_insync"),
                           (TestConfig(unclean_leader_election=True), "unclean"), (None, "no configuration")):
        result = DurabilityChecker().check(CheckInput(h.ops, {}, config))
        assert result.valid is False and result.stats["violations"] == 0 and result.stats["permitted"] == 1
        assert reason in result.anomalies[0].details["permitted_by"]


def test_the_permission_is_worked_out_once_per_check_input() -> None:
    found: list[int] = []

    class Counting(dict):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            found.append(1)
            return super().__iter__()

    run = CheckInput([], Counting(n1=events("n1", elected(0, leader=2, epoch=3, unclean=True))), TestConfig())
    assert run.loss_permitted_by == run.loss_permitted_by and "epoch 3" in (run.loss_permitted_by or "")
    assert len(found) == 1


def test_checkers_reports_and_pipeline_do_not_import_the_implementation() -> None:
    for folder in ("checkers", "reports", "pipeline"):
        for path in sorted((ROOT / "floodmark" / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                for name in names:
                    assert not name.startswith(("floodmark.reference", "floodmark.harness")), (path, name)
