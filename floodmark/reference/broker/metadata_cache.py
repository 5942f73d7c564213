"""The metadata cache: every broker's copy of the cluster map, as the controller last sent it.

Clients ask any broker where partitions are led (MetadataRequest); brokers answer from this
cache, which only the controller updates (UpdateMetadata; a partition sent with leader
``LEADER_DURING_DELETE`` is being deleted and is dropped). It may lag behind ZooKeeper: a
client that reaches a broker that is no longer leader gets NOT_LEADER_OR_FOLLOWER and asks
again. Requests from a controller older than the newest one seen are ignored, so a deposed
controller cannot roll the map back.
"""

from __future__ import annotations

from floodmark.reference.protocol.messages import (
    LEADER_DURING_DELETE,
    BrokerInfo,
    Errors,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    PartitionState,
    UpdateMetadataRequest,
)


class MetadataCache:
    def __init__(self) -> None:
        self.controller_id = -1
        self.controller_epoch = -1
        self.brokers: dict[int, BrokerInfo] = {}
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.offline: dict[tuple[str, int], tuple[int, ...]] = {}
        # Answers already given, by the topics asked for, until the cache changes: clients ask
        # again after every leader change and every error, and the answers are immutable.
        self._answers: dict[tuple[str, ...] | None, MetadataResponse] = {}

    def update(self, request: UpdateMetadataRequest) -> str | None:
        if request.controller_epoch < self.controller_epoch:
            return Errors.STALE_CONTROLLER_EPOCH
        self._answers.clear()
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.brokers = {b.broker_id: b for b in request.brokers}
        offline: dict[tuple[str, int], list[int]] = {}
        for topic, partition, broker in request.offline_replicas:
            offline.setdefault((topic, partition), []).append(broker)
        for state in request.partitions:
            key = (state.topic, state.partition)
            if state.leader == LEADER_DURING_DELETE:  # the partition is being deleted
                self.partitions.pop(key, None)
                self.offline.pop(key, None)
                continue
            self.partitions[key] = state
            self.offline[key] = tuple(sorted(offline.get(key, [])))
        return None

    def remember_brokers(self, brokers: tuple[BrokerInfo, ...]) -> None:
        """Addresses learnt from LeaderAndIsr (live leaders), for followers to fetch from."""
        self._answers.clear()
        for b in brokers:
            self.brokers[b.broker_id] = b

    def address_of(self, broker_id: int) -> str | None:
        info = self.brokers.get(broker_id)
        return None if info is None else info.address

    def describe(self, request: MetadataRequest) -> MetadataResponse:
        key = None if request.topics is None else tuple(request.topics)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self._describe(request)
        return answer

    def _describe(self, request: MetadataRequest) -> MetadataResponse:
        wanted = None if request.topics is None else set(request.topics)
        partitions = []
        for key in sorted(self.partitions):
            if wanted is not None and key[0] not in wanted:
                continue
            s = self.partitions[key]
            live_leader = s.leader >= 0 and s.leader in self.brokers
            partitions.append(PartitionMetadata(
                s.topic, s.partition, s.leader if live_leader else -1, s.leader_epoch,
                tuple(s.replicas), tuple(s.isr), self.offline.get(key, ()),
                None if live_leader else Errors.LEADER_NOT_AVAILABLE,
            ))
        if wanted is not None:
            known = {k[0] for k in self.partitions}
            for topic in sorted(wanted - known):
                partitions.append(PartitionMetadata(topic, -1, -1, -1, (), (), (),
                                                    Errors.UNKNOWN_TOPIC_OR_PARTITION))
        brokers = tuple(self.brokers[b] for b in sorted(self.brokers))
        return MetadataResponse(brokers, tuple(partitions), self.controller_id)
