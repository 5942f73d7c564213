"""The controller's rules for ISR change requests (floodmark.reference.protocol.isr_change_rules)
and what each inter-broker protocol version means (inter_broker_protocol): pure functions."""

from __future__ import annotations

import pytest

from floodmark.reference.protocol import inter_broker_protocol as ibp
from floodmark.reference.protocol import isr_change_rules as rules
from floodmark.reference.protocol.messages import Errors, IsrChangePartition
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.reference.protocol.zk_layout import LeaderIsr

DEFAULT = VARIANTS["default"]
STALE = VARIANTS["stale-isr-change-accepted"]
REPLICAS = (1, 2, 3)
CURRENT = LeaderIsr(leader=1, leader_epoch=4, isr=(1, 2, 3), controller_epoch=2, zk_version=7)


def decide(isr: tuple[int, ...], *, requester: int = 1, epoch: int = 4, version: int = 7, variant: object = DEFAULT,
           current: LeaderIsr | None = CURRENT, eligible: frozenset[int] = frozenset(REPLICAS)) -> rules.IsrDecision:
    return rules.decide(requester, IsrChangePartition("t", 0, epoch, isr, version), current, REPLICAS,
                        lambda r: r in eligible, variant)  # type: ignore[arg-type]


def test_the_versions_mean_what_kip_343_says() -> None:
    legacy, current, kip343, on_fetch = (ibp.features(v) for v in ibp.VERSIONS)
    assert (legacy.heartbeats, legacy.isr_changes_by_request, legacy.registration_version) == (False, False, 4)
    assert (current.heartbeats, current.isr_changes_by_request, current.registration_version) == (True, False, None)
    assert (kip343.heartbeats, kip343.isr_changes_by_request, kip343.registration_version) == (True, True, 5)
    # The newest is kip-343 with KAFKA-10554's truncation on the fetch's answer.
    assert on_fetch.truncation_on_fetch and not any(f.truncation_on_fetch for f in (legacy, current, kip343))
    assert (on_fetch.heartbeats, on_fetch.isr_changes_by_request, on_fetch.registration_version) == (True, True, 5)
    assert ibp.DEFAULT == ibp.HEARTBEATS
    assert ibp.always_active(4) and not ibp.always_active(5) and not ibp.always_active(None)
    with pytest.raises(ValueError, match="legacy, heartbeats, kip-343, truncate-on-fetch"):
        ibp.features("kip-500")


@pytest.mark.parametrize("requested, registered, fenced, error", [
    (10, 10, False, None),
    (9, 10, False, Errors.INVALID_INCARNATION_ID),
    (11, 10, False, Errors.UNKNOWN_INCARNATION_ID),
    (10, None, False, Errors.UNKNOWN_INCARNATION_ID),
    (10, 10, True, Errors.BROKER_FENCED),
])
def test_the_request_is_judged_by_the_requesters_incarnation(
        requested: int, registered: int | None, fenced: bool, error: str | None) -> None:
    assert rules.request_error(requested, registered, fenced, DEFAULT) == error


def test_the_variant_takes_a_stale_incarnation_for_the_current_one() -> None:
    assert rules.request_error(9, 10, False, STALE) is None
    assert rules.request_error(11, 10, False, STALE) == Errors.UNKNOWN_INCARNATION_ID


def test_a_proposal_from_a_broker_that_does_not_lead_in_that_epoch_is_refused() -> None:
    assert decide((2, 3), requester=2).error == Errors.NOT_LEADER_FOR_PARTITION
    assert decide((1, 2), epoch=3).error == Errors.NOT_LEADER_FOR_PARTITION
    assert decide((1, 2), current=None).error == Errors.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("isr", [(), (1, 1, 2), (2, 3), (1, 4)])
def test_a_malformed_isr_is_an_invalid_request(isr: tuple[int, ...]) -> None:
    assert decide(isr).error == Errors.INVALID_REQUEST


def test_only_eligible_replicas_may_join() -> None:
    shrunk = LeaderIsr(1, 4, (1, 2), 2, zk_version=7)
    assert decide((1, 2, 3), current=shrunk, eligible=frozenset({1, 2})).error == Errors.INVALID_REQUEST
    assert decide((1, 2, 3), current=shrunk) == rules.IsrDecision(None, (1, 2, 3))
    # A member that stays need not be eligible: the leader decides who is in sync.
    assert decide((1, 2), eligible=frozenset({1})) == rules.IsrDecision(None, (1, 2))


def test_the_current_isr_is_accepted_without_a_write() -> None:
    assert decide((1, 2, 3)) == rules.IsrDecision(None, (1, 2, 3), unchanged=True)


def test_a_proposal_against_an_older_version_of_the_state_is_refused() -> None:
    # A copy held back in the network past a newer change of the same leader (seed 183).
    assert decide((1, 2), version=6).error == Errors.INVALID_UPDATE_VERSION
    assert decide((1, 2), version=7) == rules.IsrDecision(None, (1, 2))
    # A retry of the change that made the current state still learns it was accepted.
    assert decide((1, 2, 3), version=6) == rules.IsrDecision(None, (1, 2, 3), unchanged=True)


def test_the_variant_accepts_a_stale_leaders_proposal() -> None:
    assert decide((2, 3), requester=2, variant=STALE) == rules.IsrDecision(None, (2, 3))
    assert decide((1, 2), epoch=3, version=5, variant=STALE) == rules.IsrDecision(None, (1, 2))
    assert decide((), variant=STALE).error == Errors.INVALID_REQUEST  # malformed is still malformed


def test_the_next_state_keeps_leader_and_epoch_and_tracks_the_elr() -> None:
    state = rules.next_state(CURRENT, (1,), REPLICAS, 2, controller_epoch=5, variant=DEFAULT)
    assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch) == (1, 4, (1,), 5)
    assert state.elr == (2, 3) and state.zk_version == 7  # conditional on the version it was read at
    assert rules.next_state(CURRENT, (1, 2), REPLICAS, 2, 5, DEFAULT).elr == ()
    assert rules.next_state(CURRENT, (1,), REPLICAS, 2, 5, VARIANTS["no-kip-966"]).elr == ()
