"""Pauses: SIGSTOP really stops a process's progress, and it resumes on its own or at stop."""

from __future__ import annotations

import random
import time

import pytest
from cluster_fixtures import BACKENDS, FakeCluster, FakeView, ask, standin_cluster, ticks

from floodmark.nemesis.base import NemesisContext
from floodmark.nemesis.pause import LONG, SHORT, PauseNemesis


@pytest.mark.parametrize("shape,bounds", [("random-short", SHORT), ("controller-long", LONG)])
def test_duration_lies_on_the_chosen_side_of_the_session_timeout(shape: str, bounds) -> None:  # type: ignore[no-untyped-def]
    cluster = FakeCluster()
    nemesis = PauseNemesis()
    ctx = NemesisContext(view=FakeView(controller=3), zk_session_timeout=6.0)
    action = nemesis.start(random.Random(9), cluster, ctx, shape)
    try:
        assert bounds[0] * 6.0 <= action["duration"] <= bounds[1] * 6.0
        if shape.startswith("controller"):
            assert action["node"] == "n3"
        assert cluster.node(action["node"]).signals == ["STOP"]
    finally:
        stopped = nemesis.stop(cluster, ctx)
    assert stopped["resumed"]["node"] == action["node"]
    assert cluster.node(action["node"]).signals == ["STOP", "CONT"]


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request):  # type: ignore[no-untyped-def]
    with standin_cluster(request.param) as running:
        yield running


def test_a_paused_process_makes_no_progress_until_resumed(cluster) -> None:  # type: ignore[no-untyped-def]
    nemesis = PauseNemesis()
    ctx = NemesisContext(view=FakeView(), zk_session_timeout=30.0)  # no auto-resume here
    action = nemesis.start(random.Random(2), cluster, ctx, "random-long")
    node = cluster.node(action["node"])
    try:
        assert action["pid"] == node.pid()
        time.sleep(0.2)
        frozen = ticks(node)
        time.sleep(0.5)
        assert ticks(node) == frozen, "a paused process kept ticking"
        assert ask(node.address, timeout=0.5) is None, "a paused process answered"
        others = [b for b in cluster.brokers if b.name != node.name]
        before = ticks(others[0])
        time.sleep(0.2)
        assert ticks(others[0]) > before, "only the chosen process is paused"
    finally:
        nemesis.stop(cluster, ctx)
    time.sleep(0.2)
    assert ticks(node) > frozen
    assert ask(node.address) is not None


def test_a_short_pause_ends_by_itself(cluster) -> None:  # type: ignore[no-untyped-def]
    nemesis = PauseNemesis()
    ctx = NemesisContext(view=FakeView(), zk_session_timeout=1.0)
    action = nemesis.start(random.Random(4), cluster, ctx, "random-short")
    node = cluster.node(action["node"])
    frozen = ticks(node)
    time.sleep(action["duration"] + 0.5)
    assert ticks(node) > frozen, "the pause did not end after its duration"
    stopped = nemesis.stop(cluster, ctx)
    assert stopped["resumed"]["paused_for"] >= action["duration"]
