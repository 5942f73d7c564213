"""ISR writes (floodmark.reference.broker.isr.updates) racing other writers of the state node."""

from __future__ import annotations

from broker_fixtures import SimCluster

from floodmark.contracts.node_events import Fenced, IsrChanged
from floodmark.reference.protocol import zk_layout as zk


def test_a_lost_write_under_the_same_leader_and_epoch_adopts_the_newer_isr_and_retries() -> None:
    cluster = SimCluster(seed=9, nodes=4, replica_lag_time_max=3.0)
    try:
        cluster.create_topic("t", 1, 3, assignment={0: (2, 3, 4)})
        cluster.world.partition({"n4"}, {"n2", "n3"})
        state = cluster.state("t", 0)
        assert state is not None and state.leader == 2
        # Someone else (as the controller would) rewrites the node: same leader and epoch,
        # a different ISR, a new version the leader has not seen.
        same = zk.LeaderIsr(2, state.leader_epoch, (2, 4), state.controller_epoch)
        cluster.run(cluster.admin.zk.set(zk.partition_state_path("t", 0), zk.encode_leader_isr(same),
                                         state.zk_version))
        leader = cluster.replica("n2", "t", 0)
        assert leader is not None
        # It adopts {2, 4}, lets the healthy 3 back in, drops the cut-off 4, and stays leader
        # (once its write's answer is back: ZooKeeper shows the write before the leader knows).
        assert cluster.world.run_until(
            lambda: cluster.state("t", 0).isr == leader.isr == (2, 3), 30.0)  # type: ignore[union-attr]
        assert not cluster.events("n2", Fenced) and leader.is_leader
        changes = [(e.change, e.isr) for e in cluster.events("n2", IsrChanged)]
        assert changes == [("controller", (2, 4)), ("expand", (2, 3, 4)), ("shrink", (2, 3))]
        cluster.world.run_for(10.0)
        assert len(cluster.events("n2", IsrChanged)) == 3  # and no flapping afterwards
        assert leader.zk_version == cluster.state("t", 0).zk_version  # type: ignore[union-attr]
        assert cluster.world.failures == []
    finally:
        cluster.close()
