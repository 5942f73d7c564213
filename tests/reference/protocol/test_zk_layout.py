"""The ZooKeeper layout: paths and encodings round-trip, bad content gets a clear error."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import TopicPartition


def test_paths_follow_the_v3_layout() -> None:
    assert zk.broker_path(3) == "/brokers/ids/3"
    assert zk.topic_path("t0") == "/brokers/topics/t0"
    assert zk.partition_state_path("t0", 2) == "/brokers/topics/t0/partitions/2/state"
    assert zk.delete_topic_path("t0") == "/admin/delete_topics/t0"
    assert zk.log_dir_event_path("log_dir_event_0000000001") == (
        "/log_dir_event_notification/log_dir_event_0000000001")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a b", "ü"])
def test_illegal_topic_names_are_rejected(name: str) -> None:
    with pytest.raises(zk.LayoutError, match="invalid topic name"):
        zk.topic_path(name)


def test_controller_and_epoch_round_trip() -> None:
    assert zk.decode_controller(zk.encode_controller(7)) == 7
    assert json.loads(zk.encode_controller(7))["brokerid"] == 7
    assert zk.decode_controller_epoch(zk.encode_controller_epoch(12)) == 12
    with pytest.raises(zk.LayoutError, match="/controller_epoch: not an integer"):
        zk.decode_controller_epoch(b"twelve")


def test_broker_registration_takes_incarnation_from_czxid() -> None:
    reg = zk.decode_broker(2, zk.encode_broker("10.0.0.2:9092"), czxid=4711)
    assert reg == zk.BrokerRegistration(2, "10.0.0.2:9092", 4711)
    with pytest.raises(zk.LayoutError, match="'address'"):
        zk.decode_broker(2, b'{"version":1}', 1)


def test_broker_registration_says_whether_it_recovered_from_an_unclean_shutdown() -> None:
    data = zk.encode_broker("n2", unclean_shutdown=True)
    assert json.loads(data)["unclean_shutdown"] is True
    assert zk.decode_broker(2, data, czxid=9) == zk.BrokerRegistration(2, "n2", 9, unclean_shutdown=True)
    assert not zk.decode_broker(2, zk.encode_broker("n2"), czxid=9).unclean_shutdown
    # A registration written before the field existed makes no claim: it reads as clean.
    old = zk.decode_broker(2, b'{"version":1,"address":"n2"}', czxid=9)
    assert old == zk.BrokerRegistration(2, "n2", 9) and not old.unclean_shutdown
    with pytest.raises(zk.LayoutError, match="'unclean_shutdown' must be true or false"):
        zk.decode_broker(2, b'{"version":1,"address":"n2","unclean_shutdown":1}', 9)


def test_broker_registration_carries_its_broker_info_version_only_when_it_has_one() -> None:
    # The default protocol's registration is byte for byte what it was before versions existed.
    assert zk.encode_broker("n2") == b'{"address":"n2","unclean_shutdown":false,"version":1}'
    assert zk.decode_broker(2, zk.encode_broker("n2"), czxid=9).info_version is None
    for version in (4, 5):
        data = zk.encode_broker("n2", info_version=version)
        assert json.loads(data)["broker_info_version"] == version
        assert zk.decode_broker(2, data, czxid=9) == zk.BrokerRegistration(2, "n2", 9, info_version=version)
    with pytest.raises(zk.LayoutError, match="'broker_info_version' must be an integer"):
        zk.decode_broker(2, b'{"version":1,"address":"n2","broker_info_version":"5"}', 9)


def test_topic_assignment_round_trip_and_config() -> None:
    a = zk.TopicAssignment("t0", {1: (2, 3, 1), 0: (1, 2, 3)}, {"min.insync.replicas": "2"})
    data = zk.encode_topic(a)
    assert json.loads(data)["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]}
    b = zk.decode_topic("t0", data)
    assert list(b.partitions) == [0, 1]
    assert b.partitions[1] == (2, 3, 1)
    assert b.min_insync_replicas == 2


@pytest.mark.parametrize("content,problem", [
    (b"not json", "not valid JSON"),
    (b"[1]", "expected a JSON object"),
    (b'{"partitions": {"x": [1]}}', "partition key 'x'"),
    (b'{"partitions": {"0": [1, 1]}}', "lists a broker twice"),
    (b'{"partitions": {"0": []}}', "has no replicas"),
    (b'{"partitions": {"0": [1]}, "config": {"min.insync.replicas": "two"}}', "must be an integer"),
])
def test_bad_topic_nodes_name_path_and_problem(content: bytes, problem: str) -> None:
    with pytest.raises(zk.LayoutError) as err:
        zk.decode_topic("t0", content)
    assert err.value.path == "/brokers/topics/t0"
    assert problem in str(err.value)


def test_leader_isr_round_trip_keeps_version_out_of_json() -> None:
    s = zk.LeaderIsr(2, 5, (2, 3), 4, zk_version=9)
    data = zk.encode_leader_isr(s)
    assert json.loads(data) == {"version": 1, "leader": 2, "leader_epoch": 5, "isr": [2, 3],
                                "controller_epoch": 4}
    assert zk.decode_leader_isr("t", 0, data, 9) == s
    with pytest.raises(zk.LayoutError, match="'leader_epoch' must be an integer"):
        zk.decode_leader_isr("t", 0, b'{"leader":1,"leader_epoch":"1","isr":[1],"controller_epoch":1}', 0)


def test_reassignments_round_trip_and_reject_duplicates() -> None:
    entries = [zk.Reassignment("t", 1, (4, 5), (1, 2)), zk.Reassignment("t", 0, (3,), (1,))]
    decoded = zk.decode_reassignments(zk.encode_reassignments(entries))
    assert [(r.partition, r.replicas, r.original_replicas) for r in decoded] == [
        (0, (3,), (1,)), (1, (4, 5), (1, 2))]
    dup = b'{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}'
    with pytest.raises(zk.LayoutError, match="listed twice"):
        zk.decode_reassignments(dup)
    with pytest.raises(zk.LayoutError, match="'replicas' must not be empty"):
        zk.decode_reassignments(b'{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}')


def test_partition_lists_and_log_dir_events() -> None:
    tps = [TopicPartition("b", 1), TopicPartition("a", 0), TopicPartition("a", 0)]
    decoded = zk.decode_partition_list(zk.PREFERRED_REPLICA_ELECTION, zk.encode_partition_list(tps))
    assert decoded == [TopicPartition("a", 0), TopicPartition("b", 1)]
    event = zk.decode_log_dir_event("log_dir_event_0000000000", zk.encode_log_dir_event(3))
    assert event == zk.LogDirEvent(3, zk.LOG_DIR_FAILURE_EVENT)


LEADER_ISR_FIELDS = ("leader", "leader_epoch", "isr", "controller_epoch", "last_known_elr",
                     "eligible_leader_replicas", "version")
ODD = st.sampled_from([None, True, 0, -1, 2 ** 70, 1.0, "1", [], [1], [1, 1], [2, True], [1, "2"], {}])


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(st.sampled_from(LEADER_ISR_FIELDS), st.one_of(ODD, st.just(...)), max_size=3),
       garbage=st.sampled_from([b"", b"[1]", b"\xff", b'{"leader":1', b"null"]))
def test_a_state_node_is_read_as_the_field_by_field_check_reads_it(changes: dict[str, Any], garbage: bytes) -> None:
    def read(decode: Any, data: bytes) -> Any:
        try:
            return decode("t", 3, data, 7)
        except zk.LayoutError as e:
            return str(e)

    obj: dict[str, Any] = json.loads(zk.encode_leader_isr(zk.LeaderIsr(2, 5, (2, 3), 4, 0, (1,), (3,))))
    for key, value in changes.items():
        if value is ...:
            obj.pop(key, None)  # absent
        else:
            obj[key] = value
    for data in (json.dumps(obj).encode(), garbage):
        assert read(zk.decode_leader_isr, data) == read(zk._decode_leader_isr_checked, data)


def test_a_new_version_keeps_every_other_field() -> None:
    s = zk.LeaderIsr(2, 5, (2, 3), 4, 1, (1,), (3,))
    assert s.with_version(8) == dataclasses.replace(s, zk_version=8)


def test_partitions_are_sorted_by_topic_then_partition_number() -> None:
    tps = [TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 9), TopicPartition("a", 0)]
    assert zk.sorted_partitions(set(tps)) == [TopicPartition("a", 0), TopicPartition("a", 9),
                                              TopicPartition("a", 10), TopicPartition("b", 0)]
