"""The reference's CLI tools: argument errors without a cluster, and a real ZooKeeper round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from zookeeper_server import ZooKeeperServer, missing_requirements

from floodmark import cli, errors
from floodmark.reference.protocol import zk_layout as zk


@pytest.mark.parametrize("argv,message", [
    (["topics", "--zookeeper", "h:1", "--create"], "--topic is required"),
    (["topics", "--zookeeper", "h:1", "--create", "--topic", "t"], "--create needs --partitions"),
    (["topics", "--zookeeper", "h:1", "--create", "--topic", "t", "--replica-assignment", "1:x"], "expected broker ids"),
    (["topics", "--zookeeper", "h:1", "--create", "--topic", "t", "--replica-assignment", "1:2,3"], "same number"),
    (["topics", "--zookeeper", "h:1", "--alter", "--topic", "t"], "--alter needs --partitions"),
    (["topics", "--zookeeper", "h:1", "--list", "--config", "novalue"], "KEY=VALUE"),
    (["reassign-partitions", "--zookeeper", "h:1", "--execute"], "needs --reassignment-json-file"),
    (["log-dirs", "--bootstrap", "h:1", "--describe", "--broker-list", "a"], "comma-separated ids"),
])
def test_bad_arguments_exit_254_with_a_clear_message(argv: list[str], message: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == errors.EXIT_BAD_ARGUMENTS
    assert message in capsys.readouterr().err


def test_malformed_reassignment_file_names_the_file_and_problem(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}')
    argv = ["reassign-partitions", "--zookeeper", "h:1", "--execute", "--reassignment-json-file", str(plan)]
    assert cli.main(argv) == errors.EXIT_BAD_ARGUMENTS
    err = capsys.readouterr().err
    assert str(plan) in err and "must not be empty" in err


def test_unreachable_bootstrap_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    from zookeeper_server import free_port
    argv = ["log-dirs", "--bootstrap", f"127.0.0.1:{free_port()}", "--describe"]
    assert cli.main(argv) == errors.EXIT_UNKNOWN
    assert "no broker answered" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements()))
@pytest.mark.timeout(120)
def test_topic_commands_write_zookeeper(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ZooKeeperServer(tmp_path / "zk") as server:
        server.start()
        zookeeper = server.address
        argv = ["topics", "--zookeeper", zookeeper, "--create", "--topic", "t", "--replica-assignment", "1:2,2:3",
                "--config", "min.insync.replicas=2"]
        assert cli.main(argv) == 0
        assert cli.main(argv) == errors.EXIT_INVALID  # exists
        assert "already exists" in capsys.readouterr().err
        assert cli.main(["topics", "--zookeeper", zookeeper, "--list"]) == 0
        assert capsys.readouterr().out.split() == ["t"]
        assert cli.main(["topics", "--zookeeper", zookeeper, "--describe", "--json"]) == 0
        (described,) = json.loads(capsys.readouterr().out)
        assert described["config"] == {"min.insync.replicas": "2"}
        assert [p["replicas"] for p in described["partitions"]] == [[1, 2], [2, 3]]
        assert [p["leader"] for p in described["partitions"]] == [-1, -1]  # no controller yet
        # No brokers are registered: placement for new partitions is refused.
        assert cli.main(["topics", "--zookeeper", zookeeper, "--alter", "--topic", "t", "--partitions", "3"]) == 1
        assert "live brokers" in capsys.readouterr().err
        assert cli.main(["topics", "--zookeeper", zookeeper, "--delete", "--topic", "t"]) == 0
        assert cli.main(["preferred-replica-election", "--zookeeper", zookeeper]) == 0
        assert cli.main(["preferred-replica-election", "--zookeeper", zookeeper]) == 1  # still pending
        capsys.readouterr()

        import asyncio

        from floodmark.reference.real.runtime import client_runtime

        async def read() -> tuple[list[str], bytes]:
            rt = client_runtime("t", 0, zookeeper_hosts=zookeeper)
            try:
                session = await rt.coordination(10.0)
                return await session.get_children(zk.DELETE_TOPICS), (await session.get(zk.topic_path("t")))[0]
            finally:
                await rt.close()
        marked, data = asyncio.run(read())
        assert marked == ["t"]
        assert zk.decode_topic("t", data).partitions == {0: (1, 2), 1: (2, 3)}
