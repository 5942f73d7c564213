"""The cluster's roles as ZooKeeper tells them: who is the controller, who leads what.

Nemeses aim at roles, not at fixed nodes ("isolate the controller", "kill a partition's
leader"), and roles move; so before a fault is planned the backend reads them from
ZooKeeper and hands the planner a snapshot (:class:`~floodmark.harness.faults.ClusterView`).
When there is no answer (mid-election, or ZooKeeper unreachable) a role is None and the
nemesis falls back to a random broker, recording that it did. :func:`read_roles` decodes the
same ZooKeeper nodes for every backend; :class:`ZooKeeperView` reads them from a real server.

The partitions a snapshot names are the test's and every other one its topics' nodes list
(an admin fault added it): a fault aimed at "a partition's leader" may hit an added partition
too, as an operator's new partitions are as exposed as the old ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from floodmark.reference.protocol import zk_layout

# Reads one ZooKeeper node: its data and version, or None when absent or unreachable.
NodeReader = Callable[[str], tuple[bytes, int] | None]


def read_roles(read: NodeReader, partitions: Sequence[tuple[str, int]]
               ) -> tuple[int | None, dict[tuple[str, int], int]]:
    """The controller's broker id (or None) and each partition's leader, where there is one."""
    controller: int | None = None
    found = read(zk_layout.CONTROLLER)
    if found is not None:
        try:
            controller = zk_layout.decode_controller(found[0])
        except zk_layout.LayoutError:
            controller = None
    leaders: dict[tuple[str, int], int] = {}
    for topic, partition in partitions:
        found = read(zk_layout.partition_state_path(topic, partition))
        if found is None:
            continue
        try:
            state = zk_layout.decode_leader_isr(topic, partition, found[0], found[1])
        except zk_layout.LayoutError:
            continue
        if state.leader != zk_layout.NO_LEADER:
            leaders[(topic, partition)] = state.leader
    return controller, leaders


@dataclass(frozen=True)
class Roles:
    """What :func:`read_snapshot` read: the partitions, the controller, each partition's leader
    (where there is one) and its assigned replicas."""

    partitions: tuple[tuple[str, int], ...]
    controller: int | None
    leaders: Mapping[tuple[str, int], int]
    replicas: Mapping[tuple[str, int], tuple[int, ...]]


def read_snapshot(read: NodeReader, partitions: Sequence[tuple[str, int]], topics: Sequence[str]) -> Roles:
    """The roles of the test's ``partitions`` and of every partition of its ``topics`` that
    ZooKeeper lists besides them, after them in order (so a run that added none draws as it
    did before partitions could be added)."""
    replicas = read_replicas(read, topics)
    known = set(partitions)
    every = (*partitions, *(key for key in sorted(replicas) if key not in known))
    controller, leaders = read_roles(read, every)
    return Roles(every, controller, leaders, replicas)


def read_replicas(read: NodeReader, topics: Sequence[str]) -> dict[tuple[str, int], tuple[int, ...]]:
    """Each partition's assigned replicas, from its topic's node (a topic unreadable now is left out)."""
    replicas: dict[tuple[str, int], tuple[int, ...]] = {}
    for topic in topics:
        found = read(zk_layout.topic_path(topic))
        if found is None:
            continue
        try:
            assignment = zk_layout.decode_topic(topic, found[0])
        except zk_layout.LayoutError:
            continue
        for partition, assigned in sorted(assignment.partitions.items()):
            replicas[(topic, partition)] = tuple(assigned)
    return replicas


def out_of_isr(read: NodeReader, broker_id: int, topics: Sequence[str]) -> list[tuple[str, int]]:
    """The partitions assigned to ``broker_id`` whose ISR lacks it (or whose state cannot be
    read now: not known to hold it)."""
    missing = []
    for key, assigned in sorted(read_replicas(read, topics).items()):
        if broker_id not in assigned:
            continue
        found = read(zk_layout.partition_state_path(*key))
        try:
            state = None if found is None else zk_layout.decode_leader_isr(key[0], key[1], found[0], found[1])
        except zk_layout.LayoutError:
            state = None
        if state is None or broker_id not in state.isr:
            missing.append(key)
    return missing


class ZooKeeperView:
    """Reads roles from a real ZooKeeper through one kazoo session."""

    def __init__(self, zookeeper_address: str, timeout: float = 10.0) -> None:
        self._client = KazooClient(hosts=zookeeper_address, timeout=timeout)
        self._client.start(timeout=timeout)

    def read(self, path: str) -> tuple[bytes, int] | None:
        try:
            data, stat = self._client.get(path)
        except KazooException:  # absent, or ZooKeeper unreachable
            return None
        return data, stat.version

    def registered(self, broker_id: int) -> bool | None:
        """Is the broker's ephemeral registration there (None: ZooKeeper did not answer)?"""
        try:
            return self._client.exists(zk_layout.broker_path(broker_id)) is not None
        except KazooException:
            return None

    def registration(self, broker_id: int) -> zk_layout.BrokerRegistration | None:
        """The broker's registration, with its incarnation (None: absent, unreadable, or
        ZooKeeper did not answer)."""
        try:
            data, stat = self._client.get(zk_layout.broker_path(broker_id))
            return zk_layout.decode_broker(broker_id, data, stat.czxid)
        except (KazooException, zk_layout.LayoutError):
            return None

    def roles(self, partitions: Sequence[tuple[str, int]]) -> tuple[int | None, dict[tuple[str, int], int]]:
        return read_roles(self.read, partitions)

    def snapshot(self, partitions: Sequence[tuple[str, int]], topics: Sequence[str]) -> Roles:
        return read_snapshot(self.read, partitions, topics)

    def out_of_isr(self, broker_id: int, topics: Sequence[str]) -> list[tuple[str, int]]:
        return out_of_isr(self.read, broker_id, topics)

    def close(self) -> None:
        self._client.stop()
        self._client.close()
