"""A real ZooKeeper server as a child process: start it, know when it serves, stop it for sure.

The reference implementation coordinates through ZooKeeper, and its tests and the local
cluster run against the real server (Debian's ``zookeeper`` package, 3.8) rather than a
stand-in. :class:`ZooKeeperServer` writes a ``zoo.cfg`` into its directory (standalone mode,
admin HTTP server and four-letter-word commands off), starts the JVM in its own process
group, and waits until a client can open a session: a listening port is not enough, the
server may still be loading its database.

Stopping kills the whole process group, first politely then with SIGKILL, and an ``atexit``
hook does the same if the caller forgets; if the Python process is killed outright, the
kernel kills the JVM too (``PR_SET_PDEATHSIG``), so no JVM outlives the process that
started it. ``pause``/``resume`` (SIGSTOP/SIGCONT) freeze the server for fault tests.

``tickTime`` bounds the session timeouts the server grants (2 to 20 ticks unless configured
otherwise); this server allows 1 to 60 seconds so tests can use short sessions.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

JAVA_CLASSPATH = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperUnavailable(RuntimeError):
    """Java or the ZooKeeper jars are missing, or the server did not come up."""


def missing_requirements() -> str | None:
    """Why a real ZooKeeper cannot run here, or None if it can."""
    if shutil.which("java") is None:
        return "java is not installed (apt-get install default-jre-headless)"
    for jar in JAVA_CLASSPATH:
        if not Path(jar).exists():
            return f"{jar} is missing (apt-get install zookeeper libslf4j-java)"
    return None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


class ZooKeeperServer:
    def __init__(self, directory: str | os.PathLike[str] | None = None, *, host: str = "127.0.0.1",
                 port: int | None = None, tick_time_ms: int = 500,
                 min_session_timeout_ms: int = 1000, max_session_timeout_ms: int = 60000,
                 die_with_parent: bool = True) -> None:
        self._owns_directory = directory is None
        self.directory = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="zk-"))
        if self._owns_directory:
            _OWNED_DIRECTORIES[str(self.directory)] = None  # removed at exit if not before
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.die_with_parent = die_with_parent
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    def write_config(self) -> Path:
        data_dir = self.directory / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={self.min_session_timeout_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=\n"
            "autopurge.purgeInterval=0\n"
        )
        return config

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and return once it grants sessions."""
        problem = missing_requirements()
        if problem:
            raise ZooKeeperUnavailable(problem)
        if self.running:
            return
        if not port_is_free(self.host, self.port):
            # Checked first: the readiness probe would happily talk to whoever holds the port.
            raise ZooKeeperUnavailable(f"port {self.address} is already in use")
        config = self.write_config()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["java", "-Xms64m", "-Xmx256m", "-cp", ":".join(JAVA_CLASSPATH),
                 "-Dzookeeper.admin.enableServer=false", MAIN_CLASS, str(config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so stop() gets every thread
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )
        _RUNNING[id(self)] = self
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = 30.0) -> None:
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                raise ZooKeeperUnavailable(f"ZooKeeper exited during start-up; see {self.log_path}")
            client = KazooClient(hosts=self.address, timeout=2.0, connection_retry=None)
            try:
                client.start(timeout=min(2.0, max(0.1, deadline - time.monotonic())))
                client.get_children("/")
                return
            except (KazooTimeoutError, OSError):
                if time.monotonic() >= deadline:
                    raise ZooKeeperUnavailable(
                        f"ZooKeeper at {self.address} not ready after {timeout}s; see {self.log_path}"
                    ) from None
                time.sleep(0.05)
            finally:
                client.stop()
                client.close()

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        if self.running and self.process is not None:
            os.killpg(self.process.pid, sig)

    def stop(self, grace: float = 5.0) -> None:
        """Stop the server's whole process group; SIGKILL if SIGTERM is not enough."""
        process = self.process
        _RUNNING.pop(id(self), None)
        if process is None:
            return
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGCONT)  # a stopped JVM cannot handle SIGTERM
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # threads left after the leader exited
        self.process = None

    def cleanup(self) -> None:
        """Stop, and remove the directory if this object created it."""
        self.stop()
        if self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            _OWNED_DIRECTORIES.pop(str(self.directory), None)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGKILL us when our parent dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: stop() and the atexit hook still apply


PR_SET_PDEATHSIG = 1

_RUNNING: dict[int, ZooKeeperServer] = {}
_OWNED_DIRECTORIES: dict[str, None] = {}


@atexit.register
def _stop_all() -> None:
    for server in list(_RUNNING.values()):
        server.stop(grace=1.0)
    for directory in list(_OWNED_DIRECTORIES):
        shutil.rmtree(directory, ignore_errors=True)
    _OWNED_DIRECTORIES.clear()
