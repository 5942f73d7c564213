"""The cluster's roles and ISRs as ZooKeeper's nodes tell them (floodmark.backends.zk_view).

The decoding is the same for every backend; here the nodes come from a dictionary, written
with the reference's own encoders, as ZooKeeper would hold them.
"""

from __future__ import annotations

from floodmark.backends.zk_view import out_of_isr, read_replicas, read_roles, read_snapshot
from floodmark.reference.protocol import zk_layout as zk


def nodes() -> dict[str, tuple[bytes, int]]:
    states = {0: zk.LeaderIsr(leader=1, leader_epoch=2, isr=(1, 2), controller_epoch=1),
              1: zk.LeaderIsr(leader=3, leader_epoch=0, isr=(3, 1, 2), controller_epoch=1)}
    found = {zk.CONTROLLER: (zk.encode_controller(2), 0),
             zk.topic_path("t0"): (zk.encode_topic(zk.TopicAssignment("t0", {0: (1, 2, 3), 1: (3, 1, 2), 2: (2, 1, 4)})), 0)}
    for partition, state in states.items():
        found[zk.partition_state_path("t0", partition)] = (zk.encode_leader_isr(state), 5)
    return found


def test_roles_replicas_and_who_is_out_of_an_isr_are_read_from_the_nodes() -> None:
    held = nodes()
    controller, leaders = read_roles(held.get, [("t0", 0), ("t0", 1), ("t0", 2)])
    assert controller == 2 and leaders == {("t0", 0): 1, ("t0", 1): 3}
    assert read_replicas(held.get, ["t0", "t9"])[("t0", 2)] == (2, 1, 4)
    # Broker 3 is assigned t0/0 but not in its ISR; t0/2 has no state yet: not known to hold it.
    assert out_of_isr(held.get, 3, ["t0"]) == [("t0", 0)]
    assert out_of_isr(held.get, 1, ["t0"]) == [("t0", 2)]
    assert out_of_isr(held.get, 5, ["t0"]) == []
    held[zk.partition_state_path("t0", 1)] = (b"{not json", 6)
    assert out_of_isr(held.get, 3, ["t0"]) == [("t0", 0), ("t0", 1)]


def test_a_snapshot_names_the_partitions_an_admin_fault_added_after_the_tests_own() -> None:
    held = nodes()  # the test made t0/0 and t0/1; t0/2 was added while it ran
    roles = read_snapshot(held.get, [("t0", 0), ("t0", 1)], ["t0"])
    assert roles.partitions == (("t0", 0), ("t0", 1), ("t0", 2))
    assert roles.controller == 2 and roles.leaders == {("t0", 0): 1, ("t0", 1): 3}
    held[zk.partition_state_path("t0", 2)] = (zk.encode_leader_isr(
        zk.LeaderIsr(leader=4, leader_epoch=0, isr=(2, 1, 4), controller_epoch=1)), 0)
    assert read_snapshot(held.get, [("t0", 0), ("t0", 1)], ["t0"]).leaders[("t0", 2)] == 4
    # The test's own partitions keep their order and place, listed or not (ZooKeeper silent).
    assert read_snapshot({}.get, [("t0", 1), ("t0", 0)], ["t0"]).partitions == (("t0", 1), ("t0", 0))
