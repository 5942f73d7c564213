"""The context of an anomaly: neighbouring ops of the partition and the nodes' events."""

from __future__ import annotations

from report_fixtures import node_event, run_data_from

from floodmark.history import Op
from floodmark.reports.anomaly_context import ContextBuilder, EventRow, Gap, OpRow


def _history(n_sends: int) -> list[Op]:
    """Alternating sends on t0/0 and t0/1, each invoke followed by its ok."""
    ops: list[Op] = []
    for k in range(n_sends):
        value = {"topic": "t0", "partition": k % 2, "value": f"0-{k}"}
        ops.append(Op(len(ops), len(ops) * 1000, "invoke", 0, "send", value))
        ops.append(Op(len(ops), len(ops) * 1000, "ok", 0, "send", {**value, "offset": k // 2}))
    return ops


def test_witness_is_shown_with_ops_of_its_own_partition_only() -> None:
    data = run_data_from(_history(20))
    witness = 21  # ok of send k=10 on partition 0, offset 5
    context = ContextBuilder(data).build({"topic": "t0", "partition": 0, "offsets": [5], "ops": [witness]})
    [block] = context.witnesses
    rows = [r for r in block.rows if isinstance(r, OpRow)]
    assert all(data.history[r.index].value["partition"] == 0 for r in rows)
    assert [r.index for r in rows] == [13, 16, 17, 20, 21, 24, 25, 28]  # 3 before, the pair, 3 after
    assert [r.index for r in rows if r.witness] == [20, 21]


def test_long_flights_are_elided_with_a_stated_gap() -> None:
    ops = [Op(0, 0, "invoke", 9, "send", {"topic": "t0", "partition": 0, "value": "slow"})]
    for k in range(30):
        value = {"topic": "t0", "partition": 0, "value": f"1-{k}"}
        ops.append(Op(len(ops), len(ops), "invoke", 1, "send", value))
        ops.append(Op(len(ops), len(ops), "ok", 1, "send", {**value, "offset": k}))
    ops.append(Op(len(ops), len(ops), "info", 9, "send", ops[0].value, error="timeout"))
    data = run_data_from(ops)
    [block] = ContextBuilder(data).build({"topic": "t0", "partition": 0, "ops": [0]}).witnesses
    gaps = [r for r in block.rows if isinstance(r, Gap)]
    shown = [r for r in block.rows if isinstance(r, OpRow)]
    assert len(gaps) == 1 and gaps[0].count + len(shown) == len(ops)
    assert shown[0].index == 0 and shown[-1].index == 61 and shown[-1].error == '"timeout"'


def test_node_events_stay_per_node_in_seq_order_with_named_events_marked() -> None:
    tp = {"topic": "t0", "partition": 0}
    events = {
        "n1": [node_event("n1", 0, "became_leader", **tp, leader_epoch=1, isr=[1, 2]),
               node_event("n1", 1, "appended", **tp, offset=10, epoch=1, values=["a", "b"], role="leader"),
               node_event("n1", 2, "appended", topic="t0", partition=1, offset=0, epoch=1, values=["x"], role="leader"),
               node_event("n1", 3, "hw_changed", **tp, previous=10, high_watermark=12, leader_epoch=1)],
        "n2": [node_event("n2", 0, "became_follower", **tp, leader_epoch=1, leader=1),
               node_event("n2", 1, "truncated", **tp, from_offset=12, to_offset=10, leader_epoch=2)],
    }
    data = run_data_from(_history(2), events)
    context = ContextBuilder(data).build({"topic": "t0", "partition": 0, "offsets": [11], "ops": [],
                                          "events": [["n2", 1]]})
    assert [n.node for n in context.nodes] == ["n1", "n2"]
    n1 = [r for r in context.nodes[0].rows if isinstance(r, EventRow)]
    assert [r.seq for r in n1] == [0, 1, 3]  # the other partition's event is left out
    n2 = [r for r in context.nodes[1].rows if isinstance(r, EventRow)]
    assert [(r.seq, r.named) for r in n2] == [(0, False), (1, True)]
    assert "from_offset=12" in n2[1].summary and "topic" not in n2[1].summary


def test_out_of_range_witnesses_are_ignored_not_fatal() -> None:
    data = run_data_from(_history(2))
    context = ContextBuilder(data).build({"ops": [99, -1, "x"], "topic": None, "partition": None})
    assert context.witnesses == [] and context.nodes == []
