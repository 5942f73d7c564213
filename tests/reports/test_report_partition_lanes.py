"""The per-partition lane chart built from node events (leader epochs as columns)."""

from __future__ import annotations

from report_fixtures import node_event

from floodmark.contracts.node_events import (
    Appended,
    BecameFollower,
    BecameLeader,
    ControllerElected,
    HwChanged,
    IsrChanged,
    LeaderElected,
    LogDirOffline,
    Rejected,
    Started,
    Truncated,
)
from floodmark.reports.partition_lanes import build_partition_lanes, render_partition_lanes

TP: dict = {"topic": "t0", "partition": 0}


def _events() -> dict:
    return {
        "n1": [node_event("n1", 0, LeaderElected(**TP, leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1,
                                                 zk_version=0, unclean=False)),
               node_event("n1", 1, BecameLeader(**TP, leader_epoch=0, isr=(1, 2), log_end=0, high_watermark=0)),
               node_event("n1", 2, Appended(**TP, offset=0, epoch=0, values=("a", "b"), role="leader")),
               node_event("n1", 3, HwChanged(**TP, leader_epoch=0, role="leader", previous=0, high_watermark=2,
                                             log_end=2)),
               node_event("n1", 4, IsrChanged(**TP, leader_epoch=0, isr=(1,), zk_version=1, change="shrink")),
               node_event("n1", 5, LeaderElected(**TP, leader=2, leader_epoch=1, isr=(2,), controller_epoch=1,
                                                 zk_version=2, unclean=True)),
               node_event("n1", 6, BecameFollower(**TP, leader_epoch=1, leader=2, log_end=2)),
               node_event("n1", 7, Truncated(**TP, leader_epoch=1, from_offset=2, to_offset=1, reason="leader_epoch"))],
        # n2's wall clock is far behind n1's: the chart must not care
        "n2": [node_event("n2", 0, BecameFollower(**TP, leader_epoch=0, leader=1, log_end=0)),
               node_event("n2", 1, Appended(**TP, offset=0, epoch=0, values=("a",), role="follower")),
               node_event("n2", 2, BecameLeader(**TP, leader_epoch=1, isr=(2,), log_end=1, high_watermark=1)),
               node_event("n2", 3, Rejected(**TP, request="Fetch", why="stale epoch", leader_epoch=0))],
    }


def test_cells_by_node_and_epoch() -> None:
    [lanes] = build_partition_lanes(_events())
    assert lanes.label == "t0/0" and lanes.epochs == [0, 1] and lanes.nodes == ["n1", "n2"]
    n1_e0, n1_e1 = lanes.cells[("n1", 0)], lanes.cells[("n1", 1)]
    assert n1_e0.role == "leader" and n1_e0.high_watermarks == [0, 2] and n1_e0.isr_sizes == [2, 1]
    assert n1_e1.role == "follower" and n1_e1.truncations == [(2, 1, "leader_epoch")] and n1_e1.log_end == 1
    n2_e1 = lanes.cells[("n2", 1)]
    assert n2_e1.role == "leader" and n2_e1.refusals == 1  # the rejection happened in n2's epoch 1
    assert lanes.cells[("n2", 0)].log_end == 1
    assert [e.unclean for e in lanes.elections[1]] == [True] and lanes.max_high_watermark == 2


def test_svg_has_a_column_per_epoch_and_flags_unclean_elections_and_truncations() -> None:
    [lanes] = build_partition_lanes(_events())
    svg = render_partition_lanes(lanes)
    assert svg.count('class="epoch"') == 2
    assert 'class="election unclean"' in svg and "UNCLEAN" in svg
    assert "✂2→1" in svg and "rejected×1" in svg and 'class="hw-line"' in svg
    assert svg.count('<g class="cell leader">') == 2


def test_events_without_partition_are_ignored() -> None:
    events = {"n1": [node_event("n1", 0, Started()),
                     node_event("n1", 1, ControllerElected(controller_epoch=1, broker=1))]}
    assert build_partition_lanes(events) == []


def test_a_failed_log_directory_marks_its_partitions_in_the_current_epoch() -> None:
    events = _events()
    events["n2"].append(node_event("n2", 4, LogDirOffline(dir="/data/a", error="EIO", partitions=(("t0", 0),))))
    events["n2"].append(node_event("n2", 5, LogDirOffline(dir="/data/b", error="EIO", partitions=(("t0", 7),))))
    [lanes] = build_partition_lanes(events)
    assert lanes.cells[("n2", 1)].offline and not lanes.cells[("n2", 0)].offline
    assert not any(cell.offline for (node, _), cell in lanes.cells.items() if node == "n1")
    assert "dir offline" in render_partition_lanes(lanes)
