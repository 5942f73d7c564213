"""The admin client: topics, reassignment, preferred election and log directories.

As in ZooKeeper-era Kafka's tools, administrative changes are requests written to
ZooKeeper, which the controller watches and carries out (see ``controller_admin`` and
``controller_reassignment``); the admin client never asks the controller directly. Reads
come from ZooKeeper too (assignment, leader, epoch, ISR), except what only brokers know:
which replicas are offline on a failed log directory (metadata) and the log directories
themselves (DescribeLogDirs).

Replica placement follows the Kafka HA overview: with the n live brokers sorted, replica j
of partition i goes to broker ``(i + j) mod n``, so leaders (the first replicas) spread
evenly and no broker holds two replicas of one partition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from floodmark.reference.client.metadata import ClientError, ClientMetadata
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    TopicPartition,
)
from floodmark.reference.runtime import Coordination, NodeExistsError, NoNodeError, Runtime


class AdminError(ClientError):
    """The cluster refused an admin request, or the request itself is invalid."""


def place_replicas(
    brokers: Sequence[int], partitions: int, replication_factor: int, *, first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Replica j of partition i on broker (i + j) mod n (Kafka HA overview)."""
    ids = sorted(set(brokers))
    if partitions < 1:
        raise AdminError(f"partitions must be at least 1, got {partitions}")
    if replication_factor < 1:
        raise AdminError(f"replication factor must be at least 1, got {replication_factor}")
    if replication_factor > len(ids):
        raise AdminError(
            f"replication factor {replication_factor} is larger than the {len(ids)} live brokers {ids}")
    n = len(ids)
    return {
        i: tuple(ids[(i + j) % n] for j in range(replication_factor))
        for i in range(first_partition, first_partition + partitions)
    }


@dataclass(frozen=True)
class PartitionDescription:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int  # -1 offline
    leader_epoch: int
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicDescription:
    topic: str
    config: Mapping[str, str]
    partitions: tuple[PartitionDescription, ...]
    marked_for_deletion: bool = False


ReassignmentStatus = Literal["complete", "in progress", "not as requested"]


class Admin:
    def __init__(self, runtime: Runtime, zk_client: Coordination, bootstrap: Sequence[str] = ()) -> None:
        self.runtime = runtime
        self.zk = zk_client
        self.bootstrap = list(bootstrap)

    @classmethod
    async def connect(cls, runtime: Runtime, *, session_timeout: float = 10.0,
                      bootstrap: Sequence[str] = ()) -> Admin:
        return cls(runtime, await runtime.coordination(session_timeout), bootstrap)

    async def close(self) -> None:
        await self.zk.close()

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ cluster

    async def brokers(self) -> list[zk.BrokerRegistration]:
        try:
            names = await self.zk.get_children(zk.BROKER_IDS)
        except NoNodeError:
            return []
        result = []
        for name in names:
            broker_id = zk.parse_broker_id(name)
            try:
                data, stat = await self.zk.get(zk.broker_path(broker_id))
            except NoNodeError:
                continue
            result.append(zk.decode_broker(broker_id, data, stat.czxid))
        return sorted(result, key=lambda r: r.broker_id)

    async def controller(self) -> int:
        try:
            data, _ = await self.zk.get(zk.CONTROLLER)
        except NoNodeError:
            return -1
        return zk.decode_controller(data)

    async def controller_epoch(self) -> int:
        try:
            data, _ = await self.zk.get(zk.CONTROLLER_EPOCH)
        except NoNodeError:
            return 0
        return zk.decode_controller_epoch(data)

    # ------------------------------------------------------------------ topics

    async def list_topics(self) -> list[str]:
        try:
            return sorted(await self.zk.get_children(zk.TOPICS))
        except NoNodeError:
            return []

    async def assigned_partitions(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Every partition ZooKeeper assigns to ``topics`` (the source of truth the brokers'
        metadata catches up to); a topic that does not exist has none."""
        found: list[TopicPartition] = []
        for topic in sorted(set(topics)):
            if (assignment := await zk.read_topic(self.zk, topic)) is not None:
                found.extend(TopicPartition(topic, p) for p in sorted(assignment.partitions))
        return found

    async def _existing_assignment(self, topic: str) -> zk.TopicAssignment:
        if (assignment := await zk.read_topic(self.zk, topic)) is None:
            raise AdminError(f"topic {topic!r} does not exist")
        return assignment

    async def create_topic(
        self, topic: str, partitions: int, replication_factor: int,
        config: Mapping[str, str] | None = None, *, assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> zk.TopicAssignment:
        zk.validate_topic_name(topic)
        config = dict(config or {})
        if zk.MIN_INSYNC_REPLICAS in config:
            min_isr = config[zk.MIN_INSYNC_REPLICAS]
            if not min_isr.isdigit() or int(min_isr) < 1:
                raise AdminError(f"{zk.MIN_INSYNC_REPLICAS} must be a positive integer, got {min_isr!r}")
            if int(min_isr) > replication_factor:
                raise AdminError(f"{zk.MIN_INSYNC_REPLICAS}={min_isr} exceeds the replication factor {replication_factor}")
        if assignment is None:
            live = [b.broker_id for b in await self.brokers()]
            placed = place_replicas(live, partitions, replication_factor)
        else:
            placed = {p: tuple(r) for p, r in assignment.items()}
        result = zk.TopicAssignment(topic, placed, config)
        await self.zk.ensure_path(zk.TOPICS)
        try:
            await self.zk.create(zk.topic_path(topic), zk.encode_topic(result))
        except NodeExistsError:
            raise AdminError(f"topic {topic!r} already exists") from None
        return result

    async def delete_topic(self, topic: str) -> None:
        if await self.zk.exists(zk.topic_path(topic)) is None:
            raise AdminError(f"topic {topic!r} does not exist")
        await self.zk.ensure_path(zk.DELETE_TOPICS)
        with contextlib.suppress(NodeExistsError):  # already marked for deletion
            await self.zk.create(zk.delete_topic_path(topic))

    async def alter_partitions(self, topic: str, partitions: int) -> zk.TopicAssignment:
        """Add partitions (placed as on creation), or remove the highest-numbered ones."""
        try:
            data, stat = await self.zk.get(zk.topic_path(topic))
        except NoNodeError:
            raise AdminError(f"topic {topic!r} does not exist") from None
        current = zk.decode_topic(topic, data)
        if partitions < 1:
            raise AdminError(f"a topic needs at least one partition, got {partitions}")
        count = len(current.partitions)
        if partitions == count:
            return current
        new = {p: r for p, r in current.partitions.items() if p < partitions}
        if partitions > count:
            rf = len(next(iter(current.partitions.values())))
            live = [b.broker_id for b in await self.brokers()]
            new.update(place_replicas(live, partitions - count, rf, first_partition=count))
        result = zk.TopicAssignment(topic, new, current.config)
        await self.zk.set(zk.topic_path(topic), zk.encode_topic(result), stat.version)
        return result

    async def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        names = sorted(set(topics)) if topics is not None else await self.list_topics()
        offline = await self._offline_replicas(names)
        try:
            deleting = set(await self.zk.get_children(zk.DELETE_TOPICS))
        except NoNodeError:
            deleting = set()
        live = {b.broker_id for b in await self.brokers()}
        result = []
        for topic in names:
            assignment = await self._existing_assignment(topic)
            parts = []
            for p, replicas in sorted(assignment.partitions.items()):
                try:
                    raw, stat = await self.zk.get(zk.partition_state_path(topic, p))
                    state = zk.decode_leader_isr(topic, p, raw, stat.version)
                except NoNodeError:
                    state = zk.LeaderIsr(zk.NO_LEADER, -1, (), -1)
                tp = TopicPartition(topic, p)
                down = tuple(r for r in replicas if r not in live or r in offline.get(tp, ()))
                parts.append(PartitionDescription(topic, p, replicas, state.leader, state.leader_epoch,
                                                  state.isr, down))
            result.append(TopicDescription(topic, assignment.config, tuple(parts), topic in deleting))
        return result

    async def _offline_replicas(self, topics: Sequence[str]) -> dict[TopicPartition, tuple[int, ...]]:
        """Replicas on failed log directories, as the brokers' metadata reports them."""
        addresses = self.bootstrap or [b.address for b in await self.brokers()]
        if not addresses or not topics:
            return {}
        metadata = ClientMetadata(self.runtime, addresses)
        if not await metadata.refresh(list(topics)):
            return {}
        return {tp: p.offline_replicas for tp, p in metadata.partitions.items()}

    # ------------------------------------------------------------------ reassignment

    async def reassign_execute(self, targets: Iterable[zk.Reassignment]) -> list[zk.Reassignment]:
        """Start moving partitions; records each partition's current replicas as original."""
        if await self.zk.exists(zk.REASSIGN_PARTITIONS) is not None:
            raise AdminError("a reassignment is already in progress; --verify or --cancel it first")
        entries = []
        for t in targets:
            current = (await self._existing_assignment(t.topic)).partitions.get(t.partition)
            if current is None:
                raise AdminError(f"partition {t.topic}-{t.partition} does not exist")
            entries.append(zk.Reassignment(t.topic, t.partition, t.replicas, current))
        if not entries:
            raise AdminError("the reassignment lists no partitions")
        live = {b.broker_id for b in await self.brokers()}
        for e in entries:
            unknown = [r for r in e.replicas if r not in live]
            if unknown:
                raise AdminError(f"{e.topic}-{e.partition}: brokers {unknown} are not registered")
        try:
            await self.zk.create(zk.REASSIGN_PARTITIONS, zk.encode_reassignments(entries), makepath=True)
        except NodeExistsError:
            raise AdminError("a reassignment is already in progress") from None
        return entries

    async def reassign_cancel(self, partitions: Iterable[TopicPartition] = ()) -> None:
        """KIP-236: revert the listed (default: all) reassignments to their original replicas."""
        if await self.zk.exists(zk.REASSIGN_PARTITIONS) is None:
            raise AdminError("no reassignment is in progress")
        try:
            await self.zk.create(zk.REASSIGN_CANCEL, zk.encode_partition_list(partitions), makepath=True)
        except NodeExistsError:
            raise AdminError("a cancellation is already pending") from None

    async def reassign_verify(self, targets: Iterable[zk.Reassignment]) -> dict[TopicPartition, ReassignmentStatus]:
        try:
            data, _ = await self.zk.get(zk.REASSIGN_PARTITIONS)
            pending = {e.tp for e in zk.decode_reassignments(data)}
        except NoNodeError:
            pending = set()
        result: dict[TopicPartition, ReassignmentStatus] = {}
        for t in targets:
            if t.tp in pending:
                result[t.tp] = "in progress"
                continue
            assignment = await zk.read_topic(self.zk, t.topic)
            current = None if assignment is None else assignment.partitions.get(t.partition)
            result[t.tp] = "complete" if current == t.replicas else "not as requested"
        return result

    async def preferred_replica_election(self, partitions: Iterable[TopicPartition] = ()) -> None:
        try:
            await self.zk.create(zk.PREFERRED_REPLICA_ELECTION, zk.encode_partition_list(partitions), makepath=True)
        except NodeExistsError:
            raise AdminError("a preferred replica election is already in progress") from None

    # ------------------------------------------------------------------ log dirs

    async def describe_log_dirs(self, brokers: Iterable[int] | None = None,
                                *, timeout: float = 5.0) -> dict[int, DescribeLogDirsResponse | str]:
        """Each broker's log directories, or why it could not answer."""
        registered = {b.broker_id: b.address for b in await self.brokers()}
        wanted = sorted(registered) if brokers is None else sorted(set(brokers))
        result: dict[int, DescribeLogDirsResponse | str] = {}
        for broker in wanted:
            address = registered.get(broker)
            if address is None:
                result[broker] = "not registered"
                continue
            try:
                response = await self.runtime.network.request(address, DescribeLogDirsRequest(), timeout)
            except (ConnectionError, TimeoutError, OSError) as e:
                result[broker] = f"{type(e).__name__}: {e}"
                continue
            result[broker] = response if isinstance(response, DescribeLogDirsResponse) else str(response)
        return result


async def describe_log_dirs_at(
    runtime: Runtime, bootstrap: Sequence[str], brokers: Iterable[int] | None = None, *, timeout: float = 5.0,
) -> dict[int, DescribeLogDirsResponse | str]:
    """DescribeLogDirs without ZooKeeper: find the brokers through metadata, then ask each."""
    metadata = ClientMetadata(runtime, bootstrap, request_timeout=timeout)
    if not await metadata.refresh([]):
        raise AdminError(f"no broker answered at {', '.join(bootstrap)}")
    wanted = sorted(metadata.brokers) if brokers is None else sorted(set(brokers))
    result: dict[int, DescribeLogDirsResponse | str] = {}
    for broker in wanted:
        info = metadata.brokers.get(broker)
        if info is None:
            result[broker] = "not a live broker"
            continue
        try:
            response = await runtime.network.request(info.address, DescribeLogDirsRequest(), timeout)
        except (ConnectionError, TimeoutError, OSError) as e:
            result[broker] = f"{type(e).__name__}: {e}"
            continue
        result[broker] = response if isinstance(response, DescribeLogDirsResponse) else str(response)
    return result
