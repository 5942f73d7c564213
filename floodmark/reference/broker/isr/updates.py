"""ISR updates: how a leader writes a shrunk or expanded ISR to ZooKeeper, and loses.

The partition's state node (leader, leader epoch, ISR, controller epoch) has two writers:
the controller (elections) and the partition's leader (ISR changes). They are kept apart by
ZooKeeper's versions: the leader writes *conditionally* on the version it last saw. If the
write fails, someone else (the controller) changed the node in between; the leader re-reads
it. If it still names this broker as leader in the same epoch, only the ISR moved under it
(the controller took a dead replica out): it adopts that ISR and version. Otherwise its view
is stale (a new leader was elected while it was cut off): it stops acting as leader and
waits for the controller's LeaderAndIsr (a ``fenced`` event).

Without the version check (the ``unconditional-isr-write`` variant) the stale leader's write
simply lands, overwriting the controller's newer leader and ISR.

After a successful change the leader also drops a sequential ``isr_change_`` node so the
controller refreshes every broker's metadata.
"""

from __future__ import annotations

import contextlib

from floodmark.reference.broker.partition import Partition
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.eligible_leaders import next_elr, tracks_elr
from floodmark.reference.protocol.messages import TopicPartition
from floodmark.reference.runtime import (
    BadVersionError,
    ConnectionLossError,
    Coordination,
    NoNodeError,
    Runtime,
    SessionExpiredError,
)


async def write_isr(runtime: Runtime, zk_client: Coordination, partition: Partition,
                    new_isr: tuple[int, ...], change: str) -> bool:
    """Write ``new_isr`` for ``partition`` (which must be leader); True if it was applied."""
    epoch = partition.leader_epoch
    path = zk.partition_state_path(partition.topic, partition.partition)
    elr = (next_elr(partition.replicas, partition.isr, partition.elr, new_isr, partition.min_insync_replicas)
           if tracks_elr(partition.variant) else ())
    data = zk.encode_leader_isr(zk.LeaderIsr(
        leader=partition.broker_id, leader_epoch=epoch, isr=new_isr,
        controller_epoch=partition.controller_epoch, elr=elr))
    version = -1 if partition.variant.unconditional_isr_write else partition.zk_version
    partition.isr_update_pending = True
    try:
        stat = await zk_client.set(path, data, version)
    except BadVersionError:
        await _reconcile(zk_client, partition, epoch)
        return False
    except (ConnectionLossError, SessionExpiredError, NoNodeError) as e:
        runtime.log.warning("ISR write for %s-%s failed: %s", partition.topic, partition.partition, e)
        if partition.leader_epoch == epoch:
            # Connection loss leaves unknown whether the write landed.
            partition.end_isr_update(outcome_known=isinstance(e, NoNodeError))
        return False
    if partition.leader_epoch != epoch or partition.role != "leader":
        return False  # the controller moved on while we were writing; its LeaderAndIsr rules
    partition.apply_isr(new_isr, stat.version, change, elr, zxid=stat.mzxid)
    await _notify_controller(zk_client, partition)
    return True


async def _reconcile(zk_client: Coordination, partition: Partition, epoch: int) -> None:
    """The conditional write lost: re-read the node and decide whether our view is stale."""
    try:
        data, stat = await zk_client.get(zk.partition_state_path(partition.topic, partition.partition))
        current = zk.decode_leader_isr(partition.topic, partition.partition, data, stat.version)
    except (NoNodeError, ConnectionLossError, SessionExpiredError, zk.LayoutError):
        partition.fence("lost the conditional ISR write and cannot re-read the state")
        return
    if partition.leader_epoch != epoch:
        return  # a LeaderAndIsr arrived meanwhile and already set the replica straight
    if current.leader == partition.broker_id and current.leader_epoch == epoch:
        partition.end_isr_update()
        if current.isr != partition.isr:
            partition.apply_isr(current.isr, stat.version, "controller", current.elr)
            # Maybe our own earlier write, whose answer was lost (so it sent no notification,
            # as Kafka's checkLeaderAndIsrZkData finds): announce it, or every broker's
            # metadata keeps the old ISR until the controller's next event, which in a quiet
            # cluster never comes (explore seed 57). A second notice of the controller's own
            # change costs one metadata refresh.
            await _notify_controller(zk_client, partition)
        else:
            partition.zk_version = stat.version
        return
    partition.fence(
        f"lost the conditional ISR write at version {partition.zk_version}: ZooKeeper now has "
        f"leader {current.leader} epoch {current.leader_epoch} at version {stat.version}")


async def _notify_controller(zk_client: Coordination, partition: Partition) -> None:
    # If this fails, metadata still refreshes on the controller's next event.
    with contextlib.suppress(ConnectionLossError, SessionExpiredError, NoNodeError):
        await zk_client.create(
            zk.isr_change_path(zk.ISR_CHANGE_PREFIX),
            zk.encode_partition_list([TopicPartition(partition.topic, partition.partition)]),
            sequential=True, makepath=True)
