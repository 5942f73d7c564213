"""Regressions found by an oracle hunt over generated node-event timelines (invariants checker).

Event files written before ``started`` named its broker are matched to broker ids by
inference. A leader elected uncleanly is not in the ISR it leads, so "the one id in every ISR
it held as leader" named another broker, whose ISR memberships were then held against this
node's log: a false ``isr-member-lacks-committed``.
"""

from __future__ import annotations

from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.checkers.white_box.invariants import InvariantsChecker
from floodmark.checkers.white_box.replica_logs import elected_leaders, first_pass
from floodmark.contracts.history import op_from_dict
from floodmark.contracts.node_events import NodeEvent, event_from_dict
from floodmark.contracts.run_config import TestConfig

P = {"topic": "t0", "partition": 0}


def _files(raw: dict[str, list[dict[str, Any]]]) -> dict[str, list[NodeEvent]]:
    return {node: [event_from_dict({"node": node, "seq": seq, "wall": 0.0, **line}) for seq, line in enumerate(lines)]
            for node, lines in raw.items()}


def _unclean_run(started: dict[str, Any]) -> dict[str, list[NodeEvent]]:
    """Broker 1 leads epoch 0, drops broker 3 from its ISR and commits v1 with ISR [1, 2];
    broker 3, which never fetched it, is elected uncleanly in epoch 1 with ISR [1, 2] (a real
    loss: it lacks v1)."""
    return _files({
        "n1": [{"kind": "started", **started.get("n1", {})},
               {"kind": "controller_elected", "controller_epoch": 1, "broker": 1, "zxid": 11},
               {"kind": "leader_elected", **P, "leader": 1, "leader_epoch": 0, "isr": [1, 2, 3], "controller_epoch": 1,
                "zk_version": 0, "unclean": False, "zxid": 12},
               {"kind": "became_leader", **P, "leader_epoch": 0, "isr": [1, 2, 3], "log_end": 0, "high_watermark": 0},
               {"kind": "appended", **P, "offset": 0, "epoch": 0, "values": ["v1"], "role": "leader"},
               {"kind": "isr_changed", **P, "leader_epoch": 0, "isr": [1, 2], "zk_version": 1, "change": "shrink",
                "zxid": 13},
               {"kind": "hw_changed", **P, "leader_epoch": 0, "role": "leader", "previous": 0, "high_watermark": 1,
                "log_end": 1},
               {"kind": "acked", **P, "offset": 0, "first_offset": 0, "high_watermark": 1, "acks": -1,
                "leader_epoch": 0},
               {"kind": "leader_elected", **P, "leader": 3, "leader_epoch": 1, "isr": [1, 2], "controller_epoch": 1,
                "zk_version": 2, "unclean": True, "zxid": 14},
               {"kind": "became_follower", **P, "leader_epoch": 1, "leader": 3, "log_end": 1}],
        "n2": [{"kind": "started", **started.get("n2", {})},
               {"kind": "became_follower", **P, "leader_epoch": 0, "leader": 1, "log_end": 0},
               {"kind": "appended", **P, "offset": 0, "epoch": 0, "values": ["v1"], "role": "follower", "epochs": [0]},
               {"kind": "became_follower", **P, "leader_epoch": 1, "leader": 3, "log_end": 1}],
        "n3": [{"kind": "started", **started.get("n3", {})},
               {"kind": "became_follower", **P, "leader_epoch": 0, "leader": 1, "log_end": 0},
               {"kind": "became_leader", **P, "leader_epoch": 1, "isr": [1, 2], "log_end": 0, "high_watermark": 0}],
    })


def _check(events: dict[str, list[NodeEvent]]) -> tuple[object, set[str], list[str]]:
    history = [op_from_dict(d) for d in (
        {"index": 0, "time": 1, "type": "invoke", "process": 0, "f": "send", "value": {**P, "value": "v1"}},
        {"index": 1, "time": 2, "type": "ok", "process": 0, "f": "send", "value": {**P, "value": "v1", "offset": 0}})]
    config = TestConfig(cluster="sim", nodes=3, topics=1, partitions=1, replication_factor=3, min_insync_replicas=2)
    result = InvariantsChecker().check(CheckInput(history, events, config))
    lacks = [a.details["member"] for a in result.anomalies if a.type == "isr-member-lacks-committed"]
    return result.valid, {a.type for a in result.anomalies}, lacks


def test_an_unclean_leader_is_the_broker_the_controller_elected_not_one_of_its_isr() -> None:
    events = _unclean_run({})  # older files: no started event names its broker
    assert first_pass("n3", events["n3"], elected=elected_leaders(events)).broker == 3
    valid, types, lacks = _check(events)
    assert lacks == []  # broker 2 (n2) holds v1; n3 is not broker 2
    assert types == {"leader-lacks-committed"}
    assert valid is False


def test_the_verdict_is_the_same_whether_files_name_their_broker_or_not() -> None:
    named = _unclean_run({f"n{i}": {"broker": i} for i in (1, 2, 3)})
    assert _check(named)[1:] == _check(_unclean_run({}))[1:]

