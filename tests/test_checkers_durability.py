"""Durability: acknowledged records stay at their offsets through the final drain."""

from __future__ import annotations

from checkers_fixtures import History, elected, events

from floodmark.checkers.api import CheckInput
from floodmark.checkers.durability import DurabilityChecker
from floodmark.run_config import TestConfig

ACKS_ALL = TestConfig(acks="all", min_insync_replicas=2, variant="default")


def check(h: History, config: TestConfig | None = None, node_events: dict | None = None):  # type: ignore[no-untyped-def]
    return DurabilityChecker().check(CheckInput(h.ops, node_events or {}, ACKS_ALL if config is None else config))


def base() -> History:
    h = History()
    h.send(0, 0, "a", 0)
    h.send(1, 0, "b", 1)
    return h


def test_everything_acknowledged_survives() -> None:
    h = base()
    h.send(2, 0, "maybe", None, outcome="info")  # indeterminate: may vanish
    h.send(3, 0, "no", None, outcome="fail")
    h.poll(4, 0, 0, [(0, "a")])
    h.poll(5, 0, 0, [(0, "a"), (1, "b")], f="drain")
    result = check(h)
    assert result.valid is True, result.anomalies
    assert result.stats["judged"] == 2
    assert result.stats["indeterminate_absent"] == 1


def test_missing_from_drain_is_a_lost_write() -> None:
    h = base()
    h.poll(5, 0, 0, [(0, "a")], f="drain")
    result = check(h)
    assert result.valid is False
    [lost] = result.anomalies
    assert (lost.type, lost.offsets, lost.details["how"]) == ("lost-write", (1,), "missing")
    assert "b" in lost.explanation and 2 in lost.ops and 3 in lost.ops
    assert "permitted_by" not in lost.details
    assert result.stats["violations"] == 1 and result.stats["permitted"] == 0


def test_moved_value_is_a_lost_write() -> None:
    h = base()
    h.poll(5, 0, 0, [(0, "a"), (1, "x"), (2, "b")], f="drain")
    result = check(h)
    kinds = {(a.type, a.details.get("how")) for a in result.anomalies}
    assert ("lost-write", "moved") in kinds
    assert ("inconsistent-offsets", None) in kinds  # the ack says b at 1, the drain says x


def test_read_contradicting_an_ack_is_inconsistent() -> None:
    h = base()
    h.poll(4, 0, 1, [(1, "zzz")])
    h.poll(5, 0, 0, [(0, "a"), (1, "b")], f="drain")
    result = check(h)
    [anomaly] = result.anomalies
    assert anomaly.type == "inconsistent-offsets" and anomaly.offsets == (1,)


def test_losses_permitted_by_configuration_are_marked_not_hidden() -> None:
    h = base()
    h.poll(5, 0, 0, [(0, "a")], f="drain")
    for config, reason in [(TestConfig(acks=1), "acks=1"), (TestConfig(acks="all", min_insync_replicas=1), "min_insync"),
                           (TestConfig(variant="unclean-election", unclean_leader_election=True), "unclean")]:
        result = check(h, config)
        assert result.valid is False
        assert reason in result.anomalies[0].details["permitted_by"]
        assert result.stats["permitted"] == 1 and result.stats["violations"] == 0
    unclean = {"n1": events("n1", elected(0, leader=1, epoch=2, unclean=True))}
    assert "unclean leader election" in check(h, ACKS_ALL, unclean).anomalies[0].details["permitted_by"]


def test_without_a_drain_losses_cannot_be_judged() -> None:
    h = base()
    result = check(h)
    assert result.valid == "unknown"
    assert result.stats["unjudged"] == 2
