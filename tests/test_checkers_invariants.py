"""White-box invariants: acks=all acknowledgements held against the leader's own ISR and HW."""

from __future__ import annotations

from checkers_fixtures import History, events

from floodmark import node_events as kinds
from floodmark.checkers.api import CheckInput
from floodmark.checkers.invariants import InvariantsChecker
from floodmark.node_events import NodeEvent
from floodmark.results import CheckerResult
from floodmark.run_config import TestConfig


def check(node_events: dict[str, list[NodeEvent]], *, min_isr: int = 2, history: History | None = None,
          config: bool = True) -> CheckerResult:
    ops = history.ops if history is not None else []
    return InvariantsChecker().check(CheckInput(ops, node_events, TestConfig(acks="all", min_insync_replicas=min_isr)
                                                if config else None))


def leads(epoch: int, *isr: int) -> kinds.BecameLeader:
    return kinds.BecameLeader(topic="t0", partition=0, leader_epoch=epoch, isr=isr, log_end=0, high_watermark=0)


def shrinks(epoch: int, *isr: int) -> kinds.IsrChanged:
    return kinds.IsrChanged(topic="t0", partition=0, leader_epoch=epoch, isr=isr, zk_version=3, change="shrink")


def acked(offset: int, epoch: int, *, hw: int | None = None, acks: int = -1) -> kinds.Acked:
    return kinds.Acked(topic="t0", partition=0, offset=offset, first_offset=offset,
                 high_watermark=offset + 1 if hw is None else hw, acks=acks, leader_epoch=epoch)


def types(result: CheckerResult) -> list[str]:
    return [a.type for a in result.anomalies]


def test_acks_covered_by_an_isr_at_min_insync_are_valid() -> None:
    result = check({"n1": events("n1", leads(1, 1, 2, 3), acked(0, 1), shrinks(1, 1, 2), acked(1, 1))})
    assert result.valid is True and result.stats["acks_judged"] == 2


def test_an_ack_while_the_isr_is_the_leader_alone_is_caught() -> None:
    # Jepsen 2013: the leader's ISR shrank to itself, and it still acknowledged acks=all.
    result = check({"n1": events("n1", leads(1, 1, 2, 3), acked(0, 1), shrinks(1, 1), acked(1, 1))})
    assert result.valid is False and types(result) == ["acked-below-min-isr"]
    anomaly = result.anomalies[0]
    assert anomaly.offsets == (1,) and anomaly.events == (("n1", 3),) and anomaly.details["isr"] == [1]
    # ... which the run's own configuration permits when min.insync.replicas is 1.
    assert check({"n1": events("n1", leads(1, 1), acked(0, 1))}, min_isr=1).valid is True


def test_an_ack_above_the_hw_is_caught() -> None:
    result = check({"n1": events("n1", leads(1, 1, 2), acked(4, 1, hw=4))})
    assert types(result) == ["acked-above-hw"]


def test_acks_below_all_are_not_held_to_the_isr() -> None:
    assert check({"n1": events("n1", leads(1, 1), acked(0, 1, acks=1))}).valid is True


def test_an_ack_is_judged_only_against_the_same_nodes_view_of_the_same_epoch() -> None:
    # n2's view never judges n1's ack; a follower has no view; an ack of another epoch than
    # the one the node's events describe cannot be judged.
    result = check({
        "n1": events("n1", leads(2, 1, 2), kinds.BecameFollower(topic="t0", partition=0, leader_epoch=3, leader=2,
                                                          log_end=5), acked(0, 3), leads(4, 1, 2), acked(1, 3)),
        "n2": events("n2", leads(3, 2)),
    })
    assert result.valid is True and (result.stats["acks_judged"], result.stats["acks_unjudged"]) == (0, 2)


def test_it_never_says_valid_about_what_it_did_not_read() -> None:
    sent = History()
    sent.send(0, 0, "v0", 0)
    no_events = check({}, history=sent)
    assert no_events.valid == "unknown" and "no node event" in no_events.stats["unjudged_because"]
    assert check({}).valid is True  # nothing acknowledged, nothing to hold
    unconfigured = check({"n1": events("n1", leads(1, 1), acked(0, 1))}, config=False)
    assert unconfigured.valid == "unknown" and "configuration" in unconfigured.stats["unjudged_because"]


# ----------------------------------------------------------------------------- StrongIsr


def appended(offset: int, epoch: int, *values: str, role: str = "leader") -> kinds.Appended:
    return kinds.Appended(topic="t0", partition=0, offset=offset, epoch=epoch, values=values, role=role)


def hw(previous: int, to: int, epoch: int) -> kinds.HwChanged:
    return kinds.HwChanged(topic="t0", partition=0, leader_epoch=epoch, role="leader", previous=previous,
                     high_watermark=to, log_end=to)


def test_a_commit_counted_on_members_that_hold_it_is_valid() -> None:
    result = check({
        "n1": events("n1", leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 2, 1)),
        "n2": events("n2", appended(0, 1, "a", "b", role="follower"), leads(2, 2, 1)),
    })
    assert result.valid is True and result.stats["committed_checked"] == 2
    # Brokers known by their leaderships, whatever the nodes are called.
    renamed = check({
        "alpha": events("alpha", leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 2, 1)),
        "beta": events("beta", appended(0, 1, "a", "x", role="follower"), leads(2, 2),
                       kinds.BecameFollower(topic="t0", partition=0, leader_epoch=3, leader=1, log_end=2)),
    })
    assert types(renamed) == ["isr-member-lacks-committed"] and renamed.anomalies[0].details["member"] == "beta"


def test_an_isr_member_that_never_held_a_committed_record_is_caught() -> None:
    # KAFKA-7128's shape: n2 sits in n1's ISR with another value at offset 1 (a divergent
    # log it never truncated), and n1 commits offset 1 counting it.
    result = check({
        "n1": events("n1", leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 2, 1)),
        "n2": events("n2", appended(0, 0, "a", "x", role="follower"), leads(2, 2, 1)),
    })
    assert types(result) == ["isr-member-lacks-committed"]
    anomaly = result.anomalies[0]
    assert anomaly.offsets == (1,) and anomaly.details["member"] == "n2" and anomaly.events == (("n1", 2),)


def test_a_record_written_but_announced_only_at_recovery_is_held() -> None:
    # CI flake of session 10 (Docker, seed 7): n2 was SIGKILLed after writing offset 1 to its
    # log but before its ``appended`` event; the restart announces the recovered tail.
    def n2(*recovered: kinds.NodeEventBody) -> list[NodeEvent]:
        return events("n2", appended(0, 1, "a", role="follower"), kinds.Started(), *recovered,
                      kinds.BecameFollower(topic="t0", partition=0, leader_epoch=1, leader=1, log_end=2),
                      leads(2, 2, 1))
    n1 = events("n1", leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 2, 1))
    assert check({"n1": n1, "n2": n2(appended(1, 1, "b", role="recovery"))}).valid is True
    unannounced = check({"n1": n1, "n2": n2()})
    assert types(unannounced) == ["isr-member-lacks-committed"] and unannounced.anomalies[0].offsets == (1,)


def test_truncated_records_are_no_longer_the_leaders_to_commit() -> None:
    result = check({
        "n1": events("n1", leads(1, 1, 2), appended(0, 1, "a", "z"),
                     kinds.Truncated(topic="t0", partition=0, leader_epoch=1, from_offset=2, to_offset=1, reason="recovery"),
                     appended(1, 1, "b"), hw(0, 2, 1)),
        "n2": events("n2", appended(0, 1, "a", "b", role="follower"), leads(2, 2, 1)),
    })
    assert result.valid is True


def test_a_replicas_record_keeps_what_it_held_before_it_was_written_over_or_cut() -> None:
    from floodmark.checkers.invariants import Appends

    record = Appends()
    assert record.append(0, ("a", "b")) is False and record.append(4, ("e",)) is False  # a gap at 2..3
    assert record.log == ["a", "b", None, None, "e"]
    assert record.append(1, ("x", "y")) is True  # written over at 1, filled at 2
    record.truncate(2)
    assert record.log == ["a", "x"]
    assert all(record.ever_held(o, v) for o, v in ((0, "a"), (1, "b"), (1, "x"), (2, "y"), (4, "e")))
    assert not record.ever_held(3, "e") and not record.ever_held(0, "b")


def expands(epoch: int, *isr: int) -> kinds.IsrChanged:
    return kinds.IsrChanged(topic="t0", partition=0, leader_epoch=epoch, isr=isr, zk_version=4, change="expand")


def leads_at(epoch: int, high_watermark: int, *isr: int) -> kinds.BecameLeader:
    return kinds.BecameLeader(topic="t0", partition=0, leader_epoch=epoch, isr=isr, log_end=high_watermark,
                              high_watermark=high_watermark)


def test_a_member_admitted_below_the_hw_must_hold_what_is_already_committed() -> None:
    # KAFKA-6361's end: n2 led epoch 1 and wrote x at offset 1 where n3 (which never
    # followed it) has b; n3 leads epoch 2, commits offset 1 alone, and then takes n2 back
    # into its ISR, whose log still has x there. No later HW advance covers offset 1 again.
    result = check({
        "n3": events("n3", appended(0, 0, "a", "b", role="follower"), leads(2, 3), hw(0, 2, 2),
                     appended(2, 2, "c"), expands(2, 3, 2), hw(2, 3, 2)),
        "n2": events("n2", appended(0, 0, "a", role="follower"), leads(1, 2, 3), appended(1, 1, "x"),
                     appended(2, 2, "c", role="follower")),
    })
    assert types(result) == ["isr-member-lacks-committed"]
    anomaly = result.anomalies[0]
    assert anomaly.offsets == (1,) and anomaly.details["member"] == "n2" and anomaly.events == (("n3", 4),)  # the expansion
    # The same story where n2 fetched b before it was admitted is the protocol at work.
    healed = check({
        "n3": events("n3", appended(0, 0, "a", "b", role="follower"), leads(2, 3), hw(0, 2, 2),
                     appended(2, 2, "c"), expands(2, 3, 2), hw(2, 3, 2)),
        "n2": events("n2", appended(0, 0, "a", role="follower"), leads(1, 2, 3), appended(1, 1, "x"),
                     kinds.Truncated(topic="t0", partition=0, leader_epoch=2, from_offset=2, to_offset=1,
                                     reason="leader_epoch"),
                     appended(1, 0, "b", "c", role="follower")),
    })
    assert healed.valid is True


def test_an_elected_leaders_isr_is_held_to_the_hw_it_starts_from() -> None:
    # n1 starts epoch 3 with HW 2 and n2 in its ISR, but n2 never had offset 1.
    lacking = check({
        "n1": events("n1", appended(0, 0, "a", "b", role="follower"), leads_at(3, 2, 1, 2)),
        "n2": events("n2", appended(0, 0, "a", role="follower"), leads(1, 2)),
    })
    assert types(lacking) == ["isr-member-lacks-committed"] and lacking.anomalies[0].offsets == (1,)
    holding = check({
        "n1": events("n1", appended(0, 0, "a", "b", role="follower"), leads_at(3, 2, 1, 2)),
        "n2": events("n2", appended(0, 0, "a", "b", role="follower"), leads(1, 2)),
    })
    assert holding.valid is True and holding.stats["committed_checked"] == 2


def test_a_follower_that_never_led_is_known_by_the_id_it_gave_as_controller() -> None:
    # n3 never led t0/0 (it hosts the controller); n1 counts it in epoch 2 at offset 1,
    # which n3 holds with another value (a stale fetch counted by a leader that moved away
    # and came back, KIP-320).
    def run(*n3: kinds.NodeEventBody) -> CheckerResult:
        return check({
            "n1": events("n1", leads(2, 1, 3), appended(0, 1, "a", "b"), hw(0, 2, 2)),
            "n3": events("n3", *n3, appended(0, 0, "a", "x", role="follower")),
        })
    known = run(kinds.ControllerElected(controller_epoch=1, broker=3))
    assert types(known) == ["isr-member-lacks-committed"] and known.anomalies[0].details["member"] == "n3"
    assert run().valid is True  # unknown by id: not held to commits (never guessed)
