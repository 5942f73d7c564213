"""The docker cluster backend: ZooKeeper and each broker in its own container on a private network.

Each container is a node's *machine*: its main process (``sleep infinity`` under Docker's
init) only keeps it alive, and the harness starts the broker or ZooKeeper process inside it
with ``docker exec``, signals it, kills it and starts it again. A restarted broker therefore
keeps its address, its data directories and any iptables rules in force, as a restarted
process on a real host would. Containers get a fixed address on a per-run bridge network
(``fm-<run>``, a /24 no host route uses), which the harness on this host reaches directly.

Least privilege: every capability is dropped except NET_ADMIN (the partition nemesis's
iptables). Brokers run as the image's unprivileged ``broker`` user, which owns their data,
so disk faults are applied as that user and really deny the broker; signals are sent by the
process's own user. Every container and the network carry ``floodmark.run=<run>`` and an
owner label, which is how ``floodmark.backends.cleanup`` removes what a killed harness left.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import tarfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from floodmark.backends import cleanup, faketime, images, readiness
from floodmark.backends.netns import choose_subnet
from floodmark.harness.cluster import (
    BROKER_PORT,
    BROKER_USER,
    NAME_PREFIX,
    OWNER_LABEL,
    RUN_LABEL,
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
)
from floodmark.owners import owner_token
from floodmark.run_dirs.rundir import RunDir

HOME = "/var/lib/floodmark"
PROCESS_LOG = f"{HOME}/process.log"
PID_FILE = f"{HOME}/process.pid"
EVENTS = f"{HOME}/events.jsonl"
CLOCK_FILE = "/etc/floodmark/faketime"
CAPABILITIES = ["NET_ADMIN"]


class DockerNode(NodeIdentity, ProcessCommand):
    """One container and the process the harness runs in it."""

    def __init__(self, *, container: Any, name: str, role: Role, broker_id: int | None, ip: str,
                 port: int, argv: list[str], env: dict[str, str], process_user: str,
                 log_dirs: tuple[str, ...] = (), clock_file: str | None = None) -> None:
        self.container = container
        self._name, self._role, self._broker_id, self._ip, self._port = name, role, broker_id, ip, port
        self.argv, self.env, self.process_user = argv, env, process_user
        self._log_dirs, self._clock_file = log_dirs, clock_file
        self._pid: int | None = None
        self._previous_pid: int | None = None

    @property
    def events_path(self) -> str | None:
        return EVENTS if self._role == "broker" else None

    @property
    def process_log(self) -> str:
        return PROCESS_LOG

    def exec(self, argv: Sequence[str], user: str | None = None, timeout: float = 30.0) -> ExecResult:
        if user not in (None, "root", BROKER_USER):
            raise ValueError(f"{self._name}: exec as {user!r}: only root or {BROKER_USER!r}")
        exit_code, (out, err) = self.container.exec_run(
            ["timeout", "-s", "KILL", str(int(timeout) + 1), *argv],
            user=user or "root", demux=True)
        return ExecResult(exit_code, (out or b"").decode(errors="replace"),
                          (err or b"").decode(errors="replace"))

    def run_checked(self, argv: Sequence[str], user: str | None = None) -> str:
        """Run ``argv`` in the container and return its output; ClusterError if it fails."""
        result = self.exec(argv, user=user)
        if not result.ok:
            raise ClusterError(f"{self._name}: {' '.join(argv)} failed: {result.stderr.strip()}")
        return result.stdout

    def start(self) -> None:
        if self.is_running():
            return
        stamp = f"--- floodmark: starting {self._name} at {time.time():.3f}"
        # The shell records its pid and then becomes the process (exec keeps the pid).
        script = (f"echo {shlex.quote(stamp)} >> {PROCESS_LOG}; echo $$ > {PID_FILE}; "
                  f"exec \"$@\" >> {PROCESS_LOG} 2>&1 < /dev/null")
        self.container.exec_run(["sh", "-c", script, "sh", *self.argv], user=self.process_user,
                                environment=self.env, detach=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid = self.exec(["cat", PID_FILE]).stdout.strip()
            # The file may still name the previous process until the new shell rewrites it.
            if pid.isdigit() and int(pid) != self._previous_pid:
                self._pid = self._previous_pid = int(pid)
                return
            time.sleep(0.02)
        raise ClusterError(f"{self._name}: process did not start within 10 s")

    def _signal(self, name: str) -> bool:
        if self._pid is None:
            return False
        return self.exec(["kill", f"-{name}", str(self._pid)], user=self.process_user).ok

    def is_running(self) -> bool:
        if self._pid is None:
            return False
        result = self.exec(["cat", f"/proc/{self._pid}/stat"])
        # A pid reused by another process would not be ours; our process is the only one.
        return result.ok and result.stdout.rsplit(")", 1)[-1].split()[:1] != ["Z"]

    def pid(self) -> int | None:
        return self._pid if self.is_running() else None

    def stop(self, timeout: float = 10.0) -> None:
        if not self.is_running():
            self._pid = None
            return
        self._signal("CONT")
        self._signal("TERM")
        deadline = time.monotonic() + timeout
        while self.is_running() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.kill()

    def kill(self) -> None:
        if self.is_running():
            self._signal("KILL")
            deadline = time.monotonic() + 10
            while self.is_running() and time.monotonic() < deadline:
                time.sleep(0.05)
        self._pid = None

    def pause(self) -> None:
        if not self._signal("STOP"):
            raise ClusterError(f"{self._name}: cannot pause, no running process")

    def resume(self) -> None:
        if not self._signal("CONT"):
            raise ClusterError(f"{self._name}: cannot resume, no running process")

    def copy_from(self, path: str, dest: Path) -> None:
        stream, _ = self.container.get_archive(path)
        archive = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=archive) as tar:
            members = tar.getmembers()
            top = members[0].name.split("/")[0] if members else ""
            dest.parent.mkdir(parents=True, exist_ok=True)
            for member in members:
                member.name = dest.name + member.name[len(top):]
                member.mode |= 0o600 if member.isfile() else 0o700  # readable after faults
            tar.extractall(dest.parent, members=members, filter="tar")

    def copy_to(self, src: Path, path: str) -> None:
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            tar.add(src, arcname=Path(path).name)
        if not self.container.put_archive(str(Path(path).parent), archive.getvalue()):
            raise ClusterError(f"{self._name}: copying {src} to {path} failed")

    def write_file(self, path: str, content: str, user: str | None = None) -> None:
        self.run_checked(["sh", "-c", 'printf %s "$1" > "$2.tmp" && mv "$2.tmp" "$2"', "write",
                          content, path], user=user)

    def __repr__(self) -> str:
        return f"DockerNode({self._name}, {self.address})"


class DockerCluster(NodeRoster):
    """ZooKeeper container ``fm-<run>-zk`` and brokers ``fm-<run>-n<i>`` on network ``fm-<run>``."""

    def __init__(self, spec: ClusterSpec, broker_command: Sequence[str] | None = None,
                 client: Any = None) -> None:
        self.spec = spec
        self.broker_command = list(broker_command) if broker_command else None
        self._client = client
        self._network: Any = None
        self._nodes: list[DockerNode] = []
        self.setup_seconds: float | None = None
        self.image_seconds: float | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            import docker

            self._client = docker.from_env()  # type: ignore[attr-defined]
        return self._client

    def labels(self) -> dict[str, str]:
        return {RUN_LABEL: self.spec.run_id, OWNER_LABEL: owner_token()}

    def setup(self) -> None:
        self.setup_seconds = readiness.set_up(self, "docker", self._create_from_images,
                                              ready_timeout=self.spec.ready_timeout,
                                              brokers_register=self.broker_command is None)

    def _create_from_images(self) -> None:
        started = time.monotonic()
        tags = images.ensure_images(self.client)
        self.image_seconds = time.monotonic() - started
        self._create(tags)

    def _create_network(self) -> tuple[str, Any]:
        import docker.errors
        from docker.types import IPAMConfig, IPAMPool

        for attempt in range(5):
            subnet = choose_subnet(f"{self.spec.run_id}{attempt or ''}")
            try:
                network = self.client.networks.create(
                    f"{NAME_PREFIX}{self.spec.run_id}", driver="bridge", labels=self.labels(),
                    ipam=IPAMConfig(pool_configs=[IPAMPool(subnet=str(subnet))]))
                return str(subnet), network
            except docker.errors.APIError as e:
                if "overlap" not in str(e).lower():
                    raise ClusterError(f"creating network {NAME_PREFIX}{self.spec.run_id}: {e}") from e
        raise ClusterError("no free subnet for the docker cluster's network")

    def _container(self, image: str, node: str, ip: str) -> Any:
        api = self.client.api
        network_name = f"{NAME_PREFIX}{self.spec.run_id}"
        created = api.create_container(
            image, name=f"{NAME_PREFIX}{self.spec.run_id}-{node}", hostname=node,
            labels=self.labels(), detach=True,
            host_config=api.create_host_config(init=True, cap_drop=["ALL"], cap_add=CAPABILITIES,
                                               network_mode=network_name),
            networking_config=api.create_networking_config(
                {network_name: api.create_endpoint_config(ipv4_address=ip)}))
        container = self.client.containers.get(created["Id"])
        container.start()
        return container

    def _create(self, tags: dict[str, str]) -> None:
        subnet, self._network = self._create_network()
        base = subnet.split("/")[0].rsplit(".", 1)[0]
        ip_of = {index: f"{base}.{10 + index}" for index in range(self.spec.brokers + 1)}
        zk_ip = ip_of[0]
        # Containers start in parallel: each takes a second or so, mostly waiting on the engine.
        with ThreadPoolExecutor(max_workers=4) as pool:
            zk_container = pool.submit(self._container, tags["zookeeper"], ZOOKEEPER_NODE, zk_ip)
            brokers = [pool.submit(self._broker, tags["broker"], broker_id, ip_of[broker_id], zk_ip)
                       for broker_id in range(1, self.spec.brokers + 1)]
            zk = DockerNode(container=zk_container.result(), name=ZOOKEEPER_NODE,
                            role="zookeeper", broker_id=None, ip=zk_ip, port=ZOOKEEPER_PORT,
                            argv=zookeeper_argv("java", "/etc/floodmark/zoo.cfg"), env={},
                            process_user="root")
            self._nodes = [zk, *(future.result() for future in brokers)]
        zk.start()
        readiness.wait_for_port(zk.address, self.spec.ready_timeout, ZOOKEEPER_NODE)
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda node: node.start(), self._nodes[1:]))

    def _broker(self, image: str, broker_id: int, ip: str, zk_ip: str) -> DockerNode:
        name = broker_name(broker_id)
        log_dirs = tuple(f"{HOME}/data/logdir{i}" for i in range(self.spec.log_dirs_per_broker))
        container = self._container(image, name, ip)
        listen = f"{ip}:{BROKER_PORT}"
        if self.broker_command:
            argv = standin_argv(self.broker_command, BROKER_PORT, broker_id)
        else:
            argv = broker_argv("python3", broker_id, f"{zk_ip}:{ZOOKEEPER_PORT}", log_dirs,
                               listen, EVENTS, self.spec)
        node = DockerNode(container=container, name=name, role="broker", broker_id=broker_id,
                          ip=ip, port=BROKER_PORT, argv=argv,
                          env=faketime.broker_environment(CLOCK_FILE, faketime.CONTAINER_LIBRARY),
                          process_user=BROKER_USER, log_dirs=log_dirs, clock_file=CLOCK_FILE)
        node.run_checked(["mkdir", "-p", *log_dirs], user=BROKER_USER)
        return node

    def teardown(self, collect_into: RunDir | None = None) -> None:
        """Stop the processes, collect logs/events/data, remove containers and network."""
        for node in reversed(self._nodes):
            with contextlib.suppress(Exception):  # the container goes anyway
                node.stop(timeout=5.0)
        if collect_into is not None:
            self._collect(collect_into)
        cleanup.remove_docker_resources(self.spec.run_id, stale_only=False)
        self._nodes = []
        cleanup.unregister_run(self.spec.run_id)

    def _collect(self, run_dir: RunDir) -> None:
        for node in self._nodes:
            logs = run_dir.node_logs(node.name)
            logs.mkdir(parents=True, exist_ok=True)
            wanted = [(PROCESS_LOG, logs / f"{node.role}.log")]
            if node.role == "broker":
                wanted += [(EVENTS, run_dir.events / f"{node.name}.jsonl"),
                           (f"{HOME}/data", logs / "data")]
            for path, dest in wanted:
                try:
                    node.copy_from(path, dest)
                except Exception:  # noqa: BLE001 - a node that never wrote it has none
                    continue
