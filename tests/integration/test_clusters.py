"""Real clusters of the reference broker, on both backends, under each nemesis.

These prove the faults reach the system under test, not just the machine: a disk fault makes
the broker take its log directory offline (its own ``log_dir_offline`` event); a kill of the
controller moves the controller and the restarted broker rejoins with its data; a long pause
and an isolating partition cost the controller its ZooKeeper session and its office; a clock
bump shows in the wall time the broker stamps on its own events.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))

from cluster_fixtures import BACKENDS, require_docker, require_local, view_of  # noqa: E402

from floodmark.backends.node_faults import NodeFaultApplier  # noqa: E402
from floodmark.backends.readiness import wait_for_registration  # noqa: E402
from floodmark.backends.zk_view import ZooKeeperView  # noqa: E402
from floodmark.harness.cluster import BROKER_USER, Cluster, ClusterSpec, Node  # noqa: E402
from floodmark.harness.faults import ClockSkew, DiskFault, FaultPlan  # noqa: E402
from floodmark.nemesis.compose import Composite  # noqa: E402
from floodmark.reference.protocol import zk_layout  # noqa: E402

SESSION_TIMEOUT = 6.0  # the broker default; shorter ones make start-up flaky on a loaded machine


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def events(node: Node) -> list[dict[str, Any]]:
    assert node.events_path is not None
    text = node.exec(["cat", node.events_path], user=BROKER_USER).stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def events_about(node: Node, topic: str) -> list[dict[str, Any]]:
    return [e for e in events(node) if e.get("topic") == topic]


def hosts_in_every_dir(broker: Node, topic: str) -> bool:
    return all(topic in broker.exec(["ls", d], user=BROKER_USER).stdout for d in broker.log_dirs)


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    if importlib.util.find_spec("floodmark.reference.real.process") is None:
        pytest.skip("the reference broker (floodmark.reference.real.process) is not in this tree")
    spec = ClusterSpec(brokers=3, broker_args=("--zk-session-timeout", str(SESSION_TIMEOUT)))
    if request.param == "local":
        require_local()
        from floodmark.backends.local import LocalCluster

        running: Cluster = LocalCluster(spec)
    else:
        require_docker()
        from floodmark.backends.docker import DockerCluster

        running = DockerCluster(spec)
    running.setup()
    try:
        yield running
    finally:
        running.teardown()


@pytest.fixture
def view(cluster: Cluster) -> Iterator[ZooKeeperView]:
    zookeeper = ZooKeeperView(cluster.zookeeper_address)
    try:
        yield zookeeper
    finally:
        zookeeper.close()


def controller_of(view: ZooKeeperView) -> int | None:
    return view.roles(())[0]


class Faults:
    """Plans faults from the live roles and applies them to the cluster, as a run does."""

    def __init__(self, cluster: Cluster, view: ZooKeeperView) -> None:
        self.cluster, self.view = cluster, view
        self.applier = NodeFaultApplier(cluster, stop_timeout=2 * SESSION_TIMEOUT)

    def start(self, kind: str, shape: str, seed: int, duration: float = 5.0) -> tuple[FaultPlan, dict[str, Any]]:
        snapshot = view_of(self.cluster, controller_of(self.view), session_timeout=SESSION_TIMEOUT)
        plan, how = Composite([kind]).plan(kind, random.Random(seed), snapshot, shape, duration)
        return plan, {**how, **asyncio.run(self.applier.apply(plan))}

    def stop(self, plan: FaultPlan) -> dict[str, Any]:
        return asyncio.run(self.applier.heal(plan))  # type: ignore[no-any-return]


def all_registered(cluster: Cluster) -> None:
    wait_for_registration(cluster.zookeeper_address, {b.broker_id for b in cluster.brokers
                                                      if b.broker_id is not None}, 60)


def test_a_controller_is_elected_among_the_brokers(cluster: Cluster, view: ZooKeeperView) -> None:
    controller = wait_for("a controller", lambda: controller_of(view))
    assert controller in {b.broker_id for b in cluster.brokers}


def test_killing_the_controller_moves_it_and_the_restart_keeps_its_data(
        cluster: Cluster, view: ZooKeeperView) -> None:
    old = wait_for("a controller", lambda: controller_of(view))
    node = cluster.broker(old)
    listing = node.exec(["sh", "-c", f"ls -a {' '.join(node.log_dirs)}"], user=BROKER_USER).stdout
    faults = Faults(cluster, view)
    plan, action = faults.start("kill", "controller", 1)
    assert action["broker_id"] == old and not node.is_running()
    wait_for("a new controller", lambda: controller_of(view) not in (None, old),
             timeout=SESSION_TIMEOUT * 5)
    restarted = faults.stop(plan)
    assert restarted["restarted"][node.name] != action["pid"]
    all_registered(cluster)
    after = node.exec(["sh", "-c", f"ls -a {' '.join(node.log_dirs)}"], user=BROKER_USER).stdout
    assert set(listing.split()) <= set(after.split())


def test_a_long_pause_costs_the_controller_its_office(cluster: Cluster, view: ZooKeeperView) -> None:
    old = wait_for("a controller", lambda: controller_of(view))
    faults = Faults(cluster, view)
    length = Composite(["pause"]).duration("pause", "controller-long", 5.0, SESSION_TIMEOUT, random.Random(2))
    plan, action = faults.start("pause", "controller-long", 2, duration=length)
    try:
        assert action["broker_id"] == old and action["longer_than_session"] and length > SESSION_TIMEOUT
        wait_for("a new controller while the old one is paused",
                 lambda: controller_of(view) not in (None, old), timeout=length + 10)
    finally:
        faults.stop(plan)
    all_registered(cluster)


def test_isolating_the_controller_moves_it_and_heal_brings_the_broker_back(
        cluster: Cluster, view: ZooKeeperView) -> None:
    old = wait_for("a controller", lambda: controller_of(view))
    faults = Faults(cluster, view)
    plan, action = faults.start("partition", "isolate-controller", 3)
    try:
        assert action["broker_id"] == old
        wait_for("a new controller", lambda: controller_of(view) not in (None, old),
                 timeout=SESSION_TIMEOUT * 6)
    finally:
        faults.stop(plan)
    all_registered(cluster)


def create_topic(cluster: Cluster, prefix: str, partitions: int) -> str:
    """A new topic with every partition on every broker, written straight to ZooKeeper."""
    from kazoo.client import KazooClient

    topic = f"{prefix}{random.Random().randrange(10**6)}"
    ids = tuple(sorted(b.broker_id for b in cluster.brokers if b.broker_id is not None))
    assignment = zk_layout.TopicAssignment(topic, {p: ids for p in range(partitions)}, {})
    client = KazooClient(hosts=cluster.zookeeper_address)
    client.start()
    try:
        client.create(zk_layout.topic_path(topic), zk_layout.encode_topic(assignment), makepath=True)
    finally:
        client.stop()
        client.close()
    return topic


def test_a_clock_bump_shows_in_the_wall_time_of_the_brokers_events(
        cluster: Cluster, view: ZooKeeperView) -> None:
    faults = Faults(cluster, view)
    plan, _ = faults.start("clock", "bump-forward", 4)
    assert isinstance(plan, ClockSkew)
    try:
        topic = create_topic(cluster, "clock", 1)
        for name, offset, _ in plan.clocks:
            node = cluster.node(name)
            about_topic = wait_for(f"{name} to act on {topic}", partial(events_about, node, topic))
            skew = about_topic[0]["wall"] - time.time()
            assert offset - 15 <= skew <= offset + 1, (name, skew, offset)
    finally:
        faults.stop(plan)


def test_a_disk_fault_takes_the_log_dir_offline(cluster: Cluster, view: ZooKeeperView) -> None:
    # The broker finds out when it next writes there: give every log dir some partitions.
    topic = create_topic(cluster, "disk", 4)
    for broker in cluster.brokers:
        wait_for(f"{broker.name} to host {topic} in every log dir",
                 partial(hosts_in_every_dir, broker, topic))
    faults = Faults(cluster, view)
    plan, _ = faults.start("disk", "chmod", 5)
    assert isinstance(plan, DiskFault)
    node = cluster.node(plan.node)
    try:
        offline = wait_for(f"{node.name} to report {plan.directory} offline", lambda: [
            e for e in events(node) if e["kind"] == "log_dir_offline"], timeout=30)
        assert offline[0]["dir"] == plan.directory
        assert node.is_running(), "a log dir failure must not crash the broker"
    finally:
        faults.stop(plan)
    node.stop()  # a directory comes back online only with a restart (KIP-112)
    node.start()
    all_registered(cluster)
