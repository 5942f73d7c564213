"""Kills: kill -9 ends the process; the restart is a new process that finds its data intact."""

from __future__ import annotations

import random

import pytest
from cluster_fixtures import BACKENDS, FakeCluster, FakeView, ask, standin_cluster

from floodmark.harness.cluster import BROKER_USER
from floodmark.nemesis.base import NemesisContext
from floodmark.nemesis.kill import KillNemesis


def test_kill_controller_kills_the_controller_and_stop_restarts_it() -> None:
    cluster = FakeCluster()
    ctx = NemesisContext(view=FakeView(controller=2))
    nemesis = KillNemesis()
    action = nemesis.start(random.Random(1), cluster, ctx, "controller")
    assert action["node"] == "n2" and action["signal"] == "SIGKILL" and action["pid"] == 100
    assert cluster.node("n2").signals == ["KILL"]
    assert nemesis.stop(cluster, ctx) == {"restarted": {"n2": 100}}
    assert cluster.node("n2").signals == ["KILL", "START"]


def test_missing_controller_falls_back_to_a_random_broker_and_says_so() -> None:
    action = KillNemesis().start(random.Random(1), FakeCluster(), NemesisContext(view=FakeView()),
                                 "controller")
    assert "fallback" in action and action["signal"] == "SIGKILL"


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request):  # type: ignore[no-untyped-def]
    with standin_cluster(request.param) as running:
        yield running


@pytest.mark.parametrize("shape", ["random", "clean-restart"])
def test_kill_ends_the_process_and_restart_keeps_its_data(cluster, shape: str) -> None:  # type: ignore[no-untyped-def]
    ctx = NemesisContext(view=FakeView(), zk_session_timeout=2.0)
    for broker in cluster.brokers:
        marker = f"{broker.log_dirs[0]}/marker"
        assert broker.exec(["sh", "-c", f"echo {broker.name} > {marker}"], user=BROKER_USER).ok
    nemesis = KillNemesis()
    action = nemesis.start(random.Random(5), cluster, ctx, shape)
    node = cluster.node(action["node"])
    assert not node.is_running() and node.pid() is None
    assert ask(node.address, timeout=0.5) is None
    assert node.exec(["sh", "-c", f"kill -0 {action['pid']}"]).exit_code != 0
    restarted = nemesis.stop(cluster, ctx)
    new_pid = restarted["restarted"][node.name]
    assert new_pid is not None and new_pid != action["pid"] and node.pid() == new_pid
    from floodmark.backends.readiness import wait_for_port

    wait_for_port(node.address, 10)
    assert ask(node.address)[1] == new_pid  # type: ignore[index]
    marker = node.exec(["cat", f"{node.log_dirs[0]}/marker"])
    assert marker.stdout == f"{node.name}\n"


def test_heal_all_restarts_whatever_is_down(cluster) -> None:  # type: ignore[no-untyped-def]
    ctx = NemesisContext(view=FakeView())
    victim = cluster.brokers[-1]
    victim.kill()
    assert not victim.is_running()
    healed = KillNemesis().heal_all(cluster, ctx)
    assert list(healed["restarted"]) == [victim.name]
    assert victim.is_running()
