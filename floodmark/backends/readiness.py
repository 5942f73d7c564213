"""When is a cluster ready? When every node accepts connections and every broker is registered.

The harness must not start the clock on a test while ZooKeeper is still starting or a broker
has not yet joined: the first ops would fail for reasons that have nothing to do with the
faults. A node is ready when its port accepts a TCP connection from the harness; a broker is
registered when its ephemeral ``/brokers/ids/<id>`` exists in ZooKeeper.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from floodmark.backends import cleanup
from floodmark.harness.cluster import ClusterError

if TYPE_CHECKING:
    from floodmark.harness.cluster import Cluster, Node


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def port_open(address: str, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(split_address(address), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(address: str, timeout: float, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not port_open(address):
        if time.monotonic() > deadline:
            raise ClusterError(f"{what or address}: not accepting connections after {timeout:.0f} s")
        time.sleep(0.05)


def log_tail(node: Node, lines: int = 15) -> str:
    """The last lines of a node's process log, for error messages."""
    path = getattr(node, "process_log", None)
    if path is None:
        return "(no log)"
    return node.exec(["tail", "-n", str(lines), path]).stdout.rstrip() or "(empty log)"


def wait_until_ready(cluster: Cluster, timeout: float, brokers_register: bool = True) -> None:
    """Every node listening and (when brokers_register) every broker registered in ZooKeeper."""
    deadline = time.monotonic() + timeout
    for node in cluster.nodes:
        if not node.is_running():
            raise ClusterError(f"{node.name}: process exited during start-up; its log ends:\n"
                               f"{log_tail(node)}")
        wait_for_port(node.address, max(0.1, deadline - time.monotonic()), node.name)
    if brokers_register:
        wanted = {b.broker_id for b in cluster.brokers if b.broker_id is not None}
        wait_for_registration(cluster.zookeeper_address, wanted, max(0.1, deadline - time.monotonic()))


def wait_for_registration(zookeeper_address: str, wanted: set[int], timeout: float) -> None:
    """Until every broker id in ``wanted`` has its ``/brokers/ids/<id>`` node."""
    from kazoo.client import KazooClient

    deadline = time.monotonic() + timeout
    client = KazooClient(hosts=zookeeper_address, timeout=min(10.0, timeout))
    client.start(timeout=timeout)
    try:
        while True:
            present = client.get_children("/brokers/ids") if client.exists("/brokers/ids") else []
            missing = wanted - {int(child) for child in present if child.isdigit()}
            if not missing:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"brokers {sorted(missing)} not registered in ZooKeeper "
                                   f"after {timeout:.0f} s")
            time.sleep(0.05)
    finally:
        client.stop()
        client.close()


def set_up(cluster: Cluster, backend: str, create: Callable[[], None], *, ready_timeout: float,
           brokers_register: bool) -> float:
    """Make ``cluster``'s nodes with ``create`` and wait until it is ready; the seconds it took.

    The run is registered for cleanup first, so whatever a killed harness leaves behind the
    next start removes; on any failure (an interrupt included) what was made is torn down.
    """
    started = time.monotonic()
    cleanup.register_run(cluster.run_id, backend)
    try:
        create()
        wait_until_ready(cluster, ready_timeout, brokers_register=brokers_register)
    except BaseException:
        cluster.teardown()
        raise
    return time.monotonic() - started
