"""Composition: nemeses by kind, shapes for the schedule, and a heal-all that survives failures."""

from __future__ import annotations

import random

import pytest
from cluster_fixtures import FakeCluster, FakeView

from floodmark.harness.cluster import ExecResult
from floodmark.nemesis.base import NemesisContext, NemesisError
from floodmark.nemesis.compose import KINDS, Composite, parse_kinds

# What `cat /proc/<pid>/stat /proc/uptime; date` prints for a process started 5 s after boot.
PROC_ANSWER = "100 (python3) " + " ".join(["S"] + ["0"] * 18 + ["500", "0"]) + "\n1000.00 9.0\n1795000000.5\n"
CTX = NemesisContext(view=FakeView(controller=1), partitions=[("t0", 0)])


def test_parse_kinds() -> None:
    assert parse_kinds("all") == KINDS == ("partition", "clock", "pause", "disk", "kill")
    assert parse_kinds("kill, clock") == ("kill", "clock")
    with pytest.raises(ValueError, match="unknown nemesis flood"):
        parse_kinds("partition,flood")


def test_every_kind_lists_its_shapes_and_starts_each_of_them() -> None:
    composite = Composite(KINDS)
    shapes = composite.shapes()
    assert set(shapes) == set(KINDS)
    for kind, kind_shapes in shapes.items():
        assert kind_shapes, kind
        for shape in kind_shapes:
            cluster = FakeCluster(5)
            for node in cluster.nodes:
                node.exec_result = ExecResult(0, PROC_ANSWER if kind == "clock" else "755\n", "")
            action = composite.start(kind, random.Random(0), cluster, CTX, shape)
            assert action.get("shape", shape) == shape
            composite.stop(kind, cluster, CTX)


def test_heal_all_runs_every_kind_even_when_one_fails() -> None:
    cluster = FakeCluster()
    composite = Composite(["disk", "kill", "partition"])
    cluster.brokers[0].running = False
    for node in cluster.nodes:
        node.exec_result = ExecResult(1, "", "iptables: broken")
    report = composite.heal_all(cluster, CTX)
    assert "error" in report["partition"] and "iptables: broken" in report["partition"]["error"]
    assert "error" in report["disk"]
    assert report["kill"] == {"restarted": {"n1": 100}}
    assert list(report) == ["disk", "partition", "kill"]  # restarts come last


def test_asking_for_a_kind_not_in_the_test_is_an_error() -> None:
    with pytest.raises(NemesisError, match="no 'clock' nemesis"):
        Composite(["kill"]).start("clock", random.Random(0), FakeCluster(), CTX)
