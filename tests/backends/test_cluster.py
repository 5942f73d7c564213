"""The node-control interface's shared parts: run specs, command lines, ZooKeeper config."""

from __future__ import annotations

import pytest
from cluster_fixtures import FakeCluster

from floodmark.harness.cluster import (
    ClusterSpec,
    broker_argv,
    find_broker,
    find_node,
    new_run_id,
    standin_argv,
    zookeeper_config,
)


def test_spec_rejects_bad_values_with_the_field_name() -> None:
    with pytest.raises(ValueError, match="brokers: must be between 1 and 9"):
        ClusterSpec(brokers=10)
    with pytest.raises(ValueError, match="run_id"):
        ClusterSpec(run_id="has-dash")
    assert len(new_run_id()) == 6 and new_run_id() != new_run_id()


def test_broker_command_line_carries_identity_variant_and_seed() -> None:
    spec = ClusterSpec(brokers=3, variant="truncate-to-hw", seed=40, broker_args=("--x", "1"))
    argv = broker_argv("python3", 2, "10.0.0.10:2181", ["/d/0", "/d/1"], "10.0.0.12:9092",
                       "/e.jsonl", spec)
    joined = " ".join(argv[3:])
    assert "--id 2 --zookeeper 10.0.0.10:2181 --log-dirs /d/0,/d/1" in joined
    assert "--listen 10.0.0.12:9092 --advertise 10.0.0.12:9092 --events /e.jsonl" in joined
    assert "--variant truncate-to-hw --seed 42 --x 1" in joined
    spec = ClusterSpec(brokers=3, broker_args=("--run-id", "0eb44760cb914ca5"))  # (as the runner gives them)
    argv = broker_argv("python3", 2, "z:2181", ["/d/0"], "h:9092", "/e.jsonl", spec)
    assert argv[-2:] == ["--run-id", "0eb44760cb914ca5"]
    assert "floodmark.reference.real.process" in argv[2]


def test_standin_substitution_leaves_other_braces_alone() -> None:
    assert standin_argv(["x", "{port}", "f'{a}'", "{id}"], 9092, 3) == ["x", "9092", "f'{a}'", "3"]


def test_zookeeper_config_is_standalone_without_admin_server() -> None:
    config = zookeeper_config("/data", 2181)
    assert "dataDir=/data" in config and "clientPort=2181" in config
    assert "admin.enableServer=false" in config and "4lw.commands.whitelist=" in config


def test_find_node_and_broker() -> None:
    cluster = FakeCluster()
    assert find_node(cluster.nodes, "zk").role == "zookeeper"
    assert find_broker(cluster.nodes, 2).name == "n2"
    with pytest.raises(KeyError, match="no node named 'n9'"):
        find_node(cluster.nodes, "n9")
