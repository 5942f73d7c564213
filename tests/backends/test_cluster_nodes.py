"""The node-control interface on each backend: addresses, exec, users, files, teardown."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_fixtures import BACKENDS, ask, leftovers, standin_cluster
from kazoo.client import KazooClient

from floodmark.harness.cluster import BROKER_USER, Cluster, Node
from floodmark.run_dirs.rundir import RunDir


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request):  # type: ignore[no-untyped-def]
    with standin_cluster(request.param) as running:
        yield running


def test_every_node_implements_the_interface_and_has_its_own_address(cluster) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(cluster, Cluster)
    assert [n.name for n in cluster.nodes] == ["zk", "n1", "n2", "n3"]
    assert [b.broker_id for b in cluster.brokers] == [1, 2, 3]
    assert len({n.ip for n in cluster.nodes}) == 4
    for node in cluster.nodes:
        assert isinstance(node, Node)
        assert node.is_running() and node.pid() is not None
        addresses = node.exec(["ip", "-o", "-4", "addr", "show"]).stdout
        assert f" {node.ip}/" in addresses, addresses
        others = [n.ip for n in cluster.nodes if n is not node]
        assert not any(f" {ip}/" in addresses for ip in others)
    assert cluster.bootstrap_addresses == [b.address for b in cluster.brokers]


def test_zookeeper_serves_the_harness(cluster) -> None:  # type: ignore[no-untyped-def]
    client = KazooClient(hosts=cluster.zookeeper_address, timeout=10)
    client.start(timeout=10)
    try:
        client.ensure_path("/floodmark-test")
        assert client.exists("/floodmark-test")
    finally:
        client.stop()
        client.close()


def test_the_broker_user_obeys_file_permissions(cluster) -> None:  # type: ignore[no-untyped-def]
    node = cluster.brokers[0]
    secret = f"{node.log_dirs[0]}/secret"
    assert node.exec(["sh", "-c", f"echo s > {secret} && chmod 000 {secret}"], user=BROKER_USER).ok
    denied = node.exec(["cat", secret], user=BROKER_USER)
    assert not denied.ok and "Permission denied" in denied.stderr
    assert node.exec(["chmod", "600", secret], user=BROKER_USER).ok  # it owns the file
    assert node.exec(["cat", secret], user=BROKER_USER).stdout == "s\n"
    assert node.exec(["rm", "-f", secret], user=BROKER_USER).ok


def test_broker_processes_run_unprivileged_under_libfaketime(cluster) -> None:  # type: ignore[no-untyped-def]
    for broker in cluster.brokers:
        pid = broker.pid()
        status = broker.exec(["cat", f"/proc/{pid}/status"]).stdout
        environ = broker.exec(["cat", f"/proc/{pid}/environ"], user=BROKER_USER).stdout
        assert "libfaketime" in environ and "FAKETIME_TIMESTAMP_FILE" in environ
        effective = next(line for line in status.splitlines() if line.startswith("CapEff"))
        capabilities = int(effective.split()[1], 16)
        assert not capabilities & (1 << 1), "CAP_DAC_OVERRIDE must be gone"
        assert not capabilities & (1 << 2), "CAP_DAC_READ_SEARCH must be gone"


def test_files_copy_both_ways(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    node = cluster.brokers[1]
    source = tmp_path / "in.txt"
    source.write_text("payload")
    target = f"{node.log_dirs[1]}/in.txt"
    node.copy_to(source, target)
    assert node.exec(["cat", target]).stdout == "payload"
    node.copy_from(target, tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_text() == "payload"
    node.write_file(target, "replaced\n", user=BROKER_USER)
    assert node.exec(["cat", target]).stdout == "replaced\n"


def test_stop_start_and_pid(cluster) -> None:  # type: ignore[no-untyped-def]
    node = cluster.brokers[2]
    before = node.pid()
    node.stop(timeout=5)
    assert not node.is_running() and node.pid() is None
    node.start()
    deadline = time.monotonic() + 10
    while ask(node.address, timeout=0.5) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    answer = ask(node.address)
    assert answer is not None and answer[1] == node.pid() != before


@pytest.mark.parametrize("backend", BACKENDS)
def test_teardown_collects_logs_and_data_then_removes_everything(backend: str, tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "run")
    with standin_cluster(backend, brokers=2) as running:
        node = running.brokers[0]
        assert node.exec(["sh", "-c", f"echo x > {node.log_dirs[0]}/00.log"], user=BROKER_USER).ok
        assert node.exec(["chmod", "000", node.log_dirs[1]], user=BROKER_USER).ok  # a fault left on
        run_id = running.run_id
        running.teardown(collect_into=run_dir)
        assert leftovers(backend, run_id) == []
    logs = run_dir.node_logs("n1")
    assert (logs / "broker.log").read_text().startswith("--- floodmark: starting n1")
    assert (logs / "data" / "logdir0" / "00.log").read_text() == "x\n"
    assert (run_dir.node_logs("zk") / "zookeeper.log").exists()
