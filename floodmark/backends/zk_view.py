"""The cluster's current state as ZooKeeper tells it: who is the controller, who leads what.

Nemeses aim at roles, not at fixed nodes ("isolate the controller", "kill a partition's
leader"), and roles move; so they ask ZooKeeper at the moment they act and record the answer.
When there is no answer (mid-election, or ZooKeeper unreachable) the view says None and the
nemesis falls back to a random broker, recording that it did.
"""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from floodmark.reference.protocol import zk_layout


class ZooKeeperView:
    """Reads ``/controller`` and partition state nodes through one kazoo session."""

    def __init__(self, zookeeper_address: str, timeout: float = 10.0) -> None:
        self._client = KazooClient(hosts=zookeeper_address, timeout=timeout)
        self._client.start(timeout=timeout)

    def controller(self) -> int | None:
        try:
            data, _ = self._client.get(zk_layout.CONTROLLER)
            return zk_layout.decode_controller(data)
        except (KazooException, zk_layout.LayoutError):  # absent, or ZooKeeper unreachable
            return None

    def leader(self, topic: str, partition: int) -> int | None:
        try:
            data, stat = self._client.get(zk_layout.partition_state_path(topic, partition))
            state = zk_layout.decode_leader_isr(topic, partition, data, stat.version)
        except (KazooException, zk_layout.LayoutError):  # absent, or ZooKeeper unreachable
            return None
        return None if state.leader == zk_layout.NO_LEADER else state.leader

    def close(self) -> None:
        self._client.stop()
        self._client.close()
