"""Shared helpers for the cluster and nemesis tests: a stand-in broker and backend checks.

The stand-in is a tiny long-running server used where a test is about the *machine* rather
than the broker (does a partition cut traffic, does a pause stop progress, does a clock
fault move the wall clock): on every TCP connection it answers with its wall clock and pid,
and a thread appends a tick to ``ticks`` in its working directory every 20 ms.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from floodmark.harness.cluster import Cluster, ExecResult, Node

STANDIN = r"""
import json, os, socket, sys, threading, time
port = int(sys.argv[1])
def tick():
    n = 0
    while True:
        n += 1
        with open("ticks", "w") as f:
            f.write(str(n))
        if n % 5 == 0:  # a node event now and then, stamped with the process's wall clock
            with open("events.jsonl", "a") as f:
                f.write(json.dumps({"node": "standin", "seq": n // 5, "wall": time.time(),
                                    "kind": "tick"}) + "\n")
        time.sleep(0.02)
threading.Thread(target=tick, daemon=True).start()
server = socket.create_server(("0.0.0.0", port), reuse_port=True)
while True:
    conn, _ = server.accept()
    with conn:
        conn.sendall(f"{time.time()!r} {os.getpid()}\n".encode())
"""


def standin_command(python: str) -> list[str]:
    return [python, "-c", STANDIN, "{port}"]


def ask(address: str, timeout: float = 2.0) -> tuple[float, int] | None:
    """The stand-in's (wall clock, pid), or None when it cannot be reached in time."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as conn:
            conn.settimeout(timeout)
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(100)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    wall, pid = data.decode().split()
    return float(wall), int(pid)


def local_backend_missing() -> str | None:
    """Why the local backend cannot run here, or None."""
    if os.geteuid() != 0:
        return "the local cluster needs root (network namespaces, iptables)"
    for tool in ("ip", "iptables", "setpriv", "java"):
        if shutil.which(tool) is None:
            return f"the local cluster needs {tool!r} on PATH"
    if not os.path.exists("/usr/share/java/zookeeper.jar"):
        return "ZooKeeper jars missing (apt-get install zookeeper)"
    return None


def docker_missing() -> str | None:
    try:
        import docker

        client = docker.from_env()  # type: ignore[attr-defined]
        client.ping()
        client.close()
    except Exception as e:  # noqa: BLE001 - any failure means no usable engine
        return f"no usable Docker engine: {e}"
    return None


def require_local() -> None:
    reason = local_backend_missing()
    if reason:
        pytest.skip(reason)


def require_docker() -> None:
    reason = docker_missing()
    if reason:
        pytest.skip(reason)


def netns_connect(namespace: str, address: str, timeout: float = 1.0) -> bool:
    """Can a process in ``namespace`` open a TCP connection to ``address``?"""
    host, _, port = address.rpartition(":")
    code = (f"import socket; socket.create_connection(({host!r}, {port}), timeout={timeout})")
    result = subprocess.run(["ip", "netns", "exec", namespace, "python3", "-c", code],
                            capture_output=True, timeout=30)
    return result.returncode == 0


# Backends as pytest params, each with the marker of what it needs.
BACKENDS = [pytest.param("local", marks=[pytest.mark.root, pytest.mark.integration]),
            pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.integration])]


@contextlib.contextmanager
def standin_cluster(backend: str, brokers: int = 3) -> Iterator[Cluster]:
    """A real cluster (ZooKeeper, namespaces or containers) whose brokers are stand-ins."""
    from floodmark.harness.cluster import ClusterSpec

    if backend == "local":
        require_local()
        from floodmark.backends.local import LocalCluster

        cluster: Cluster = LocalCluster(ClusterSpec(brokers=brokers),
                                        broker_command=standin_command(sys.executable))
    else:
        require_docker()
        from floodmark.backends.docker import DockerCluster

        cluster = DockerCluster(ClusterSpec(brokers=brokers),
                                broker_command=standin_command("python3"))
    cluster.setup()
    try:
        yield cluster
    finally:
        cluster.teardown()


def ticks_path(node: Node) -> str:
    """Where the stand-in on ``node`` writes its ticks (its working directory)."""
    workdir = getattr(node, "workdir", None)
    return f"{workdir}/ticks" if workdir is not None else "/var/lib/floodmark/ticks"


def ticks(node: Node) -> int:
    """The stand-in's tick count. It rewrites the file in place, so a read can land between
    the truncation and the write: an empty read is taken again, not as zero."""
    for _ in range(50):
        text = node.exec(["cat", ticks_path(node)]).stdout.strip()
        if text:
            return int(text)
        time.sleep(0.02)
    return 0


def can_connect(src: Node, dst: Node, timeout: float = 0.7) -> bool:
    """Can a process on ``src`` open a TCP connection to ``dst``'s service port?"""
    host, _, port = dst.address.rpartition(":")
    code = f"import socket; socket.create_connection(({host!r}, {port}), timeout={timeout})"
    return src.exec(["python3", "-c", code], timeout=10).ok


class FakeView:
    """A ClusterView with a fixed controller and leaders (unit tests)."""

    def __init__(self, controller: int | None = None,
                 leaders: dict[tuple[str, int], int] | None = None) -> None:
        self._controller = controller
        self._leaders = leaders or {}

    def controller(self) -> int | None:
        return self._controller

    def leader(self, topic: str, partition: int) -> int | None:
        return self._leaders.get((topic, partition))


class FakeNode:
    """A node that records the commands run on it (unit tests of nemesis logic)."""

    def __init__(self, name: str, role: str, broker_id: int | None, ip: str) -> None:
        self.name, self.role, self.broker_id, self.ip = name, role, broker_id, ip
        self.address = f"{ip}:9092"
        self.log_dirs = ("/data/logdir0", "/data/logdir1") if role == "broker" else ()
        self.clock_file = "/etc/floodmark/faketime" if role == "broker" else None
        self.events_path = "/events.jsonl" if role == "broker" else None
        self.commands: list[tuple[list[str], str | None]] = []
        self.files: dict[str, str] = {}
        self.running = True
        self.signals: list[str] = []
        self.exec_result = ExecResult(0, "", "")
        self.inter_broker_protocol: str | None = "heartbeats" if role == "broker" else None

    def set_inter_broker_protocol(self, version: str) -> None:
        self.inter_broker_protocol = version

    def exec(self, argv, user=None, timeout=30.0):  # type: ignore[no-untyped-def]
        self.commands.append((list(argv), user))
        return self.exec_result

    def write_file(self, path: str, content: str, user: str | None = None) -> None:
        self.files[path] = content

    def pid(self) -> int | None:
        return 100 if self.running else None

    def is_running(self) -> bool:
        return self.running

    def kill(self) -> None:
        self.signals.append("KILL")
        self.running = False

    def stop(self, timeout: float = 10.0) -> None:
        self.signals.append("TERM")
        self.running = False

    def start(self) -> None:
        self.signals.append("START")
        self.running = True

    def pause(self) -> None:
        self.signals.append("STOP")

    def resume(self) -> None:
        self.signals.append("CONT")


class _FakeCluster:
    def __init__(self, brokers: int = 3) -> None:
        self.zookeeper = FakeNode("zk", "zookeeper", None, "10.0.0.10")
        self.brokers = [FakeNode(f"n{i}", "broker", i, f"10.0.0.{10 + i}")
                        for i in range(1, brokers + 1)]
        self.nodes = [self.zookeeper, *self.brokers]

    def node(self, name: str) -> FakeNode:
        return next(n for n in self.nodes if n.name == name)


# A miniature harness in a child process: sets a stand-in cluster up, prints its run id,
# then waits; tears down on SIGINT/SIGTERM, or leaves everything behind on SIGKILL.
HARNESS_SCRIPT = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
from cluster_fixtures import standin_command
from floodmark.backends import cleanup
from floodmark.harness.cluster import ClusterSpec
backend = sys.argv[1]
if backend == "local":
    from floodmark.backends.local import LocalCluster as Backend
    command = standin_command(sys.executable)
else:
    from floodmark.backends.docker import DockerCluster as Backend
    command = standin_command("python3")
with cleanup.interruptible():
    cluster = Backend(ClusterSpec(brokers=2), broker_command=command)
    cluster.setup()
    try:
        print(cluster.run_id, flush=True)
        while True:
            time.sleep(0.1)
    finally:
        cluster.teardown()
        print("torn down", flush=True)
"""


def start_child_harness(backend: str, *, sigint_ignored: bool = False) -> tuple[subprocess.Popen[str], str]:
    """The miniature harness in a child; ``sigint_ignored``: started as a shell's background
    job is, with SIGINT ignored."""
    tests_dir = os.path.dirname(os.path.abspath(__file__))

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    child = subprocess.Popen([sys.executable, "-c", HARNESS_SCRIPT, backend, tests_dir],
                             stdout=subprocess.PIPE, text=True, preexec_fn=ignore_sigint if sigint_ignored else None)
    assert child.stdout is not None
    run_id = child.stdout.readline().strip()
    assert run_id, "the child harness did not set its cluster up"
    return child, run_id


def local_run_leftovers(run_id: str) -> list[str]:
    """The namespaces, links, forwarding rules and work directory of local run ``run_id`` still here."""
    found = []
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"netns {line.split()[0]}" for line in names.splitlines() if f"fm-{run_id}" in line]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found += [f"link {line.split(':')[1].strip()}" for line in links.splitlines() if f"fm-{run_id}" in line]
    rules = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True).stdout
    found += [f"rule {line}" for line in rules.splitlines() if f"fm-{run_id}" in line]
    if os.path.exists(f"/tmp/floodmark-{run_id}"):
        found.append(f"dir /tmp/floodmark-{run_id}")
    return found


def local_leftovers(run_id: str) -> list[str]:
    """Everything of run ``run_id`` still present on this machine (local backend)."""
    found = local_run_leftovers(run_id)
    if os.path.exists(f"/run/floodmark/{run_id}.json"):
        found.append("state file")
    return found


def docker_leftovers(run_id: str) -> list[str]:
    import docker

    client = docker.from_env()  # type: ignore[attr-defined]
    try:
        label = {"label": f"floodmark.run={run_id}"}
        return ([f"container {c.name}" for c in client.containers.list(all=True, filters=label)]
                + [f"network {n.name}" for n in client.networks.list(filters=label)])
    finally:
        client.close()


def leftovers(backend: str, run_id: str) -> list[str]:
    return local_leftovers(run_id) if backend == "local" else docker_leftovers(run_id)


def FakeCluster(brokers: int = 3) -> Any:  # noqa: N802 - reads as the class it builds
    """ZooKeeper "zk" and brokers n1..nN as FakeNodes (typed Any: it is a duck-typed Cluster)."""
    return _FakeCluster(brokers)


def view_of(cluster: Any, controller: int | None = None,
            leaders: dict[tuple[str, int], int] | None = None,
            session_timeout: float = 6.0, protocol: str = "heartbeats") -> Any:
    """The planners' snapshot of a cluster (fake or real) with the given roles."""
    from floodmark.harness.faults import BrokerSlot, ClusterView

    brokers = tuple(BrokerSlot(b.name, b.broker_id, tuple(b.log_dirs)) for b in cluster.brokers)
    partitions = tuple(sorted(leaders or {})) or (("t0", 0),)
    ids = sorted(b.broker_id for b in brokers)
    replicas = {tp: tuple(ids[(i + k) % len(ids)] for k in range(min(3, len(ids))))
                for i, tp in enumerate(partitions)}  # as topic creation would spread them
    return ClusterView(cluster.zookeeper.name, brokers, partitions,
                       session_timeout, controller, dict(leaders or {}), replicas,
                       {b.name: protocol for b in brokers})
