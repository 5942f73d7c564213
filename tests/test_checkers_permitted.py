"""Which configurations permit losing acknowledged records."""

from __future__ import annotations

from checkers_fixtures import events, tp

from floodmark.checkers.permitted import acks_all, loss_permitted_by


def test_the_durable_configuration_permits_nothing() -> None:
    assert loss_permitted_by({"acks": "all", "min_insync_replicas": 2, "variant": "default"}) is None
    assert loss_permitted_by({}) is None
    assert acks_all({"acks": "all"}) and acks_all({"acks": -1}) and not acks_all({"acks": 1})


def test_each_permitting_setting_is_named() -> None:
    assert "acks=0" in (loss_permitted_by({"acks": 0}) or "")
    assert "min_insync_replicas=1" in (loss_permitted_by({"min_insync_replicas": 1}) or "")
    assert "unclean-election" in (loss_permitted_by({"variant": "unclean-election"}) or "")
    assert loss_permitted_by({"variant": "truncate-to-hw"}) is None  # a flaw, not a permission


def test_an_observed_unclean_election_permits_loss() -> None:
    clean = {"n1": events("n1", ("leader_elected", tp(0, leader="n2", leader_epoch=2, unclean=False)))}
    assert loss_permitted_by({}, clean) is None
    unclean = {"n1": events("n1", ("leader_elected", tp(0, leader="n2", leader_epoch=3, unclean=True)))}
    assert "epoch 3" in (loss_permitted_by({}, unclean) or "")
