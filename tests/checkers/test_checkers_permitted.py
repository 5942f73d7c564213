"""Which losses a run permits, and where: read from the configuration, the node events and the
history's fault ops, never from knowledge of the implementation."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from checkers_fixtures import History, elected, events, follows

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.checkers.permitted import (
    NO_CONFIGURATION,
    acks_all,
    loss_permissions,
    loss_permitted_by,
)
from floodmark.contracts.run_config import TestConfig

ROOT = Path(__file__).resolve().parents[2]


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


def test_a_recovery_after_a_power_loss_permits_its_partition_only() -> None:
    recovered = {"n1": events("n1", follows(0), elected(0, leader=2, epoch=3, unclean=True, recovery=True))}
    history = History()
    assert loss_permissions(TestConfig(), history.ops, recovered).partitions == {}  # no power loss took writes
    history.power_loss()
    permissions = loss_permissions(TestConfig(), history.ops, recovered)
    assert permissions.reason("t0", 0, committed=True) == (
        "every in-sync replica of t0/0 lost unsynced writes: recovered by electing the furthest in epoch 3 "
        "(event n1#1)")
    assert permissions.reason("t0", 1, committed=True) is None
    forbidden = {"n1": events("n1", elected(0, leader=2, epoch=3, unclean=True, recovery=False))}
    assert loss_permissions(TestConfig(), history.ops, forbidden).partitions == {}
    unsaid = {"n1": events("n1", follows(0), dataclasses.replace(elected(0, leader=2, epoch=3, unclean=True),
                                                                   recovery=None))}
    assert loss_permissions(TestConfig(), history.ops, unsaid).partitions == {}



def test_a_power_loss_after_the_final_reads_began_permits_nothing() -> None:
    # What the final reads (the queue's drain, log-lin's final read) read was kept: a power
    # loss recorded after they began cannot have taken it.
    recovered = {"n1": events("n1", follows(0), elected(0, leader=2, epoch=3, unclean=True, recovery=True))}
    for final in ("drain", "final-read"):
        history = History()
        history.invoke(3, final, {"topic": "t0", "partition": 0})
        history.power_loss()
        assert loss_permissions(TestConfig(), history.ops, recovered).partitions == {}, final

def test_acks_below_all_excuse_only_what_no_consumer_read() -> None:
    permissions = loss_permissions(TestConfig(acks=1), [], {})
    assert permissions.reason("t0", 0, committed=False) == "acks=1 (only acks=all promises durability)"
    assert permissions.reason("t0", 0, committed=True) is None
    both = loss_permissions(TestConfig(acks=1, min_insync_replicas=1), [], {})
    assert both.reason("t0", 0, committed=True) is not None


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

    history = History()
    history.power_loss()
    run = CheckInput(history.ops, Counting(n1=events("n1", follows(0), elected(0, leader=2, epoch=3, unclean=True))), TestConfig())
    assert run.loss_permissions is run.loss_permissions
    assert "epoch 3" in run.loss_details("t0", 0, committed=True)["permitted_by"]
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


def test_a_power_loss_permits_only_what_it_could_have_taken() -> None:
    recovered = {"n1": events("n1", follows(0), elected(0, leader=1, epoch=3, unclean=True, recovery=True)),
                 "n5": events("n5", follows(1))}
    elsewhere = History()
    elsewhere.power_loss("n5")  # a node holding no replica of t0/0
    assert loss_permissions(TestConfig(), elsewhere.ops, recovered).partitions == {}
    after = History()
    after.call(9, "drain", [{"topic": "t0", "partition": 0, "offset": 0}], [])
    after.power_loss("n1")  # after the drain began: it took nothing the drain read
    assert loss_permissions(TestConfig(), after.ops, recovered).partitions == {}
    before = History()
    before.power_loss("n1")
    assert set(loss_permissions(TestConfig(), before.ops, recovered).partitions) == {("t0", 0)}
