"""The local cluster backend: ZooKeeper and the brokers as processes here, one network namespace each.

Fast enough for development and CI (a 3-broker cluster is up in a couple of seconds) and
faithful where the faults need it: each node has its own network stack (so iptables rules
inside its namespace cut exactly its traffic, see ``floodmark.backends.netns``), and brokers
run without the capabilities that let root ignore file permissions, so ``chmod 000`` on a
log directory really denies them. A node's files live in ``/tmp/floodmark-<run>/<node>/``;
the namespace and the files survive a process kill, so a restarted broker finds its data.

Needs root, ``ip``, ``iptables``, ``setpriv`` and Java with Debian's ZooKeeper jars.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from floodmark.backends import cleanup, faketime, readiness
from floodmark.backends.netns import LocalNetwork, choose_subnet
from floodmark.harness.cluster import (
    BROKER_PORT,
    BROKER_USER,
    ZOOKEEPER_NODE,
    ZOOKEEPER_PORT,
    ClusterError,
    ClusterSpec,
    ExecResult,
    NodeIdentity,
    NodeRoster,
    ProcessCommand,
    Role,
    broker_argv,
    broker_name,
    standin_argv,
    zookeeper_argv,
    zookeeper_config,
)
from floodmark.run_dirs.rundir import RunDir

# Root without these capabilities obeys file permissions like any other user.
UNPRIVILEGED = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]


def workdir_for(run_id: str) -> Path:
    return Path(os.environ.get("FLOODMARK_LOCAL_ROOT", "/tmp")) / f"floodmark-{run_id}"


class LocalNode(NodeIdentity, ProcessCommand):
    """One namespace and the one process the harness runs in it."""

    def __init__(self, *, name: str, role: Role, broker_id: int | None, ip: str, port: int,
                 namespace: str, workdir: Path, argv: list[str], env: dict[str, str],
                 log_dirs: tuple[str, ...] = (), clock_file: str | None = None,
                 unprivileged: bool = False) -> None:
        self._name, self._role, self._broker_id = name, role, broker_id
        self._ip, self._port, self.namespace, self.workdir = ip, port, namespace, workdir
        self.argv, self.env = argv, env
        self._log_dirs, self._clock_file = log_dirs, clock_file
        self.unprivileged = unprivileged
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def enter(self) -> list[str]:
        """Prefix that runs a command in the node's network namespace.

        ``nsenter --net`` only switches the network namespace; ``ip netns exec`` also builds
        a mount namespace, which takes long enough to blur the process's start time.
        """
        return ["nsenter", f"--net=/run/netns/{self.namespace}", "--"]

    @property
    def events_path(self) -> str | None:
        return str(self.workdir / "events.jsonl") if self._role == "broker" else None

    @property
    def log_path(self) -> Path:
        return self.workdir / "process.log"

    @property
    def process_log(self) -> str:
        return str(self.log_path)

    def start(self) -> None:
        if self.is_running():
            return
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - open while the process runs
        self._log.write(f"--- floodmark: starting {self._name} at {time.time():.3f}\n".encode())
        self._log.flush()
        prefix = UNPRIVILEGED if self.unprivileged else []
        self._process = subprocess.Popen(
            [*self.enter, *prefix, *self.argv],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env=self.env, cwd=self.workdir, start_new_session=True,
        )

    def _signal(self, signum: int) -> None:
        pid = self.pid()
        if pid is None:
            raise ClusterError(f"{self._name}: no running process to send {signum} to")
        os.kill(pid, signum)

    def _reap(self, timeout: float) -> bool:
        if self._process is None:
            return True
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        if self._log is not None:
            self._log.close()
            self._log = None
        return True

    def stop(self, timeout: float = 10.0) -> None:
        if not self.is_running():
            self._reap(0)
            return
        self._signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
        self._signal(signal.SIGTERM)
        if not self._reap(timeout):
            self.kill()

    def kill(self) -> None:
        if self.is_running():
            self._signal(signal.SIGKILL)
        self._reap(10.0)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def pid(self) -> int | None:
        return self._process.pid if self.is_running() and self._process else None

    def exec(self, argv: Sequence[str], user: str | None = None, timeout: float = 30.0) -> ExecResult:
        prefix = UNPRIVILEGED if user == BROKER_USER else []
        if user not in (None, "root", BROKER_USER):
            raise ValueError(f"{self._name}: exec as {user!r}: only root or {BROKER_USER!r}")
        result = subprocess.run([*self.enter, *prefix, *argv],
                                capture_output=True, text=True, timeout=timeout)
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def copy_from(self, path: str, dest: Path) -> None:
        _copy(Path(path), dest)

    def copy_to(self, src: Path, path: str) -> None:
        _copy(src, Path(path))

    def write_file(self, path: str, content: str, user: str | None = None) -> None:
        # Root here may write wherever the broker user may, so ``user`` changes nothing.
        target = Path(path)
        temporary = target.with_name(target.name + ".tmp")
        temporary.write_text(content)
        os.replace(temporary, target)

    def __repr__(self) -> str:
        return f"LocalNode({self._name}, {self.address})"


def _copy(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True, symlinks=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


class LocalCluster(NodeRoster):
    """ZooKeeper in ``fm-<run>-zk`` and broker i in ``fm-<run>-n<i>``, on bridge ``fm-<run>``.

    ``broker_command`` replaces the broker process (tests use a stand-in server); ``{port}``
    and ``{id}`` in it are substituted.
    """

    def __init__(self, spec: ClusterSpec, broker_command: Sequence[str] | None = None) -> None:
        self.spec = spec
        self.broker_command = list(broker_command) if broker_command else None
        self.workdir = workdir_for(spec.run_id)
        self.network: LocalNetwork | None = None
        self._nodes: list[LocalNode] = []
        self.setup_seconds: float | None = None

    def setup(self) -> None:
        self.setup_seconds = readiness.set_up(self, "local", self._create,
                                              ready_timeout=self.spec.ready_timeout,
                                              brokers_register=self.broker_command is None)

    def _create(self) -> None:
        self.network = network = LocalNetwork(self.spec.run_id, choose_subnet(self.spec.run_id))
        network.create_bridge()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._nodes = [self._zookeeper_node(network)]
        self._nodes += [self._broker_node(network, i) for i in range(1, self.spec.brokers + 1)]
        for index, node in enumerate(self._nodes):
            network.add_node(node.name, network.node_ip(index))
        self._nodes[0].start()
        readiness.wait_for_port(self._nodes[0].address, self.spec.ready_timeout)
        for node in self._nodes[1:]:
            node.start()

    def _zookeeper_node(self, network: LocalNetwork) -> LocalNode:
        directory = self.workdir / ZOOKEEPER_NODE
        (directory / "data").mkdir(parents=True, exist_ok=True)
        config = directory / "zoo.cfg"
        config.write_text(zookeeper_config(str(directory / "data")))
        java = shutil.which("java") or "java"
        return LocalNode(name=ZOOKEEPER_NODE, role="zookeeper", broker_id=None,
                         ip=network.node_ip(0), port=ZOOKEEPER_PORT,
                         namespace=network.namespace(ZOOKEEPER_NODE), workdir=directory,
                         argv=zookeeper_argv(java, str(config)), env=dict(os.environ))

    def _broker_node(self, network: LocalNetwork, broker_id: int) -> LocalNode:
        name = broker_name(broker_id)
        directory = self.workdir / name
        log_dirs = tuple(str(directory / "data" / f"logdir{i}")
                         for i in range(self.spec.log_dirs_per_broker))
        for log_dir in log_dirs:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
        clock_file = directory / "faketime"
        clock_file.write_text(faketime.NO_SKEW + "\n")
        ip = network.node_ip(broker_id)
        listen = f"{ip}:{BROKER_PORT}"
        if self.broker_command:
            argv = standin_argv(self.broker_command, BROKER_PORT, broker_id)
        else:
            zookeeper = f"{network.node_ip(0)}:{ZOOKEEPER_PORT}"
            argv = broker_argv(sys.executable, broker_id, zookeeper, log_dirs, listen,
                               str(directory / "events.jsonl"), self.spec)
        env = {**os.environ, **faketime.broker_environment(str(clock_file)),
               "PYTHONUNBUFFERED": "1"}
        return LocalNode(name=name, role="broker", broker_id=broker_id, ip=ip,
                         port=BROKER_PORT, namespace=network.namespace(name), workdir=directory,
                         argv=argv, env=env, log_dirs=log_dirs, clock_file=str(clock_file),
                         unprivileged=True)

    def teardown(self, collect_into: RunDir | None = None) -> None:
        """Stop every process, collect logs/events/data, remove namespaces, bridge and files."""
        for node in reversed(self._nodes):
            try:
                node.stop(timeout=5.0)
            except (ClusterError, OSError):
                node.kill()
        if collect_into is not None:
            self._collect(collect_into)
        if self.network is not None:
            self.network.destroy([n.name for n in self._nodes])
        shutil.rmtree(self.workdir, ignore_errors=True)
        cleanup.remove_stale_faketime_files()  # the brokers were killed: libfaketime could not
        cleanup.unregister_run(self.spec.run_id)

    def _collect(self, run_dir: RunDir) -> None:
        for node in self._nodes:
            logs = run_dir.node_logs(node.name)
            logs.mkdir(parents=True, exist_ok=True)
            if node.log_path.exists():
                shutil.copy2(node.log_path, logs / f"{node.role}.log")
            events = node.workdir / "events.jsonl"
            if events.exists():
                run_dir.events.mkdir(parents=True, exist_ok=True)
                shutil.copy2(events, run_dir.events / f"{node.name}.jsonl")
            data = node.workdir / "data"
            if data.exists():
                _copy(data, logs / "data")
