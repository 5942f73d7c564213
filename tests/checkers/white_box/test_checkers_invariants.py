"""White-box invariants: acks=all acknowledgements held against the leader's own ISR and HW."""

from __future__ import annotations

from checkers_fixtures import History, events

from floodmark.checkers.api import CheckInput
from floodmark.checkers.white_box.hw import HighWatermarkChecker
from floodmark.checkers.white_box.invariants import InvariantsChecker
from floodmark.checkers.white_box.leader import LeaderChecker
from floodmark.contracts import node_events as kinds
from floodmark.contracts.node_events import NodeEvent
from floodmark.contracts.results import CheckerResult
from floodmark.contracts.run_config import TestConfig


def check(node_events: dict[str, list[NodeEvent]], *, min_isr: int = 2, history: History | None = None,
          config: bool = True) -> CheckerResult:
    ops = history.ops if history is not None else []
    # A run of as many brokers as the test gives events of (see event_coverage).
    stated = TestConfig(acks="all", min_insync_replicas=min_isr, nodes=max(1, len(node_events)))
    return InvariantsChecker().check(CheckInput(ops, node_events, stated if config else None))


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
    n1 = events("n1", leads(1, 1), acked(0, 1, acks=1))
    acks_1 = TestConfig(acks="1", min_insync_replicas=2, nodes=1)
    assert InvariantsChecker().check(CheckInput([], {"n1": n1}, acks_1)).valid is True
    # A run whose producers asked for acks=all: an ack recorded as acks=1 is held to no ISR, so
    # a leader alone in its ISR passed unjudged (VALID); it is unknown, saying why.
    result = check({"n1": n1})
    assert result.valid == "unknown" and result.anomalies == []
    assert "1 acknowledgements record acks other than all" in result.stats["unjudged_because"]


def test_an_ack_is_judged_only_against_the_same_nodes_view_of_the_same_epoch() -> None:
    # n2's view never judges n1's ack; a follower has no view; an ack of another epoch than
    # the one the node's events describe cannot be judged.
    result = check({
        "n1": events("n1", leads(2, 1, 2), kinds.BecameFollower(topic="t0", partition=0, leader_epoch=3, leader=2,
                                                          log_end=5), acked(0, 3), leads(4, 1, 2), acked(1, 3)),
        "n2": events("n2", leads(3, 2)),
    })
    # (held to nothing, so never valid: an ack of another epoch may be below min.insync.replicas)
    assert result.valid == "unknown" and (result.stats["acks_judged"], result.stats["acks_unjudged"]) == (0, 2)
    assert "2 acks=all acknowledgements are of a leader epoch" in result.stats["unjudged_because"]


def test_it_never_says_valid_about_what_it_did_not_read() -> None:
    sent = History()
    sent.send(0, 0, "v0", 0)
    no_events = check({}, history=sent)
    assert no_events.valid == "unknown" and "no node event" in no_events.stats["unjudged_because"]
    nothing = check({})  # nothing acknowledged, but no broker said anything either
    assert nothing.valid == "unknown" and "no node events" in nothing.stats["unjudged_because"]
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
    # beta also became leader of epoch 2 without the b that alpha committed in epoch 1.
    assert types(renamed) == ["isr-member-lacks-committed", "leader-lacks-committed"]
    assert renamed.anomalies[0].details["member"] == "beta" and renamed.anomalies[1].details["node"] == "beta"


def test_a_commit_stated_in_another_epoch_than_the_leader_is_in_is_never_valid() -> None:
    # n1 leads epoch 1 and commits offset 1, which its ISR member n2 never held; its
    # hw_changed names epoch 9. Held to no leader view, the commit passed: VALID.
    n2 = events("n2", kinds.Started(broker=2), appended(0, 0, "a", "x", role="follower"))
    result = check({"n1": events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a", "b"),
                                 hw(0, 2, 9)), "n2": n2})
    assert result.valid == "unknown" and "1 hw_changed events state another leader epoch" in \
        result.stats["unjudged_because"]
    stated = check({"n1": events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a", "b"),
                                 hw(0, 2, 1)), "n2": n2})
    assert types(stated) == ["isr-member-lacks-committed"]


def test_an_isr_member_that_never_held_a_committed_record_is_caught() -> None:
    # KAFKA-7128's shape: n2 sits in n1's ISR with another value at offset 1 (a divergent
    # log it never truncated), and n1 commits offset 1 counting it.
    result = check({
        "n1": events("n1", leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 2, 1)),
        "n2": events("n2", appended(0, 0, "a", "x", role="follower"), leads(2, 2, 1)),
    })
    assert types(result) == ["isr-member-lacks-committed", "leader-lacks-committed"]  # n2 led without b
    anomaly = result.anomalies[0]
    assert anomaly.offsets == (1,) and anomaly.details["member"] == "n2" and anomaly.events == (("n1", 2),)
    # Both values are named: the member's log diverges there, it does not merely lack the record.
    assert "never held offsets 1 ('b')" in anomaly.explanation
    assert "diverge there: n2 holds 1 ('x') instead" in anomaly.explanation
    assert anomaly.details["member_holds_instead"] == {"1": "x"}


def test_a_member_that_lacks_a_committed_record_is_not_said_to_diverge() -> None:
    result = check({
        "n1": events("n1", leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 2, 1)),
        "n2": events("n2", kinds.ControllerElected(controller_epoch=1, broker=2), appended(0, 1, "a", role="follower")),
    })
    lacks = [a for a in result.anomalies if a.type == "isr-member-lacks-committed"]
    assert len(lacks) == 1 and lacks[0].offsets == (1,)
    assert "diverge" not in lacks[0].explanation and "member_holds_instead" not in lacks[0].details


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
    assert types(unannounced) == ["isr-member-lacks-committed", "leader-lacks-committed"]
    assert unannounced.anomalies[0].offsets == (1,)


def test_records_clients_saw_committed_that_no_leader_records_committing_are_unknown_not_valid() -> None:
    # Clients were acknowledged a and b (acks=all) and read them: committed. The events record
    # the leader acknowledging them, but not appending them, or not moving its HW past them,
    # or not becoming leader: StrongIsr and the committed prefix judged nothing of them.
    sent = History()
    sent.send(0, 0, "a", 0)
    sent.send(0, 0, "b", 1)
    follower = events("n2", kinds.Started(broker=2), appended(0, 1, "a", "b", role="follower"))
    whole = [kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 2, 1), acked(1, 1, hw=2)]
    assert check({"n1": events("n1", *whole), "n2": follower}, history=sent).valid is True
    for left_out in (kinds.Appended, kinds.HwChanged, kinds.BecameLeader):
        part = [body for body in whole if type(body) is not left_out]
        result = check({"n1": events("n1", *part), "n2": follower}, history=sent)
        assert result.valid == "unknown", left_out
        assert "clients saw t0/0 committed up to HW 2" in result.stats["unjudged_because"]
    # Committed only up to offset 1 by the events, where clients saw offset 1 committed too.
    short = check({"n1": events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 1, 1),
                                acked(0, 1, hw=1)),
                   "n2": follower}, history=sent)
    assert short.valid == "unknown" and short.stats["exposed_beyond_commits"] == {"t0/0": [2, 1]}
    # What the events do record still proves a violation.
    lacking = check({"n1": events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 1, 1),
                                  acked(1, 1, hw=1)),
                     "n2": follower}, history=sent)
    assert lacking.valid is False


def test_truncated_records_are_no_longer_the_leaders_to_commit() -> None:
    result = check({
        "n1": events("n1", leads(1, 1, 2), appended(0, 1, "a", "z"),
                     kinds.Truncated(topic="t0", partition=0, leader_epoch=1, from_offset=2, to_offset=1, reason="recovery"),
                     appended(1, 1, "b"), hw(0, 2, 1)),
        "n2": events("n2", appended(0, 1, "a", "b", role="follower"), leads(2, 2, 1)),
    })
    assert result.valid is True


def test_a_replicas_record_keeps_what_it_held_before_it_was_written_over_or_cut() -> None:
    from floodmark.checkers.white_box.replica_logs import Appends

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
    # Nobody says which broker n3 is: member 3 is not guessed, and the run cannot be valid.
    unknown = run()
    assert unknown.valid == "unknown" and unknown.stats["isr_members_unjudged"] == [3]


def test_a_broker_says_its_id_when_it_starts() -> None:
    def run(n3_says: int | None) -> CheckerResult:
        return check({
            "n1": events("n1", kinds.Started(broker=1), leads(2, 1, 3), appended(0, 1, "a", "b"), hw(0, 2, 2)),
            "n3": events("n3", kinds.Started(broker=n3_says), appended(0, 0, "a", "x", role="follower")),
        })
    assert types(run(3)) == ["isr-member-lacks-committed"]
    assert run(None).valid == "unknown"
    # A file's name says nothing: "n3" that says it is broker 7 leaves member 3 unjudged.
    assert run(7).valid == "unknown" and run(7).stats["isr_members_unjudged"] == [3]


# ----------------------------------------------------------------------------- what the run promised


def test_a_run_that_asked_for_acks_below_all_is_not_unknown_for_lacking_acks_all() -> None:
    sent = History()
    sent.send(0, 0, "v0", 0)
    n1 = events("n1", leads(1, 1), acked(0, 1, acks=1))
    acks_one = InvariantsChecker().check(CheckInput(sent.ops, {"n1": n1}, TestConfig(acks=1, nodes=1)))
    assert acks_one.valid is True
    acks_all = InvariantsChecker().check(CheckInput(sent.ops, {"n1": n1}, TestConfig(acks="all", nodes=1)))
    assert acks_all.valid == "unknown"  # acks=all was asked for, and no event says so


def test_an_isr_member_counts_once_however_often_it_is_named() -> None:
    result = check({"n1": events("n1", leads(1, 1, 1), acked(0, 1))})
    assert types(result) == ["acked-below-min-isr"]


def test_a_run_whose_events_miss_a_broker_is_unknown_but_what_is_wrong_still_counts() -> None:
    n1 = events("n1", leads(1, 1, 2, 3), acked(0, 1))
    config = TestConfig(acks="all", min_insync_replicas=2, nodes=3)
    partial = InvariantsChecker().check(CheckInput([], {"n1": n1}, config))
    assert partial.valid == "unknown" and "1 of the 3 brokers" in partial.stats["unjudged_because"]
    wrong = events("n1", leads(1, 1), acked(0, 1))
    assert InvariantsChecker().check(CheckInput([], {"n1": wrong}, config)).valid is False


# ----------------------------------------------------------------------------- the committed prefix


def truncated(to: int, epoch: int, *, frm: int = 3) -> kinds.Truncated:
    return kinds.Truncated(topic="t0", partition=0, leader_epoch=epoch, from_offset=frm, to_offset=to,
                           reason="high_watermark")


def test_a_later_leader_lacking_committed_records_is_caught_though_no_client_saw_them() -> None:
    # truncate-to-hw's story: n2 truncated committed a1, a2 away, led epoch 2 and wrote b1, b2.
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a0", "a1", "a2"), hw(0, 3, 1),
                kinds.BecameFollower(topic="t0", partition=0, leader_epoch=2, leader=2, log_end=3),
                truncated(1, 2), appended(1, 2, "b1", "b2", role="follower"))
    n2 = events("n2", kinds.Started(broker=2), appended(0, 1, "a0", "a1", "a2", role="follower"), truncated(1, 1),
                leads(2, 2), appended(1, 2, "b1", "b2"))
    result = check({"n1": n1, "n2": n2})
    lacking = [a for a in result.anomalies if a.type == "leader-lacks-committed"]
    assert len(lacking) == 1 and lacking[0].offsets == (1, 2) and lacking[0].details["node"] == "n2"
    assert lacking[0].details["committed_in"] == [1]


def test_a_leader_is_judged_by_its_log_when_it_took_over_not_by_what_it_fetched_later() -> None:
    # n2 led epoch 2 without a1 (committed by n1 in epoch 1), then as a follower truncated
    # and fetched a1 back: its final log holds a1, its log when it led did not.
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a0", "a1"), hw(0, 2, 1),
                leads(3, 1, 2))
    n2 = events("n2", kinds.Started(broker=2), appended(0, 1, "a0", role="follower"), leads(2, 2),
                appended(1, 2, "z"),
                kinds.BecameFollower(topic="t0", partition=0, leader_epoch=3, leader=1, log_end=2),
                truncated(1, 3, frm=2), appended(1, 1, "a1", role="follower"))
    lacking = [a for a in check({"n1": n1, "n2": n2}).anomalies if a.type == "leader-lacks-committed"]
    assert [(a.details["node"], a.offsets) for a in lacking] == [("n2", (1,))]


def test_a_later_leader_holding_every_committed_record_is_valid() -> None:
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a0", "a1"), hw(0, 2, 1),
                appended(2, 1, "a2"))  # a2 never committed: a new leader may lack it
    n2 = events("n2", kinds.Started(broker=2), appended(0, 1, "a0", "a1", role="follower"), leads(2, 2),
                appended(2, 2, "b2"))
    assert check({"n1": n1, "n2": n2}).valid is True


def test_a_log_a_restart_lost_without_a_truncation_is_judged_as_the_broker_states_it() -> None:
    # A power loss early in a run took n2's whole log (files and HW checkpoint never synced):
    # the restarted broker recovers nothing, so it says nothing of what it lost, and takes
    # its first role with log end 0 (as in the simulator, seed 13, nemesis all). Leading so,
    # it lacks the records n1 committed, though its events once appended them.
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a0", "a1"), hw(0, 2, 1))

    def n2(log_end: int, *after: kinds.NodeEventBody) -> list[NodeEvent]:
        return events("n2", kinds.Started(broker=2), appended(0, 1, "a0", "a1", role="follower"), kinds.Started(broker=2),
                      kinds.BecameLeader(topic="t0", partition=0, leader_epoch=2, isr=(2,), log_end=log_end,
                                         high_watermark=0), *after)
    emptied = check({"n1": n1, "n2": n2(0)})
    assert types(emptied) == ["leader-lacks-committed"] and emptied.anomalies[0].offsets == (0, 1)
    assert check({"n1": n1, "n2": n2(1)}).anomalies[0].offsets == (1,)
    assert check({"n1": n1, "n2": n2(2)}).valid is True  # it recovered both
    # Once the process has a role, its log changes only as its events say.
    later = n2(2, kinds.BecameFollower(topic="t0", partition=0, leader_epoch=3, leader=1, log_end=0),
               leads(4, 2))
    assert check({"n1": n1, "n2": later}).valid is True


def test_a_recovery_after_a_power_loss_permits_what_it_lost_where_the_history_says_so() -> None:
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1), appended(0, 1, "a0", "a1"), hw(0, 2, 1))
    n2 = events("n2", kinds.Started(broker=2), leads(2, 2),
                kinds.LeaderElected(topic="t0", partition=0, leader=2, leader_epoch=2, isr=(2,), controller_epoch=1,
                                    zk_version=2, unclean=True, recovery=True))
    without = [a for a in check({"n1": n1, "n2": n2}, min_isr=1).anomalies if a.type == "leader-lacks-committed"]
    assert without and without[0].details["permitted_by"].startswith("min_insync_replicas=1")
    powered = History()
    powered.power_loss("n1")
    lacking = [a for a in check({"n1": n1, "n2": n2}, history=powered).anomalies
               if a.type == "leader-lacks-committed"]
    assert lacking and "lost unsynced writes" in lacking[0].details["permitted_by"]
    unpowered = [a for a in check({"n1": n1, "n2": n2}).anomalies if a.type == "leader-lacks-committed"]
    assert unpowered and "permitted_by" not in unpowered[0].details


# ----------------------------------------------------------------------------- below a replica's own HW


def follower_hw(previous: int, to: int, epoch: int, *, log_end: int | None = None) -> kinds.HwChanged:
    return kinds.HwChanged(topic="t0", partition=0, leader_epoch=epoch, role="follower", previous=previous,
                           high_watermark=to, log_end=to if log_end is None else log_end)


def follows(epoch: int, leader: int, log_end: int) -> kinds.BecameFollower:
    return kinds.BecameFollower(topic="t0", partition=0, leader_epoch=epoch, leader=leader, log_end=log_end)


def cut(frm: int, to: int, epoch: int, reason: str = "diverging_epoch") -> kinds.Truncated:
    return kinds.Truncated(topic="t0", partition=0, leader_epoch=epoch, from_offset=frm, to_offset=to, reason=reason)


# n3 led epoch 1 and committed a, not x; n1 (which fetched a only) leads epoch 2 alone and
# commits b and c at offsets 1 and 2; n2 followed n3 (a and x, its HW 1: x above it) and now
# follows n1. No leader counts n2 in its ISR, and n2 never leads: only its own HW judges it.
BELOW_HW_LEADERS = {
    "n3": events("n3", kinds.Started(broker=3), leads(1, 3, 2), appended(0, 1, "a", "x"), hw(0, 1, 1)),
    "n1": events("n1", kinds.Started(broker=1), appended(0, 1, "a", role="follower"), leads_at(2, 1, 1),
                 appended(1, 2, "b", "c"), hw(1, 3, 2)),
}
N2_BEFORE = (kinds.Started(broker=2), appended(0, 1, "a", "x", role="follower"), follower_hw(0, 1, 1, log_end=2),
             follows(2, 1, 2))


def test_a_follower_that_keeps_a_divergent_record_below_its_hw_is_caught() -> None:
    # The truncate-on-fetch mutation: on the diverging-epoch answer "epoch 1 ends at 1" n2
    # truncated to 2 (one too high), kept x at offset 1, fetched c on top and moved its HW
    # to 3 past x. StrongIsr never looks at n2 (no ISR holds it), nor does the committed
    # prefix (it never leads): the run was valid.
    n2 = events("n2", *N2_BEFORE, appended(2, 2, "c", role="follower"), follower_hw(1, 3, 2),
                appended(3, 2, "d", role="follower"), follower_hw(3, 4, 2))
    result = check({**BELOW_HW_LEADERS, "n2": n2})
    assert types(result) == ["replica-diverges-below-hw"]  # once, not again at each later HW move
    anomaly = result.anomalies[0]
    assert anomaly.offsets == (1,) and anomaly.events == (("n2", 5),)
    assert anomaly.details["holds"] == {"1": "x"} and anomaly.details["committed"] == {"1": "b"}
    assert (anomaly.details["node"], anomaly.details["high_watermark"], anomaly.details["role"]) == ("n2", 3, "follower")
    assert anomaly.details["committed_in"] == [2] and "permitted_by" not in anomaly.details
    assert "offset (held, not committed): 1 ('x', not 'b')" in anomaly.explanation
    # The configuration's permission is named, as for leader-lacks-committed.
    permitted = check({**BELOW_HW_LEADERS, "n2": n2}, min_isr=1).anomalies
    assert [a.type for a in permitted] == ["replica-diverges-below-hw"]
    assert permitted[0].details["permitted_by"].startswith("min_insync_replicas=1")
    # A leader's own HW is held to the same facts: n1, after a first leadership (epoch 2)
    # that committed b, c, writes y over b as leader of epoch 4 and moves its HW past it.
    n1 = events("n1", *[e.body for e in BELOW_HW_LEADERS["n1"]], leads_at(4, 3, 1), appended(1, 4, "y"),
                hw(3, 4, 4))
    overwritten = check({"n3": BELOW_HW_LEADERS["n3"], "n1": n1})
    assert "replica-diverges-below-hw" in types(overwritten)


def test_a_follower_that_truncates_at_the_divergence_and_fetches_on_is_valid() -> None:
    # The protocol at work: n2 truncates to 1 and fetches b and c; its HW moves below its
    # log end first (the leader's HW had not reached it), then to the end.
    n2 = events("n2", *N2_BEFORE, cut(2, 1, 2), appended(1, 2, "b", "c", role="follower"),
                follower_hw(1, 2, 2, log_end=3), follower_hw(2, 3, 2))
    result = check({**BELOW_HW_LEADERS, "n2": n2})
    assert result.valid is True and result.stats["below_hw_checked"] > 0
    # A truncation below the HW (a flawed variant's, or a restart's recovery) and a
    # re-fetch of the very records committed there is no divergence either.
    again = events("n2", *[e.body for e in n2], cut(3, 1, 2), follower_hw(3, 1, 2),
                   appended(1, 2, "b", "c", role="follower"), follower_hw(1, 3, 2))
    assert check({**BELOW_HW_LEADERS, "n2": again}).valid is True


def test_a_restart_with_a_lagging_or_lost_hw_checkpoint_is_valid() -> None:
    fetched = (cut(2, 1, 2), appended(1, 2, "b", "c", role="follower"), follower_hw(1, 3, 2))
    # The checkpoint says HW 1: the restart announces what its log holds above it.
    lagging = events("n2", *N2_BEFORE, *fetched, kinds.Started(broker=2), appended(1, 2, "b", "c", role="recovery"),
                     follows(2, 1, 3), appended(3, 2, "d", role="follower"), follower_hw(1, 4, 2))
    assert check({**BELOW_HW_LEADERS, "n2": lagging}).valid is True
    # Checkpoint lost and the log's tail with it (a power loss): the log ends at 1 and no HW
    # is stated until the next move, from 0, over the records fetched again.
    lost = events("n2", *N2_BEFORE, *fetched, kinds.Started(broker=2), cut(3, 1, -1, reason="recovery"),
                  follows(2, 1, 1), appended(1, 2, "b", "c", "d", role="follower"), follower_hw(0, 4, 2))
    assert check({**BELOW_HW_LEADERS, "n2": lost}).valid is True
    # A power loss that took the whole log says nothing of it: the first role's log end does.
    emptied = events("n2", *N2_BEFORE, *fetched, kinds.Started(broker=2), follows(2, 1, 0),
                     appended(0, 1, "a", role="follower"), follower_hw(0, 1, 2))
    assert check({**BELOW_HW_LEADERS, "n2": emptied}).valid is True


def test_offsets_no_leader_records_committing_are_not_judged_below_a_hw() -> None:
    # n2's HW covers offset 1, but no leader's events record committing it (n1's HW moves
    # are left out): nothing proves x was not the record committed there.
    n1 = events("n1", kinds.Started(broker=1), appended(0, 1, "a", role="follower"), leads_at(2, 1, 1),
                appended(1, 2, "b", "c"))
    n2 = events("n2", *N2_BEFORE, appended(2, 2, "c", role="follower"), follower_hw(1, 3, 2))
    result = check({"n3": BELOW_HW_LEADERS["n3"], "n1": n1, "n2": n2})
    assert result.valid is True


# ----------------------------------------------------------------------------- hostile offsets


def test_a_log_starting_at_a_huge_offset_costs_nothing_below_it() -> None:
    base = 300_000_000
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(base, 1, "a"), hw(base, base + 1, 1))
    n2 = events("n2", kinds.Started(broker=2), appended(base, 1, "a", role="follower"))
    assert check({"n1": n1, "n2": n2}).valid is True


def test_an_append_far_past_the_log_end_is_not_padded_but_unjudged() -> None:
    n1 = events("n1", kinds.Started(broker=1), appended(0, 1, "a"), appended(10**12, 1, "b"))
    result = check({"n1": n1})
    assert result.valid == "unknown" and "cannot be replayed" in result.stats["unjudged_because"]


def test_a_stray_file_does_not_stand_in_for_a_missing_broker() -> None:
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2, 3), acked(0, 1))
    n2 = events("n2", kinds.Started(broker=2))
    stray = events("n4", kinds.Started(broker=4))
    result = check({"n1": n1, "n2": n2, "n4": stray})  # three files, three brokers configured
    assert result.valid == "unknown" and "broker 3" in result.stats["unjudged_because"]
    twice = check({"n1": n1, "n2": n2, "n3": events("n3", kinds.Started(broker=2))})
    assert twice.valid == "unknown" and "n2 and n3 both say they are broker 2" in twice.stats["unjudged_because"]


def test_a_file_that_names_no_broker_is_no_broker_once_others_name_theirs() -> None:
    """A stray file (here a ZooKeeper node's) cannot stand in for a missing broker: the
    white-box checkers, hw and leader included, say unknown."""
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2, 3), acked(0, 1))
    n2 = events("n2", kinds.Started(broker=2))
    stray = events("zk", kinds.BrokerState(state="Active", incarnation=1))
    for checker in (InvariantsChecker(), HighWatermarkChecker(), LeaderChecker()):
        result = checker.check(CheckInput([], events={"n1": n1, "n2": n2, "zk": stray},
                                          config=TestConfig(min_insync_replicas=2)))
        assert result.valid == "unknown", checker.name
        assert result.stats["unjudged_because"] == (
            "node events of 2 of the 3 brokers the configuration states (brokers 1, 2; zk names no broker)")


def test_events_missing_from_the_middle_of_a_file_leave_the_run_unjudged() -> None:
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2, 3), acked(0, 1))
    others = {f"n{b}": events(f"n{b}", kinds.Started(broker=b)) for b in (2, 3)}
    assert check({"n1": n1, **others}).valid is True
    cut = [n1[0], n1[2]]  # seq 1 deleted
    for checker in (InvariantsChecker(), HighWatermarkChecker(), LeaderChecker()):
        result = checker.check(CheckInput([], events={"n1": cut, **others}, config=TestConfig(min_insync_replicas=2)))
        assert result.valid == "unknown", checker.name
        assert result.stats["unjudged_because"] == "the events of n1 go from seq 0 to 2: 1 line(s) missing from its file"
    headless = CheckInput([], events={"n1": n1[1:], **others}, config=TestConfig(min_insync_replicas=2))
    assert "the events of n1 begin at seq 1" in InvariantsChecker().check(headless).stats["unjudged_because"]


def test_many_gaps_each_below_the_bound_are_not_padded_either() -> None:
    step = 9_000_000  # each gap below the bound, together far beyond it
    n1 = events("n1", kinds.Started(broker=1), *(appended(i * step, 1, f"v{i}") for i in range(12)))
    result = check({"n1": n1})
    assert result.valid == "unknown" and "cannot be replayed" in result.stats["unjudged_because"]


def test_events_of_more_brokers_than_the_configuration_states_are_not_judged_by_it() -> None:
    """A test.yaml stating fewer nodes than the events speak for is not the run's own: the
    white-box checkers say unknown, naming why (they said valid, judging the events of three
    brokers by the settings of a run of two)."""
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2, 3), acked(0, 1))
    n2, n3 = events("n2", kinds.Started(broker=2)), events("n3", kinds.Started(broker=3))
    for checker in (InvariantsChecker(), HighWatermarkChecker(), LeaderChecker()):
        for config in (TestConfig(nodes=3), TestConfig(nodes=2)):
            result = checker.check(CheckInput([], {"n1": n1, "n2": n2, "n3": n3}, config))
            if config.nodes == 3:
                assert result.valid is True, (checker.name, result.stats)
            else:
                assert result.valid == "unknown", checker.name
                assert result.stats["unjudged_because"].startswith(
                    "node events of 3 brokers (brokers 1, 2, 3), but the configuration states 2"), result.stats
    nameless = {n: events(n, kinds.BrokerState(state="Active", incarnation=1)) for n in ("n1", "n2", "n3")}
    result = LeaderChecker().check(CheckInput([], nameless, TestConfig(nodes=2)))
    assert result.valid == "unknown" and "events from n1, n2, n3" in result.stats["unjudged_because"]


def admits(epoch: int, joined: int, progress: int, *isr: int) -> kinds.IsrChanged:
    return kinds.IsrChanged(topic="t0", partition=0, leader_epoch=epoch, isr=isr, zk_version=4, change="expand",
                            joined=joined, joined_log_end=progress - 1, joined_progress=progress)


def test_an_expansion_that_lands_while_the_hw_is_beyond_the_joiner_is_caught() -> None:
    # Mutation analysis (third round): a leader whose HW ignored the follower it was admitting
    # (the ISR, not the maximal ISR) committed offset 1 while the write was in flight; n2
    # entered the ISR with its log ending at 1 and fetched offset 1 only later, which
    # StrongIsr, ordering nodes only by "ever held", cannot tell from the protocol at work.
    story = {"n1": events("n1", kinds.Started(broker=1), appended(0, 1, "a", "b"), leads_at(1, 0, 1, 3), hw(0, 2, 1), admits(1, 2, 1, 1, 2, 3)),
             "n2": events("n2", kinds.Started(broker=2), appended(0, 1, "a", "b", role="follower")),
             "n3": events("n3", kinds.Started(broker=3), appended(0, 1, "a", "b", role="follower"))}
    result = check(story)
    assert types(result) == ["isr-admitted-behind-hw"]
    anomaly = result.anomalies[0]
    assert anomaly.offsets == (1,) and anomaly.events == (("n1", 4),) and anomaly.details["joined"] == 2
    # The HW waiting for the joiner (at its progress) is the protocol at work.
    story["n1"] = events("n1", kinds.Started(broker=1), appended(0, 1, "a", "b"), leads_at(1, 0, 1, 3), hw(0, 1, 1), admits(1, 2, 1, 1, 2, 3))
    assert check(story).valid is True
    # So is a HW the joiner's progress covers, and one of another epoch; an older writer's
    # expansion (no progress recorded) is not judged.
    story["n1"] = events("n1", kinds.Started(broker=1), appended(0, 1, "a", "b"), leads_at(1, 0, 1, 3), hw(0, 2, 1), admits(1, 2, 2, 1, 2, 3))
    assert check(story).valid is True
    story["n1"] = events("n1", kinds.Started(broker=1), appended(0, 1, "a", "b"), leads_at(1, 0, 1, 3), hw(0, 2, 1),
                         kinds.IsrChanged(topic="t0", partition=0, leader_epoch=1, isr=(1, 2, 3), zk_version=4,
                                          change="expand", joined=2, joined_log_end=0))
    assert check(story).valid is True


def test_a_leader_log_rewritten_below_what_was_held_is_held_to_its_members_again() -> None:
    """What a member was found to hold is remembered per offset, until the leader's own log
    changes there: n1 commits a, b with n2 holding both, loses b (a truncation below its HW),
    writes x at offset 1 as the next epoch's leader and commits it counting n2, which never
    held x. Without forgetting what was checked from the truncation on, offset 1 passed as
    held (the finding lost; others of the breach remained)."""
    n1 = events("n1", kinds.Started(broker=1), leads(1, 1, 2), appended(0, 1, "a", "b"), hw(0, 2, 1),
                kinds.Truncated(topic="t0", partition=0, leader_epoch=1, from_offset=2, to_offset=1, reason="test"),
                kinds.HwChanged(topic="t0", partition=0, leader_epoch=1, role="leader", previous=2,
                                high_watermark=1, log_end=1),
                leads(2, 1, 2), appended(1, 2, "x"), hw(1, 2, 2))
    n2 = events("n2", kinds.Started(broker=2), appended(0, 1, "a", "b", role="follower"))
    lacks = [a for a in check({"n1": n1, "n2": n2}).anomalies if a.type == "isr-member-lacks-committed"]
    assert [(a.offsets, a.details["member"], a.details["leader_epoch"]) for a in lacks] == [((1,), "n2", 2)]
