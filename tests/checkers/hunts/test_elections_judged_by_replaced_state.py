"""Clean elections are judged from the ZooKeeper state they replaced, not by their own flag.

Found by mutation analysis: a preferred-leader election that skipped the in-sync
check elected a replica outside the ISR, recorded the election as clean, and the leader
checker (which only held elections flagged ``unclean`` to the configuration) passed it.
"""

from __future__ import annotations

from checkers_fixtures import events
from hypothesis import given
from hypothesis import strategies as st

from floodmark.checkers.api import CheckInput
from floodmark.checkers.white_box.leader import LeaderChecker, elections_from_outside
from floodmark.contracts.node_events import (
    BecameLeader,
    IsrChanged,
    IsrWritten,
    LeaderElected,
    NodeEventBody,
)
from floodmark.contracts.results import CheckerResult
from floodmark.contracts.run_config import TestConfig


def elect(leader: int, epoch: int, isr: tuple[int, ...], version: int, *, unclean: bool = False) -> LeaderElected:
    return LeaderElected(topic="t0", partition=0, leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=1,
                         zk_version=version, unclean=unclean, recovery=False)


def shrink(epoch: int, isr: tuple[int, ...], version: int) -> IsrChanged:
    return IsrChanged(topic="t0", partition=0, leader_epoch=epoch, isr=isr, zk_version=version, change="shrink")


def judge(*bodies: NodeEventBody, unclean_enabled: bool = False, min_insync: int = 2) -> CheckerResult:
    config = TestConfig(unclean_leader_election=unclean_enabled, nodes=1, min_insync_replicas=min_insync,
                        replication_factor=3)
    # A leader's shrink follows its becoming leader (else it is a self-promoted leader of its own).
    led = [b for body in bodies for b in ((became(body),) if type(body) is IsrChanged else ()) + (body,)]
    return LeaderChecker().check(CheckInput([], {"n1": events("n1", *led)}, config))


def became(shrunk: IsrChanged) -> BecameLeader:
    return BecameLeader(topic="t0", partition=0, leader_epoch=shrunk.leader_epoch, isr=(1, 2, 3), log_end=0,
                        high_watermark=0)


def test_a_clean_election_of_a_replica_outside_the_isr_it_replaced_is_unclean() -> None:
    # The M9 mutant's run: 1 led, was killed (ISR 2, 3), came back deaf and out of sync, and a
    # preferred election made it leader again "cleanly".
    result = judge(elect(1, 0, (1, 2, 3), 0), elect(2, 1, (2, 3), 1), elect(1, 2, (2, 3), 2))
    [anomaly] = result.anomalies
    assert result.valid is False
    assert anomaly.type == "unclean-election" and anomaly.events == (("n1", 2),)
    assert anomaly.details["could_lead"] == [2, 3]


def test_the_isr_a_leader_wrote_counts_as_the_state_replaced() -> None:
    # A leader's shrink (version 1) is what the controller's election (version 2) replaced.
    assert judge(elect(1, 0, (1, 2, 3), 0), shrink(0, (1, 2), 1), elect(3, 1, (3,), 2)).valid is False
    assert judge(elect(1, 0, (1, 2, 3), 0), shrink(0, (1, 2), 1), elect(2, 1, (2,), 2)).valid is True


def test_a_replica_of_the_elr_may_lead_cleanly() -> None:
    # ISR 1, 2, 3 -> 1, 2 (still min.insync) -> 1 (below: 2 joins the ELR): 2 may lead, 3 may not.
    history = (elect(1, 0, (1, 2, 3), 0), shrink(0, (1, 2), 1), shrink(0, (1,), 2))
    assert judge(*history, elect(2, 1, (2,), 3)).valid is True
    assert judge(*history, elect(3, 1, (3,), 3)).valid is False


def test_what_was_not_recorded_is_not_judged() -> None:
    # Version 1 is missing: the state replaced is unknown, so nothing is said about it.
    assert judge(elect(1, 0, (1, 2, 3), 0), elect(3, 2, (3,), 2)).valid is True
    # Two different ISRs recorded at one version (a recreated topic): ambiguous, not judged.
    assert judge(elect(1, 0, (1, 2, 3), 0), shrink(0, (1, 2), 1), shrink(0, (2, 3), 1),
                 elect(1, 1, (1,), 2)).valid is True


def test_flagged_and_allowed_unclean_elections_are_not_this_checks_business() -> None:
    history = (elect(1, 0, (1, 2, 3), 0), elect(2, 1, (2, 3), 1))
    assert judge(*history, elect(1, 2, (1,), 2, unclean=True), unclean_enabled=True).valid is True
    assert judge(*history, elect(1, 2, (1,), 2), unclean_enabled=True).valid is True


def test_isr_written_on_request_is_a_recorded_state() -> None:
    written = IsrWritten(topic="t0", partition=0, leader=1, leader_epoch=0, isr=(1, 2), zk_version=1,
                         requester=1, requested_leader_epoch=0, requester_incarnation=1)
    assert elections_from_outside({"n1": events("n1", elect(1, 0, (1, 2, 3), 0), written,
                                                 elect(3, 1, (3,), 2))}, 2)


@given(st.lists(st.sets(st.integers(1, 4), min_size=1), min_size=1, max_size=6), st.integers(1, 4),
       st.integers(1, 3))
def test_an_election_from_the_isr_replaced_is_never_flagged(isrs: list[set[int]], extra: int, min_insync: int) -> None:
    """Whatever the states before, electing a member of the ISR just replaced is clean."""
    bodies: list[NodeEventBody] = [elect(min(isrs[0]), 0, tuple(sorted(isrs[0])), 0)]
    bodies += [shrink(0, tuple(sorted(isr)), version) for version, isr in enumerate(isrs) if version]
    last = sorted(isrs[-1])
    leader = last[extra % len(last)]
    bodies.append(elect(leader, 1, (leader,), len(isrs)))
    assert elections_from_outside({"n1": events("n1", *bodies)}, min_insync) == []
