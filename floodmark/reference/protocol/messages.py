"""Messages: every request and response that crosses the network between nodes.

They are frozen dataclasses holding only ints, floats, strings, bools, None, tuples and other
messages, so the wire codec can encode any of them generically (a type tag plus fields) and
tests can build them by hand. Field names follow Kafka's protocol where Kafka has one.

Errors are strings from :class:`Errors` (``None`` means success), as Kafka's error codes are.
Offsets are Kafka offsets: the log end offset is the offset the next record will get; the
high watermark (HW) is the first offset *not* yet committed.
"""

from __future__ import annotations

from dataclasses import dataclass, is_dataclass
from itertools import repeat
from operator import attrgetter

from floodmark.frozen_init import fast_frozen_init

ACKS_ALL = -1
CONSUMER_REPLICA_ID = -1  # a fetch from a client, bounded by the HW
NO_EPOCH = -1  # "I do not know the current leader epoch" (clients before their first metadata)
# UpdateMetadata's leader for a partition being deleted: every broker drops it from its
# metadata cache, replica or not (Kafka's LeaderAndIsr.LeaderDuringDelete).
LEADER_DURING_DELETE = -2


class Errors:
    NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"
    NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"  # before append: nothing written
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"  # ambiguous
    REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"  # ambiguous for produce
    UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
    FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"  # the request's epoch is older than ours
    UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"  # the request's epoch is newer than ours
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
    OFFSET_NOT_AVAILABLE = "OFFSET_NOT_AVAILABLE"  # retriable: between HW and log end
    STALE_CONTROLLER_EPOCH = "STALE_CONTROLLER_EPOCH"
    STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"  # request meant for an older incarnation
    KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"  # the replica's log directory is offline
    BROKER_FENCED = "BROKER_FENCED"  # the broker fenced itself (KIP-343)
    NOT_CONTROLLER = "NOT_CONTROLLER"
    INVALID_REQUEST = "INVALID_REQUEST"
    CORRUPT_MESSAGE = "CORRUPT_MESSAGE"
    LEADER_NOT_AVAILABLE = "LEADER_NOT_AVAILABLE"  # metadata: the partition has no live leader
    # IsrChange (KIP-343): a newer registration of the requesting broker id exists ...
    INVALID_INCARNATION_ID = "INVALID_INCARNATION_ID"
    # ... or the controller does not know the requester's registration yet (retriable) ...
    UNKNOWN_INCARNATION_ID = "UNKNOWN_INCARNATION_ID"
    # ... or, per partition, the requester does not lead it in the leader epoch it sent ...
    NOT_LEADER_FOR_PARTITION = "NOT_LEADER_FOR_PARTITION"
    # ... or proposed it against an older version of the partition's state than the current.
    INVALID_UPDATE_VERSION = "INVALID_UPDATE_VERSION"

    # Errors after which a produce certainly did not append anything.
    DEFINITELY_NOT_WRITTEN = frozenset(
        {NOT_LEADER, NOT_ENOUGH_REPLICAS, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH,
         UNKNOWN_LEADER_EPOCH, KAFKA_STORAGE_ERROR, BROKER_FENCED, INVALID_REQUEST,
         CORRUPT_MESSAGE}
    )


# ----------------------------------------------------------------------------- shared shapes


@fast_frozen_init
@dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int


@fast_frozen_init
@dataclass(frozen=True)
class Record:
    offset: int
    leader_epoch: int
    value: str


_value = attrgetter("value")


@fast_frozen_init
@dataclass(frozen=True)
class RecordBatch:
    """Consecutive records in compact form, for replication: the values, and the leader
    epochs as runs (``epochs[i]`` repeated ``counts[i]`` times), so a batch costs one
    message on the wire instead of one per record."""

    base_offset: int
    values: tuple[str, ...]
    epochs: tuple[int, ...]
    counts: tuple[int, ...]

    @staticmethod
    def of(records: tuple[Record, ...] | list[Record]) -> RecordBatch:
        epochs: list[int] = []
        counts: list[int] = []
        for r in records:
            epoch = r.leader_epoch
            if epochs and epochs[-1] == epoch:
                counts[-1] += 1
            else:
                epochs.append(epoch)
                counts.append(1)
        base = records[0].offset if records else 0
        # map, not a generator expression: every fetch with data builds a batch.
        return RecordBatch(base, tuple(map(_value, records)), tuple(epochs), tuple(counts))

    def records(self) -> list[Record]:
        out: list[Record] = []
        start = 0  # index in values of the run's first record
        values = self.values
        for epoch, count in zip(self.epochs, self.counts):
            first = self.base_offset + start
            # Record built by map over the run, not one generator step per record.
            out.extend(map(Record, range(first, first + count), repeat(epoch, count), values[start:start + count]))
            start += count
        return out


@fast_frozen_init
@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    address: str
    incarnation: int = 0  # czxid of /brokers/ids/<id>


@fast_frozen_init
@dataclass(frozen=True)
class PartitionState:
    """What the controller decided for one partition (the ZooKeeper state node, plus replicas)."""

    topic: str
    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int  # version of .../partitions/<p>/state this state was read or written at
    replicas: tuple[int, ...]
    controller_epoch: int
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    elr: tuple[int, ...] = ()  # KIP-966's eligible leader replicas (see zk_layout.LeaderIsr)


# ----------------------------------------------------------------------------- clients


@fast_frozen_init
@dataclass(frozen=True)
class ProduceRequest:
    topic: str
    partition: int
    values: tuple[str, ...]
    acks: int = ACKS_ALL  # -1 all, 1 leader, 0 none
    timeout: float = 5.0  # seconds the leader may wait for the ISR
    current_leader_epoch: int = NO_EPOCH


@fast_frozen_init
@dataclass(frozen=True)
class ProduceResponse:
    error: str | None
    base_offset: int = -1
    high_watermark: int = -1
    leader_epoch: int = NO_EPOCH


@fast_frozen_init
@dataclass(frozen=True)
class FetchRequest:
    """A consumer's or a follower's fetch (``replica_id`` tells which)."""

    topic: str
    partition: int
    offset: int
    replica_id: int = CONSUMER_REPLICA_ID
    current_leader_epoch: int = NO_EPOCH  # KIP-320 fencing
    last_fetched_epoch: int = NO_EPOCH  # epoch of the record before ``offset`` (follower)
    max_records: int = 1000
    max_wait: float = 0.0  # seconds to wait for new data (long poll)
    broker_incarnation: int = 0  # follower's incarnation, so a leader ignores a dead one


@fast_frozen_init
@dataclass(frozen=True)
class FetchResponse:
    error: str | None
    records: tuple[Record, ...] = ()
    high_watermark: int = -1
    log_end: int = -1
    log_start: int = 0
    leader_epoch: int = NO_EPOCH
    # Set when the follower's last fetched epoch does not end where it thinks in the
    # leader's log: truncate to at most ``diverging_end_offset`` (then fetch again).
    diverging_epoch: int = NO_EPOCH
    diverging_end_offset: int = -1
    # Followers and consumers get their records here (compact) instead of in ``records``.
    batch: RecordBatch | None = None


@fast_frozen_init
@dataclass(frozen=True)
class FetchPartition:
    """One partition of a follower's :class:`ReplicaFetchRequest`."""

    topic: str
    partition: int
    offset: int
    current_leader_epoch: int
    last_fetched_epoch: int = NO_EPOCH


@fast_frozen_init
@dataclass(frozen=True)
class ReplicaFetchRequest:
    """A follower's fetch for every partition it follows from one leader, as Kafka's fetch
    request carries many partitions: one round trip and one long poll for all of them."""

    replica_id: int
    broker_incarnation: int
    partitions: tuple[FetchPartition, ...]
    max_records: int = 1000  # per partition
    max_wait: float = 0.0  # hold the fetch this long while no partition has anything new


@fast_frozen_init
@dataclass(frozen=True)
class PartitionFetchResult:
    topic: str
    partition: int
    response: FetchResponse


@fast_frozen_init
@dataclass(frozen=True)
class ReplicaFetchResponse:
    error: str | None
    partitions: tuple[PartitionFetchResult, ...] = ()


@dataclass(frozen=True)
class EpochEndQuery:
    """One partition of an :class:`OffsetForLeaderEpochRequest`: where does ``leader_epoch`` end?"""

    topic: str
    partition: int
    leader_epoch: int
    current_leader_epoch: int = NO_EPOCH


@dataclass(frozen=True)
class OffsetForLeaderEpochRequest:
    """KIP-101/279: where does each partition's epoch end in the leader's log? A follower
    asks once per leader for every partition it is truncating, as Kafka's fetcher threads
    do: after a failover a broker may start following thousands of partitions at once."""

    replica_id: int
    partitions: tuple[EpochEndQuery, ...]


@dataclass(frozen=True)
class EpochEnd:
    """The leader's answer for one partition (in request order)."""

    topic: str
    partition: int
    error: str | None
    leader_epoch: int = NO_EPOCH  # the largest epoch <= requested that the leader has
    end_offset: int = -1  # start offset of the next larger epoch, or the log end


@dataclass(frozen=True)
class OffsetForLeaderEpochResponse:
    error: str | None
    partitions: tuple[EpochEnd, ...] = ()


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class MetadataRequest:
    topics: tuple[str, ...] | None = None  # None: all topics


@dataclass(frozen=True)
class MetadataResponse:
    brokers: tuple[BrokerInfo, ...]
    partitions: tuple[PartitionMetadata, ...]
    controller_id: int = -1


# ----------------------------------------------------------------------------- controller -> broker


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_incarnation: int  # the target broker's incarnation; a restarted broker ignores older ones
    partitions: tuple[PartitionState, ...]
    live_leaders: tuple[BrokerInfo, ...]
    is_init: bool = False  # sent by a newly elected controller: full state for this broker


@fast_frozen_init
@dataclass(frozen=True)
class PartitionError:
    topic: str
    partition: int
    error: str | None


@dataclass(frozen=True)
class LeaderAndIsrResponse:
    error: str | None
    partition_errors: tuple[PartitionError, ...] = ()


@dataclass(frozen=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_incarnation: int
    partitions: tuple[TopicPartition, ...]
    delete: bool = False


@dataclass(frozen=True)
class StopReplicaResponse:
    error: str | None
    partition_errors: tuple[PartitionError, ...] = ()


@dataclass(frozen=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    brokers: tuple[BrokerInfo, ...]
    partitions: tuple[PartitionState, ...]
    offline_replicas: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, broker)


@dataclass(frozen=True)
class UpdateMetadataResponse:
    error: str | None


# ----------------------------------------------------------------------------- broker -> controller


@dataclass(frozen=True)
class BrokerHeartbeatRequest:
    """KIP-343: a broker proves to the controller that it is alive and reachable."""

    broker_id: int
    broker_incarnation: int
    want_shutdown: bool = False


@dataclass(frozen=True)
class BrokerHeartbeatResponse:
    error: str | None
    controller_epoch: int = -1
    state: str = "Inactive"  # "Inactive" | "Active" | "Stopping"
    should_shutdown: bool = False


@dataclass(frozen=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_incarnation: int


@dataclass(frozen=True)
class ControlledShutdownResponse:
    error: str | None
    remaining_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class IsrChangePartition:
    """One proposed ISR: the leader epoch the leader proposes it in, the ISR, and the version
    of the partition's state node it proposes it against (Kafka's partition epoch)."""

    topic: str
    partition: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int


@dataclass(frozen=True)
class IsrChangeRequest:
    """KIP-343: a leader asks the controller to change ISRs (instead of writing ZooKeeper)."""

    broker_id: int
    broker_incarnation: int
    partitions: tuple[IsrChangePartition, ...]


@dataclass(frozen=True)
class IsrChangeResult:
    """One partition's answer, in request order: on success the state as written."""

    topic: str
    partition: int
    error: str | None
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    zk_version: int = -1
    elr: tuple[int, ...] = ()
    zxid: int | None = None  # the ZooKeeper transaction that wrote it (None: nothing written now)


@dataclass(frozen=True)
class IsrChangeResponse:
    error: str | None  # NOT_CONTROLLER, INVALID_INCARNATION_ID, UNKNOWN_INCARNATION_ID, BROKER_FENCED
    partitions: tuple[IsrChangeResult, ...] = ()


# ----------------------------------------------------------------------------- admin


@dataclass(frozen=True)
class ReplicaDirInfo:
    topic: str
    partition: int
    size: int
    log_end: int


@dataclass(frozen=True)
class LogDirInfo:
    path: str
    error: str | None
    replicas: tuple[ReplicaDirInfo, ...] = ()


@dataclass(frozen=True)
class DescribeLogDirsRequest:
    pass


@dataclass(frozen=True)
class DescribeLogDirsResponse:
    broker_id: int
    dirs: tuple[LogDirInfo, ...]


@dataclass(frozen=True)
class ReplicaLogInfoRequest:
    """KIP-966's GetReplicaLogInfo: how far does this broker's replica of each partition go?
    A controller asks before it elects among replicas that all recovered uncleanly."""

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ReplicaLogInfo:
    """One replica's log: the last leader epoch it holds records or a start of, and its end."""

    topic: str
    partition: int
    last_epoch: int
    log_end: int
    error: str | None = None  # no such replica here, or its log directory is offline


@dataclass(frozen=True)
class ReplicaLogInfoResponse:
    error: str | None
    partitions: tuple[ReplicaLogInfo, ...] = ()


@dataclass(frozen=True)
class ErrorResponse:
    """Returned when a request cannot be decoded or handled at all."""

    error: str
    message: str = ""


def message_types() -> dict[str, type]:
    """Every message class by name, for the wire codec."""
    return {
        name: obj
        for name, obj in globals().items()
        if isinstance(obj, type) and is_dataclass(obj) and obj.__module__ == __name__
    }
