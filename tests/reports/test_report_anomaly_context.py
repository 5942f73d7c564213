"""The context of an anomaly: neighbouring ops of the partition and the nodes' events."""

from __future__ import annotations

from report_fixtures import node_event, run_data_from

from floodmark.contracts.history import Op
from floodmark.contracts.node_events import (
    Appended,
    BecameFollower,
    BecameLeader,
    HwChanged,
    Started,
    Truncated,
)
from floodmark.reports.anomaly_context import ContextBuilder, ContextTables, EventRow, Gap, OpRow


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
    tp: dict = {"topic": "t0", "partition": 0}
    events = {
        "n1": [node_event("n1", 0, BecameLeader(**tp, leader_epoch=1, isr=(1, 2), log_end=10, high_watermark=10)),
               node_event("n1", 1, Appended(**tp, offset=10, epoch=1, values=("a", "b"), role="leader")),
               node_event("n1", 2, Appended(topic="t0", partition=1, offset=0, epoch=1, values=("x",), role="leader")),
               node_event("n1", 3, HwChanged(**tp, leader_epoch=1, role="leader", previous=10, high_watermark=12,
                                             log_end=12))],
        "n2": [node_event("n2", 0, BecameFollower(**tp, leader_epoch=1, leader=1, log_end=12)),
               node_event("n2", 1, Truncated(**tp, leader_epoch=2, from_offset=12, to_offset=10,
                                             reason="diverging_epoch"))],
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


def test_witness_on_another_partition_is_shown_highlighted_among_its_own_partition() -> None:
    data = run_data_from(_history(20))
    # the anomaly is on t0/0; op 23 (ok of send k=11) is on t0/1 and witnesses it too
    context = ContextBuilder(data).build({"topic": "t0", "partition": 0, "offsets": [5], "ops": [21, 23]})
    same, other = context.witnesses
    assert (same.partition, same.elsewhere) == ("t0/0", False)
    assert (other.witness, other.partition, other.elsewhere) == (23, "t0/1", True)
    rows = [r for r in other.rows if isinstance(r, OpRow)]
    assert all(data.history[r.index].value["partition"] == 1 for r in rows)
    assert [r.index for r in rows] == [15, 18, 19, 22, 23, 26, 27, 30]
    assert [r.index for r in rows if r.witness] == [22, 23]


def test_witness_whose_value_names_no_partition_still_appears_highlighted() -> None:
    ops = _history(6)
    ops.append(Op(len(ops), len(ops) * 1000, "invoke", 5, "drain", None))
    ops.append(Op(len(ops), len(ops) * 1000, "ok", 5, "drain", None))
    ops += [Op(len(ops) + i, (len(ops) + i) * 1000, op.type, op.process, op.f, op.value)
            for i, op in enumerate(_history(4))]
    data = run_data_from(ops)
    [block] = ContextBuilder(data).build({"topic": "t0", "partition": 0, "ops": [13]}).witnesses
    rows = [r for r in block.rows if isinstance(r, OpRow)]
    assert (block.partition, block.elsewhere) == ("t0/0", False)
    assert [r.index for r in rows if r.witness] == [12, 13]
    assert [r.index for r in rows] == [5, 8, 9, 12, 13, 14, 15, 18]


def test_context_tables_hold_every_op_and_event_a_payload_refers_to() -> None:
    tp: dict = {"topic": "t0", "partition": 0}
    events = {"n1": [node_event("n1", 0, BecameLeader(**tp, leader_epoch=1, isr=(1,), log_end=5, high_watermark=5)),
                     node_event("n1", 1, Appended(**tp, offset=5, epoch=1, values=("<b>x</b>",), role="leader")),
                     node_event("n1", 2, Started())]}
    data = run_data_from(_history(20), events)
    tables = ContextTables()
    payload = tables.payload(ContextBuilder(data).build(
        {"topic": "t0", "partition": 0, "offsets": [5], "ops": [21, 23], "events": [["n1", 1]]}))
    data_tables = tables.tables()
    [same, other] = payload["witnesses"]
    assert other["partition"] == "t0/1" and other["elsewhere"] is True and other["highlight"] == [22, 23]
    for block in payload["witnesses"]:
        for item in block["rows"]:
            assert isinstance(item, list) or item in data_tables["ops"]
    assert data_tables["ops"][23][:4] == [0.000023, 0, "ok", "send"]
    [n1] = payload["nodes"]
    assert n1["rows"] == [0, 1] and n1["named"] == [1]  # the other partition's "started" is left out
    assert data_tables["events"]["n1"][1][0] == "appended" and '"<b>x</b>"' in data_tables["events"]["n1"][1][1]


def test_offsets_pick_the_events_about_them_in_a_long_event_stream() -> None:
    tp: dict = {"topic": "t0", "partition": 0}
    stream = [node_event("n1", 0, BecameLeader(**tp, leader_epoch=1, isr=(1,), log_end=0, high_watermark=0))]
    for k in range(1, 400):
        stream.append(node_event("n1", k, Appended(**tp, offset=(k - 1) * 5, epoch=1, values=("v",) * 5,
                                                   role="leader")))
    stream.append(node_event("n1", 400, HwChanged(**tp, leader_epoch=1, role="leader", previous=0,
                                                  high_watermark=1995, log_end=1995)))
    data = run_data_from(_history(2), {"n1": stream})
    [n1] = ContextBuilder(data).build({"topic": "t0", "partition": 0, "offsets": [1000], "ops": []}).nodes
    seqs = [r.seq for r in n1.rows if isinstance(r, EventRow)]
    assert 201 in seqs  # appended at offsets 1000-1004
    assert 0 in seqs and 400 in seqs  # the leadership change; the HW move over offset 1000 (a long span)
    assert [r.seq for r in n1.rows if isinstance(r, EventRow) and 199 <= r.seq <= 203] == [199, 200, 201, 202, 203]
