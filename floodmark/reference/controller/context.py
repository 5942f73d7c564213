"""What the controller knows: its cached copy of the cluster state.

The controller reads the whole cluster state from ZooKeeper when it is elected (V3 design,
controller failover) and then keeps this cache up to date from watches and from its own
writes. Everything it decides is computed from the cache; everything it decides is written
to ZooKeeper before brokers hear about it, so a successor can rebuild the same cache.

Besides ZooKeeper's content it holds what only the controller knows: each broker's
heartbeat state (KIP-343) and the replicas that brokers reported offline because their log
directory failed (KIP-112), which are not in ZooKeeper and are re-learned after failover
from the brokers' answers to LeaderAndIsr.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from floodmark.reference.protocol.messages import BrokerInfo, PartitionState, TopicPartition
from floodmark.reference.protocol.zk_layout import (
    BrokerRegistration,
    LeaderIsr,
    Reassignment,
    TopicAssignment,
    sorted_partitions,
)

_NONE: frozenset[TopicPartition] = frozenset()

INACTIVE = "Inactive"
ACTIVE = "Active"
STOPPING = "Stopping"
OFFLINE = "Offline"  # only in node events: the registration went (the failure is detected)


@dataclass
class BrokerLiveness:
    """One registered broker as the controller sees it (KIP-343)."""

    registration: BrokerRegistration
    state: str = INACTIVE  # Inactive until it heartbeats after the controller set it up
    last_heartbeat: float = 0.0  # controller's monotonic clock
    fenced: bool = False  # missed heartbeats: treated as failed although registered in ZooKeeper
    set_up: bool = False  # the controller has sent it its full state since it (re)appeared

    @property
    def info(self) -> BrokerInfo:
        r = self.registration
        return BrokerInfo(r.broker_id, r.address, r.incarnation)


@dataclass
class ControllerContext:
    broker_id: int
    epoch: int = 0
    epoch_zk_version: int = -1
    brokers: dict[int, BrokerLiveness] = field(default_factory=dict)
    assignments: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    # Reassignments in progress; while one runs the assignment is AR = target + original.
    reassignments: dict[TopicPartition, Reassignment] = field(default_factory=dict)
    topics_being_deleted: set[str] = field(default_factory=set)

    # ------------------------------------------------------------------ queries

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.assignments.get(tp.topic)
        if assignment is None:
            return ()
        return assignment.partitions.get(tp.partition, ())

    def min_insync_replicas(self, tp: TopicPartition, default: int) -> int:
        """The topic's min.insync.replicas, or the brokers' ``default`` when it sets none."""
        assignment = self.assignments.get(tp.topic)
        configured = assignment.min_insync_replicas if assignment is not None else None
        return configured if configured is not None else default

    def partitions(self) -> list[TopicPartition]:
        return sorted_partitions(self.states)

    def partitions_of_topic(self, topic: str) -> list[TopicPartition]:
        assignment = self.assignments.get(topic)
        if assignment is None:
            return []
        return [TopicPartition(topic, p) for p in sorted(assignment.partitions)]

    def partitions_on(self, broker: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker in self.replicas(tp)]

    def partitions_led_by(self, broker: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if self.states[tp].leader == broker]

    def live_broker_ids(self) -> list[int]:
        """Registered and not fenced by a heartbeat timeout: who gets requests."""
        return sorted(b for b, live in self.brokers.items() if not live.fenced)

    def is_serving(self, broker: int) -> bool:
        live = self.brokers.get(broker)
        return live is not None and not live.fenced

    def may_lead(self, broker: int, tp: TopicPartition) -> bool:
        """Eligible as leader or ISR member of ``tp`` right now."""
        live = self.brokers.get(broker)
        if live is None or live.fenced or live.state == STOPPING:
            return False
        offline = self.offline_replicas.get(broker)
        return not offline or tp not in offline  # mostly none: no hash of tp (a failover asks 60,000 times)

    def offline_replicas_of(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(
            r for r in self.replicas(tp)
            if not self.is_serving(r) or tp in self.offline_replicas.get(r, _NONE)
        )

    def incarnation(self, broker: int) -> int:
        live = self.brokers.get(broker)
        return live.registration.incarnation if live else 0

    def broker_infos(self, brokers: Iterable[int] | None = None) -> tuple[BrokerInfo, ...]:
        ids = self.live_broker_ids() if brokers is None else sorted(set(brokers))
        return tuple(self.brokers[b].info for b in ids if b in self.brokers)

    def partition_state(self, tp: TopicPartition, *, is_new: bool = False) -> PartitionState:
        """The LeaderAndIsr/UpdateMetadata view of one partition."""
        s = self.states[tp]
        replicas = self.replicas(tp)
        adding: tuple[int, ...] = ()
        removing: tuple[int, ...] = ()
        reassignment = self.reassignments.get(tp)
        if reassignment is not None:
            adding = tuple(r for r in reassignment.replicas if r not in reassignment.original_replicas)
            removing = tuple(r for r in reassignment.original_replicas if r not in reassignment.replicas)
        return PartitionState(
            topic=tp.topic, partition=tp.partition, leader=s.leader, leader_epoch=s.leader_epoch,
            isr=s.isr, zk_version=s.zk_version, replicas=replicas,
            controller_epoch=s.controller_epoch, adding_replicas=adding,
            removing_replicas=removing, is_new=is_new, elr=s.elr,
        )
