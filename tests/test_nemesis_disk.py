"""Disk faults: the broker's own (unprivileged) user is really denied, and heal gives it back."""

from __future__ import annotations

import random

import pytest
from cluster_fixtures import BACKENDS, FakeCluster, FakeView, standin_cluster

from floodmark.harness.cluster import BROKER_USER, ExecResult
from floodmark.nemesis.base import NemesisContext
from floodmark.nemesis.disk import DiskNemesis

CTX = NemesisContext(view=FakeView())


def test_chmod_fault_records_the_mode_it_restores() -> None:
    cluster = FakeCluster()
    for node in cluster.brokers:
        node.exec_result = ExecResult(0, "755\n", "")
    nemesis = DiskNemesis()
    action = nemesis.start(random.Random(1), cluster, CTX, "chmod")
    assert action["mode"] == "755" and action["dir"] in cluster.node(action["node"]).log_dirs
    argv, user = cluster.node(action["node"]).commands[-1]
    assert user == BROKER_USER and "chmod 000" in argv[2] and argv[-1] == action["dir"]
    healed = nemesis.stop(cluster, CTX)
    assert healed["healed"][0]["restored_mode"] == "755"
    argv, _ = cluster.node(action["node"]).commands[-1]
    assert argv[-2:] == [action["dir"], "755"]


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request):  # type: ignore[no-untyped-def]
    with standin_cluster(request.param) as running:
        yield running


def as_broker(node, script: str) -> ExecResult:  # type: ignore[no-untyped-def]
    return node.exec(["sh", "-c", script], user=BROKER_USER)


@pytest.mark.parametrize("shape,error", [("chmod", "Permission denied"),
                                         ("replace-with-file", "Not a directory")])
def test_the_broker_user_loses_its_log_dir_until_healed(cluster, shape: str, error: str) -> None:  # type: ignore[no-untyped-def]
    nemesis = DiskNemesis()
    for broker in cluster.brokers:
        for log_dir in broker.log_dirs:
            assert as_broker(broker, f"echo kept > {log_dir}/segment").ok
    action = nemesis.start(random.Random(6), cluster, CTX, shape)
    node, log_dir = cluster.node(action["node"]), action["dir"]
    try:
        for script in (f"ls {log_dir}/", f"cat {log_dir}/segment", f"touch {log_dir}/new"):
            denied = as_broker(node, script)
            assert not denied.ok and error in denied.stderr, (script, denied)
        other = next(d for d in node.log_dirs if d != log_dir)
        assert as_broker(node, f"cat {other}/segment").stdout == "kept\n"
    finally:
        healed = nemesis.stop(cluster, CTX)
    assert healed["healed"][0]["dir"] == log_dir
    assert as_broker(node, f"cat {log_dir}/segment").stdout == "kept\n"
    assert as_broker(node, f"touch {log_dir}/new && rm {log_dir}/new").ok


def test_heal_all_repairs_faults_nobody_remembers(cluster) -> None:  # type: ignore[no-untyped-def]
    DiskNemesis().start(random.Random(2), cluster, CTX, "chmod")
    DiskNemesis().start(random.Random(3), cluster, CTX, "replace-with-file")
    healed = DiskNemesis().heal_all(cluster, CTX)
    assert sum(len(lines) for lines in healed["healed"].values()) >= 2
    for broker in cluster.brokers:
        for log_dir in broker.log_dirs:
            assert as_broker(broker, f"ls {log_dir}").ok
