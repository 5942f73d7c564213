"""A private network of Linux network namespaces: the machines of the local cluster backend.

Each node gets its own network namespace (its own interfaces, routes and iptables tables)
joined to a per-run Linux bridge by a veth pair; the host gets the bridge's first address, so
the harness reaches every node directly and nodes reach each other through the bridge.
Because Docker sets the host's FORWARD policy to DROP and bridged frames pass through
iptables (br_netfilter), one host rule accepts traffic between ports of the run's bridge.

Every name starts with ``fm-<run id>`` (bridge ``fm-<run>``, namespaces ``fm-<run>-<node>``,
host-side veths ``fm-<run>-<node>``), which is how ``floodmark.backends.cleanup`` finds what a
crashed run left behind. Needs root and the ``ip`` and ``iptables`` commands.
"""

from __future__ import annotations

import hashlib
import ipaddress
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from floodmark.harness.cluster import NAME_PREFIX, ClusterError


def run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a host command; a failure raises ClusterError with the command and its stderr."""
    result = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise ClusterError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def bridge_name(run_id: str) -> str:
    return f"{NAME_PREFIX}{run_id}"


def namespace_name(run_id: str, node: str) -> str:
    return f"{NAME_PREFIX}{run_id}-{node}"


def forward_rule(run_id: str) -> list[str]:
    """The host FORWARD rule (without -I/-D) that lets the run's nodes talk to each other."""
    bridge = bridge_name(run_id)
    return ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]


def _used_networks() -> list[ipaddress.IPv4Network]:
    out = run(["ip", "-4", "-o", "route", "show", "table", "all"], check=False).stdout
    networks = []
    for line in out.splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("default", "broadcast", "local", "unreachable"):
            continue
        try:
            networks.append(ipaddress.IPv4Network(first, strict=False))
        except ValueError:
            continue
    return networks


def choose_subnet(run_id: str) -> ipaddress.IPv4Network:
    """A /24 in 10.200.0.0/13 that no route on the host already covers (stable per run id)."""
    used = _used_networks()
    start = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:2], "big")
    for step in range(2048):
        index = (start + step) % 2048
        subnet = ipaddress.IPv4Network(f"10.{200 + index // 256}.{index % 256}.0/24")
        if not any(subnet.overlaps(other) for other in used):
            return subnet
    raise ClusterError("no free /24 in 10.200.0.0/13 for the local cluster's bridge")


@dataclass
class LocalNetwork:
    """The bridge, the namespaces and the veths of one run; ``create`` then ``destroy``."""

    run_id: str
    subnet: ipaddress.IPv4Network

    @property
    def bridge(self) -> str:
        return bridge_name(self.run_id)

    @property
    def host_ip(self) -> str:
        return str(self.subnet.network_address + 1)

    def node_ip(self, index: int) -> str:
        """Address of the index-th node (0 = ZooKeeper, 1.. = brokers)."""
        return str(self.subnet.network_address + 10 + index)

    def namespace(self, node: str) -> str:
        return namespace_name(self.run_id, node)

    def create_bridge(self) -> None:
        prefix = self.subnet.prefixlen
        run(["ip", "link", "add", self.bridge, "type", "bridge"])
        run(["ip", "addr", "add", f"{self.host_ip}/{prefix}", "dev", self.bridge])
        run(["ip", "link", "set", self.bridge, "up"])
        run(["iptables", "-w", "-I", *forward_rule(self.run_id)])

    def add_node(self, node: str, ip: str) -> None:
        namespace = self.namespace(node)
        host_side = namespace  # same name: one prefix finds both
        run(["ip", "netns", "add", namespace])
        run(["ip", "link", "add", host_side, "type", "veth", "peer", "name", "eth0",
             "netns", namespace])
        run(["ip", "link", "set", host_side, "master", self.bridge, "up"])
        run(["ip", "-n", namespace, "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", "eth0"])
        run(["ip", "-n", namespace, "link", "set", "eth0", "up"])
        run(["ip", "-n", namespace, "link", "set", "lo", "up"])

    def destroy(self, nodes: Sequence[str]) -> None:
        """Remove everything; tolerant of parts that were never created."""
        for node in nodes:
            run(["ip", "netns", "delete", self.namespace(node)], check=False)
            run(["ip", "link", "delete", self.namespace(node)], check=False)
        run(["ip", "link", "delete", self.bridge], check=False)
        while run(["iptables", "-w", "-D", *forward_rule(self.run_id)], check=False).returncode == 0:
            pass
