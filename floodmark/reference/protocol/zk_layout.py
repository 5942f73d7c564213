"""The ZooKeeper layout: every node the brokers, the controller and the admin tools share.

ZooKeeper is the cluster's single source of truth in Kafka's ZooKeeper-era design ("Detailed
Replication Design V3", KIP-112, KIP-236). Each node below has one path and one JSON shape;
this module is the only place that knows them, so a broker, the controller and the admin
client can never disagree on an encoding. Every ``decode_*`` function checks the shape and
raises :class:`LayoutError` naming the path and what is wrong, never a bare ``KeyError``.

    /controller                          ephemeral {"version":1,"brokerid":N}: who is controller
    /controller_epoch                    "N": bumped by every election; the controller's
                                         writes are conditional on its version (KAFKA-6082)
    /brokers/ids/<id>                    ephemeral {"version":1,"address":"host:port",
                                          "unclean_shutdown":false}; the node's czxid is the
                                         broker's incarnation id (KIP-343); unclean_shutdown
                                         (absent in older registrations: false) says its logs
                                         were recovered from an unclean shutdown that no
                                         controller has acted on yet (KIP-966);
                                         "broker_info_version" (4: legacy, 5: KIP-343) says
                                         which inter-broker protocol the broker speaks
                                         (absent: the default, heartbeats)
    /brokers/topics/<topic>              {"version":1,"partitions":{"0":[1,2,3]},"config":{..}}
                                         replica assignment (first replica preferred) and
                                         topic config such as min.insync.replicas
    /brokers/topics/<t>/partitions/<p>/state
                                         {"version":1,"leader":1,"leader_epoch":0,"isr":[1,2],
                                          "controller_epoch":3}; written only conditionally on
                                         its ZooKeeper version
    /admin/reassign_partitions           {"version":1,"partitions":[{"topic","partition",
                                          "replicas","original_replicas"}]}
    /admin/reassign_cancel               {"version":1,"partitions":[{"topic","partition"}]}
                                         (KIP-236: an empty list cancels every reassignment)
    /admin/preferred_replica_election    {"version":1,"partitions":[{"topic","partition"}]}
    /admin/delete_topics/<topic>         empty: delete this topic
    /log_dir_event_notification/log_dir_event_<seq>
                                         {"version":1,"broker":N,"event":1} (KIP-112)
    /isr_change_notification/isr_change_<seq>
                                         {"version":1,"partitions":[{"topic","partition"}]}

Partitions are added or removed by rewriting the topic's assignment node; the controller
watches it and creates or deletes the partitions that appeared or disappeared.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from floodmark.frozen_init import fast_frozen_init
from floodmark.reference.protocol.messages import TopicPartition
from floodmark.reference.runtime import Coordination, NoNodeError

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
ADMIN = "/admin"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
REASSIGN_CANCEL = "/admin/reassign_cancel"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
DELETE_TOPICS = "/admin/delete_topics"
LOG_DIR_EVENTS = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
ISR_CHANGES = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"

# Persistent parents that must exist before anyone watches their children.
PERSISTENT_PATHS: tuple[str, ...] = (
    BROKER_IDS, TOPICS, ADMIN, DELETE_TOPICS, LOG_DIR_EVENTS, ISR_CHANGES,
)

LOG_DIR_FAILURE_EVENT = 1  # the only KIP-112 event type
MIN_INSYNC_REPLICAS = "min.insync.replicas"

_FORMAT_VERSION = 1


class LayoutError(ValueError):
    """A ZooKeeper node whose name or content is not what the layout says."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


# ----------------------------------------------------------------------------- paths


@functools.lru_cache(maxsize=4096)  # paths are built for every partition: validate each name once
def _check_topic_name(topic: str) -> str:
    # Kafka's legal characters; '/' would break the layout, '.' and '..' are not nodes.
    if not topic or topic in (".", "..") or len(topic) > 249:
        raise LayoutError(TOPICS, f"invalid topic name {topic!r}")
    if not all(c.isascii() and (c.isalnum() or c in "._-") for c in topic):
        raise LayoutError(TOPICS, f"invalid topic name {topic!r}: use letters, digits, '.', '_', '-'")
    return topic


def validate_topic_name(topic: str) -> str:
    """Return ``topic`` if it is a legal topic name, else raise :class:`LayoutError`."""
    return _check_topic_name(topic)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{_check_topic_name(topic)}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{_check_topic_name(topic)}"


def log_dir_event_path(name: str) -> str:
    return f"{LOG_DIR_EVENTS}/{name}"


def isr_change_path(name: str) -> str:
    return f"{ISR_CHANGES}/{name}"


def parse_broker_id(name: str) -> int:
    """A child name of /brokers/ids as a broker id."""
    try:
        return int(name)
    except ValueError:
        raise LayoutError(f"{BROKER_IDS}/{name}", "child name is not a broker id") from None


# ----------------------------------------------------------------------------- JSON helpers


def _dump(obj: Mapping[str, Any]) -> bytes:
    return json.dumps({"version": _FORMAT_VERSION, **obj}, separators=(",", ":"), sort_keys=True).encode()


def _load(path: str, data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise LayoutError(path, f"not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise LayoutError(path, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _int(path: str, obj: Mapping[str, Any], key: str) -> int:
    if key not in obj:
        raise LayoutError(path, f"missing field {key!r}")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise LayoutError(path, f"field {key!r} must be an integer, got {value!r}")
    return value


def _str(path: str, obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise LayoutError(path, f"field {key!r} must be a non-empty string, got {value!r}")
    return value


_INT = frozenset((int,))


def _int_list(path: str, value: Any, what: str) -> tuple[int, ...]:
    # A new controller reads 30,000 of these: the common case is checked by C loops.
    if _distinct_ints(value):
        return tuple(value)
    if not isinstance(value, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in value
    ):
        raise LayoutError(path, f"{what} must be a list of integers, got {value!r}")
    if len(set(value)) != len(value):
        raise LayoutError(path, f"{what} lists a broker twice: {value!r}")
    return tuple(value)


def _partition_list(path: str, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    entries = obj.get("partitions")
    if not isinstance(entries, list):
        raise LayoutError(path, "field 'partitions' must be a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise LayoutError(path, f"partitions[{i}] must be an object")
        if not isinstance(entry.get("topic"), str):
            raise LayoutError(path, f"partitions[{i}] needs a string 'topic'")
        _int(f"{path} partitions[{i}]", entry, "partition")
    return entries


# ----------------------------------------------------------------------------- controller


def encode_controller(broker_id: int) -> bytes:
    return _dump({"brokerid": broker_id})


def decode_controller(data: bytes) -> int:
    """The controller's broker id."""
    return _int(CONTROLLER, _load(CONTROLLER, data), "brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(int(epoch)).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise LayoutError(CONTROLLER_EPOCH, f"not an integer: {data[:40]!r}") from None


# ----------------------------------------------------------------------------- brokers


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    address: str
    incarnation: int  # czxid of the ephemeral node: changes on every re-registration
    # KIP-966: the broker's logs were recovered from an unclean shutdown (power loss, kill)
    # and may lack records the ISR counted on; no controller has taken it out of the ISRs yet.
    unclean_shutdown: bool = False
    # The BrokerInfo version its broker registered with (inter_broker_protocol): 4 is a
    # legacy broker (never heartbeats, always active), 5 a KIP-343 one; None: no field.
    info_version: int | None = None


def encode_broker(address: str, *, unclean_shutdown: bool = False, info_version: int | None = None) -> bytes:
    fields: dict[str, Any] = {"address": address, "unclean_shutdown": unclean_shutdown}
    if info_version is not None:  # absent for the default protocol: its bytes stay as they were
        fields["broker_info_version"] = info_version
    return _dump(fields)


def decode_broker(broker_id: int, data: bytes, czxid: int) -> BrokerRegistration:
    """A registration; one written before ``unclean_shutdown`` existed reads as clean (its
    broker makes no claim, as every broker did before KIP-966)."""
    path = broker_path(broker_id)
    obj = _load(path, data)
    unclean = obj.get("unclean_shutdown", False)
    if not isinstance(unclean, bool):
        raise LayoutError(path, f"field 'unclean_shutdown' must be true or false, got {unclean!r}")
    info_version = _int(path, obj, "broker_info_version") if "broker_info_version" in obj else None
    return BrokerRegistration(broker_id, _str(path, obj, "address"), czxid, unclean, info_version)


# ----------------------------------------------------------------------------- topics


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment (partition -> replicas, preferred first) and config."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    config: Mapping[str, str] = field(default_factory=dict)

    @property
    def min_insync_replicas(self) -> int | None:
        value = self.config.get(MIN_INSYNC_REPLICAS)
        return int(value) if value is not None else None


def encode_topic(assignment: TopicAssignment) -> bytes:
    partitions = {str(p): list(r) for p, r in sorted(assignment.partitions.items())}
    return _dump({"partitions": partitions, "config": dict(sorted(assignment.config.items()))})


async def read_topic(zk: Coordination, topic: str) -> TopicAssignment | None:
    """The topic's assignment as ZooKeeper holds it (None: no such topic); the controller and
    the admin client read it alike."""
    try:
        data, _ = await zk.get(topic_path(topic))
    except NoNodeError:
        return None
    return decode_topic(topic, data)


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    path = topic_path(topic)
    obj = _load(path, data)
    raw = obj.get("partitions")
    if not isinstance(raw, dict):
        raise LayoutError(path, "field 'partitions' must be an object of partition -> replicas")
    partitions: dict[int, tuple[int, ...]] = {}
    for key, replicas in raw.items():
        try:
            number = int(key)
        except ValueError:
            raise LayoutError(path, f"partition key {key!r} is not an integer") from None
        if number < 0:
            raise LayoutError(path, f"partition {number} is negative")
        partitions[number] = _int_list(path, replicas, f"replicas of partition {number}")
        if not partitions[number]:
            raise LayoutError(path, f"partition {number} has no replicas")
    config = obj.get("config", {})
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise LayoutError(path, "field 'config' must be an object of string values")
    if MIN_INSYNC_REPLICAS in config:
        try:
            int(config[MIN_INSYNC_REPLICAS])
        except ValueError:
            raise LayoutError(path, f"{MIN_INSYNC_REPLICAS} must be an integer") from None
    return TopicAssignment(topic, dict(sorted(partitions.items())), dict(config))


# ----------------------------------------------------------------------------- partition state


@fast_frozen_init
@dataclass(frozen=True)
class LeaderIsr:
    """The content of a partition's state node, plus the ZooKeeper version it was read at."""

    leader: int  # -1: no leader (offline)
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1  # not part of the JSON: the node's version, for conditional writes
    # KIP-966's LastKnownELR: former ISR or ELR members the controller took out because they
    # recovered from an unclean shutdown. When the rest recovers uncleanly too, they are among
    # those that may lead again. Cleared once the ISR is back at min.insync.replicas.
    last_known_elr: tuple[int, ...] = ()
    # KIP-966's Eligible Leader Replicas: members that left an ISR smaller than
    # min.insync.replicas. The HW stands still while the ISR is that small, so each of them
    # holds every committed record and may lead cleanly when no ISR member can
    # (see floodmark.reference.protocol.eligible_leaders).
    elr: tuple[int, ...] = ()

    def with_version(self, zk_version: int) -> LeaderIsr:
        # Not dataclasses.replace: called for each of the 10,000 states a failover writes.
        return LeaderIsr(self.leader, self.leader_epoch, self.isr, self.controller_epoch, zk_version,
                         self.last_known_elr, self.elr)


NO_LEADER = -1


def encode_leader_isr(state: LeaderIsr) -> bytes:
    # Written for every partition on every leader change: formatted directly (the same JSON
    # _dump would produce, keys sorted) because json.dumps dominated failover time.
    isr = ",".join(str(int(r)) for r in state.isr)
    last_known = ",".join(str(int(r)) for r in state.last_known_elr)
    elr = ",".join(str(int(r)) for r in state.elr)
    elr_field = f'"eligible_leader_replicas":[{elr}],' if elr else ""
    last_known_field = f'"last_known_elr":[{last_known}],' if last_known else ""
    return (f'{{"controller_epoch":{int(state.controller_epoch)},{elr_field}"isr":[{isr}],{last_known_field}'
            f'"leader":{int(state.leader)},"leader_epoch":{int(state.leader_epoch)},'
            f'"version":{_FORMAT_VERSION}}}').encode()


def decode_leader_isr(topic: str, partition: int, data: bytes, zk_version: int) -> LeaderIsr:
    # A new controller reads every partition's state: what encode_leader_isr wrote is
    # recognised in a few checks, anything else is checked field by field (and named).
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        obj = None
    if type(obj) is dict:
        leader, leader_epoch, controller_epoch = obj.get("leader"), obj.get("leader_epoch"), obj.get("controller_epoch")
        isr, elr = obj.get("isr"), obj.get("eligible_leader_replicas", _NONE)
        last_known = obj.get("last_known_elr", _NONE)
        if (type(leader) is int and type(leader_epoch) is int and type(controller_epoch) is int
                and _distinct_ints(isr) and _distinct_ints(last_known) and _distinct_ints(elr)):
            return LeaderIsr(leader, leader_epoch, tuple(isr), controller_epoch, zk_version, tuple(last_known),
                             tuple(elr))
    return _decode_leader_isr_checked(topic, partition, data, zk_version)


_NONE: list[int] = []  # an absent list (never changed)


def _distinct_ints(value: Any) -> TypeGuard[list[int]]:
    return type(value) is list and _INT.issuperset(map(type, value)) and len(set(value)) == len(value)


def _decode_leader_isr_checked(topic: str, partition: int, data: bytes, zk_version: int) -> LeaderIsr:
    path = partition_state_path(topic, partition)
    obj = _load(path, data)
    return LeaderIsr(
        leader=_int(path, obj, "leader"),
        leader_epoch=_int(path, obj, "leader_epoch"),
        isr=_int_list(path, obj.get("isr"), "field 'isr'"),
        controller_epoch=_int(path, obj, "controller_epoch"),
        zk_version=zk_version,
        last_known_elr=_int_list(path, obj.get("last_known_elr", []), "field 'last_known_elr'"),
        elr=_int_list(path, obj.get("eligible_leader_replicas", []), "field 'eligible_leader_replicas'"),
    )


# ----------------------------------------------------------------------------- admin


@dataclass(frozen=True)
class Reassignment:
    """One partition's reassignment: move from ``original_replicas`` to ``replicas``."""

    topic: str
    partition: int
    replicas: tuple[int, ...]  # the target (RAR)
    original_replicas: tuple[int, ...]  # before the move (OAR), for KIP-236 cancellation

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def encode_reassignments(entries: Iterable[Reassignment]) -> bytes:
    return _dump({"partitions": [
        {"topic": e.topic, "partition": e.partition, "replicas": list(e.replicas),
         "original_replicas": list(e.original_replicas)}
        for e in sorted(entries, key=lambda e: (e.topic, e.partition))
    ]})


def decode_reassignments(data: bytes, path: str = REASSIGN_PARTITIONS) -> list[Reassignment]:
    """Also reads the user's reassignment JSON file (``original_replicas`` optional there)."""
    result: list[Reassignment] = []
    seen: set[TopicPartition] = set()
    for i, entry in enumerate(_partition_list(path, _load(path, data))):
        where = f"{path} partitions[{i}]"
        replicas = _int_list(where, entry.get("replicas"), "field 'replicas'")
        if not replicas:
            raise LayoutError(where, "field 'replicas' must not be empty")
        original = _int_list(where, entry.get("original_replicas", []), "field 'original_replicas'")
        r = Reassignment(_check_topic_name(entry["topic"]), entry["partition"], replicas, original)
        if r.tp in seen:
            raise LayoutError(where, f"partition {r.topic}-{r.partition} is listed twice")
        seen.add(r.tp)
        result.append(r)
    return result


def encode_partition_list(partitions: Iterable[TopicPartition]) -> bytes:
    """For /admin/reassign_cancel, /admin/preferred_replica_election and ISR notifications."""
    return _dump({"partitions": [
        {"topic": tp.topic, "partition": tp.partition}
        for tp in sorted(set(partitions), key=lambda tp: (tp.topic, tp.partition))
    ]})


def decode_partition_list(path: str, data: bytes) -> list[TopicPartition]:
    return [TopicPartition(e["topic"], e["partition"]) for e in _partition_list(path, _load(path, data))]


@dataclass(frozen=True)
class LogDirEvent:
    broker_id: int
    event: int = LOG_DIR_FAILURE_EVENT


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dump({"broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(name: str, data: bytes) -> LogDirEvent:
    path = log_dir_event_path(name)
    obj = _load(path, data)
    return LogDirEvent(_int(path, obj, "broker"), _int(path, obj, "event"))


def sorted_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """Partitions in a deterministic order (never rely on set order of strings)."""
    return sorted(partitions, key=_TOPIC_AND_PARTITION)


_TOPIC_AND_PARTITION = operator.attrgetter("topic", "partition")  # a failover sorts 10,000 a few times


def replica_list_str(replicas: Sequence[int]) -> str:
    return ",".join(str(r) for r in replicas)
