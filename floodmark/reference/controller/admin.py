"""Topic lifecycle and admin requests: create, delete, add/remove partitions, preferred election.

Admin tools never talk to the controller directly (ZooKeeper-era Kafka): they write
ZooKeeper nodes and the controller, watching them, carries the work out.

* **Create**: the tool writes ``/brokers/topics/<t>`` with the assignment. The controller
  creates each partition's state node (``init_leaders``: the first live replica leads, the
  live replicas form the ISR, leader epoch 0) and sends LeaderAndIsr marked ``is_new``.
* **Add / remove partitions**: the tool rewrites the assignment; partitions that appeared are
  created as above, partitions that disappeared are stopped and deleted like a topic.
* **Delete**: the tool creates ``/admin/delete_topics/<t>``. The controller sends
  StopReplica(delete=True) to every live replica, then removes the topic's nodes and the
  request. A replica on a broker that was down deletes its copy when it starts up and finds
  the partition no longer assigned to it (V3 broker start-up).
* **Preferred replica election**: ``/admin/preferred_replica_election`` lists partitions whose
  first assigned replica should lead again.

Each step is idempotent, so a successor controller simply runs it again after failover.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from floodmark.contracts.node_event_kinds import LeaderElected
from floodmark.reference.controller.election import initial_state, preferred_leader
from floodmark.reference.controller.partitions import (
    change_partitions,
    send_leader_and_isr,
    send_stop_replica,
    send_update_metadata,
)
from floodmark.reference.controller.parts import ControllerParts
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import LEADER_DURING_DELETE, TopicPartition
from floodmark.reference.runtime import (
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    TxnOp,
    WatchCallback,
)

# ----------------------------------------------------------------------------- loading


async def _read_topic_watched(ctl: ControllerParts, topic: str) -> zk.TopicAssignment | None:
    try:
        data, _ = await ctl.zk.get(zk.topic_path(topic),
                                   watch=ctl.watcher("topic-modified", lambda: on_topic_modified(ctl, topic)))
    except NoNodeError:
        return None
    try:
        return zk.decode_topic(topic, data)
    except zk.LayoutError as e:  # someone wrote garbage: leave that topic alone, keep the rest
        ctl.runtime.log.error("ignoring topic with a malformed assignment: %s", e)
        return None


async def _read_states(ctl: ControllerParts, tps: list[TopicPartition]) -> None:
    """Read the state nodes that exist, many requests in flight at once (as Kafka pipelines)."""
    present: list[TopicPartition] = []
    for topic in sorted({tp.topic for tp in tps}):
        try:
            children = set(await ctl.zk.get_children(zk.partitions_path(topic)))
        except NoNodeError:
            continue
        present.extend(tp for tp in tps if tp.topic == topic and str(tp.partition) in children)
    for tp, state in zip(present, await ctl.zkw.read_states(present)):
        if state is not None:
            ctl.ctx.states[tp] = state


async def load_topics(ctl: ControllerParts) -> None:
    topics = await ctl.zk.get_children(zk.TOPICS, watch=ctl.watcher("topics", lambda: on_topics_changed(ctl)))
    for topic in sorted(topics):
        assignment = await _read_topic_watched(ctl, topic)
        if assignment is None:
            continue
        ctl.ctx.assignments[topic] = assignment
        await _read_states(ctl, ctl.ctx.partitions_of_topic(topic))


async def init_missing_partitions(ctl: ControllerParts) -> None:
    """Partitions assigned in ZooKeeper without a state node yet (new, or creation interrupted)."""
    ctx = ctl.ctx
    missing = [TopicPartition(t, p) for t in sorted(ctx.assignments) for p in sorted(ctx.assignments[t].partitions)
               if TopicPartition(t, p) not in ctx.states and t not in ctx.topics_being_deleted]
    await _create_partitions(ctl, missing)


async def _create_partitions(ctl: ControllerParts, tps: list[TopicPartition]) -> None:
    ctx = ctl.ctx
    if not tps:
        return
    ops: list[TxnOp] = []
    states: dict[TopicPartition, zk.LeaderIsr] = {}
    existing: dict[str, set[str]] = {}  # partition nodes already there (an interrupted creation)
    for topic in sorted({tp.topic for tp in tps}):
        try:
            existing[topic] = set(await ctl.zk.get_children(zk.partitions_path(topic)))
        except NoNodeError:
            existing[topic] = set()
            ops.append(CreateOp(zk.partitions_path(topic)))
    for tp in tps:
        state = initial_state(ctx.replicas(tp), functools.partial(ctx.may_lead, tp=tp), ctx.epoch)
        if str(tp.partition) not in existing[tp.topic]:
            ops.append(CreateOp(zk.partition_path(tp.topic, tp.partition)))
        ops.append(CreateOp(zk.partition_state_path(tp.topic, tp.partition), zk.encode_leader_isr(state)))
        states[tp] = state
    step = ctl.zkw.ops_per_multi if ctl.zkw.batched else 3
    if await ctl.zkw.multi_in_chunks(ops, step, NodeExistsError):
        for tp, found in zip(tps, await ctl.zkw.read_states(tps)):
            if found is not None:
                states[tp] = found
    for tp in sorted(states, key=lambda tp: (tp.topic, tp.partition)):
        ctx.states[tp] = states[tp].with_version(0) if states[tp].zk_version < 0 else states[tp]
        s = ctx.states[tp]
        ctl.runtime.emit(LeaderElected(topic=tp.topic, partition=tp.partition, leader=s.leader,
                                       leader_epoch=s.leader_epoch, isr=s.isr, controller_epoch=ctx.epoch,
                                       zk_version=s.zk_version, unclean=False))
    send_leader_and_isr(ctl, list(states), is_new=True)


# ----------------------------------------------------------------------------- watches


async def on_topics_changed(ctl: ControllerParts) -> None:
    ctx = ctl.ctx
    topics = set(await ctl.zk.get_children(zk.TOPICS, watch=ctl.watcher("topics", lambda: on_topics_changed(ctl))))
    for gone in sorted(set(ctx.assignments) - topics):
        _forget_topic(ctl, gone)
    new: list[TopicPartition] = []
    for topic in sorted(topics - set(ctx.assignments)):
        assignment = await _read_topic_watched(ctl, topic)
        if assignment is None:
            continue
        ctx.assignments[topic] = assignment
        tps = ctx.partitions_of_topic(topic)
        await _read_states(ctl, tps)
        new.extend(tp for tp in tps if tp not in ctx.states)
    await _create_partitions(ctl, new)


async def on_topic_modified(ctl: ControllerParts, topic: str) -> None:
    """Partitions added or removed by rewriting the assignment."""
    ctx = ctl.ctx
    old = ctx.assignments.get(topic)
    assignment = await _read_topic_watched(ctl, topic)
    if old is None or assignment is None or topic in ctx.topics_being_deleted:
        return
    added = sorted(set(assignment.partitions) - set(old.partitions))
    removed = sorted(set(old.partitions) - set(assignment.partitions))
    # Replicas of existing partitions change only through reassignment, which the
    # controller itself writes: keep its view for those.
    merged = {p: old.partitions.get(p, r) for p, r in assignment.partitions.items()}
    ctx.assignments[topic] = zk.TopicAssignment(topic, merged, assignment.config)
    if removed:
        await _delete_partitions(ctl, [TopicPartition(topic, p) for p in removed],
                                 {TopicPartition(topic, p): old.partitions[p] for p in removed})
    await _create_partitions(ctl, [TopicPartition(topic, p) for p in added])


def _forget_topic(ctl: ControllerParts, topic: str) -> None:
    ctx = ctl.ctx
    for tp in [tp for tp in ctx.states if tp.topic == topic]:
        ctx.states.pop(tp, None)
        ctx.reassignments.pop(tp, None)
    ctx.assignments.pop(topic, None)


async def _delete_partitions(
    ctl: ControllerParts, tps: list[TopicPartition], replicas: dict[TopicPartition, tuple[int, ...]],
) -> None:
    ctx = ctl.ctx
    per_broker: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        for r in replicas.get(tp, ()):
            per_broker.setdefault(r, []).append(tp)
    for broker in sorted(per_broker):
        send_stop_replica(ctl, broker, per_broker[broker], delete=True)
    # Every broker, replica or not, must stop advertising the partitions to clients.
    deleting = {tp: replace(ctx.partition_state(tp), leader=LEADER_DURING_DELETE) for tp in tps if tp in ctx.states}
    send_update_metadata(ctl, deleting, known=deleting)
    ops: list[TxnOp] = []
    for tp in tps:
        if tp in ctx.states:
            ops.append(DeleteOp(zk.partition_state_path(tp.topic, tp.partition)))
        ops.append(DeleteOp(zk.partition_path(tp.topic, tp.partition)))
        ctx.states.pop(tp, None)
        ctx.reassignments.pop(tp, None)
    await _delete_nodes(ctl, ops)


async def _delete_nodes(ctl: ControllerParts, ops: list[TxnOp]) -> None:
    await ctl.zkw.multi_in_chunks(ops, ctl.zkw.ops_per_multi, NoNodeError)


async def on_delete_topics(ctl: ControllerParts) -> None:
    ctx = ctl.ctx
    names = await ctl.zk.get_children(zk.DELETE_TOPICS,
                                      watch=ctl.watcher("delete-topics", lambda: on_delete_topics(ctl)))
    for topic in sorted(names):
        assignment = ctx.assignments.get(topic)
        ctx.topics_being_deleted.add(topic)
        if assignment is not None:
            tps = ctx.partitions_of_topic(topic)
            await _delete_partitions(ctl, tps, {tp: ctx.replicas(tp) for tp in tps})
            ops: list[TxnOp] = []
            if await ctl.zk.exists(zk.partitions_path(topic)) is not None:
                ops.append(DeleteOp(zk.partitions_path(topic)))
            ops.append(DeleteOp(zk.topic_path(topic)))
            await _delete_nodes(ctl, ops)
            _forget_topic(ctl, topic)
        await _delete_nodes(ctl, [DeleteOp(zk.delete_topic_path(topic))])
        ctx.topics_being_deleted.discard(topic)
        ctl.runtime.log.info("controller deleted topic %s", topic)


async def read_partition_request(ctl: ControllerParts, path: str, watch: WatchCallback,
                                 what: str) -> tuple[list[TopicPartition] | None, int] | None:
    """The partitions an admin request node lists, and the node's version; watches the node.

    None when there is no request; a list that does not parse is logged and read as None
    (the caller decides what a malformed request means).
    """
    if await ctl.zk.exists(path, watch=watch) is None:
        return None
    try:
        data, stat = await ctl.zk.get(path)
    except NoNodeError:
        return None
    try:
        return zk.decode_partition_list(path, data), stat.version
    except zk.LayoutError as e:
        ctl.runtime.log.error("ignoring malformed %s: %s", what, e)
        return None, stat.version


async def on_preferred_election(ctl: ControllerParts) -> None:
    ctx = ctl.ctx
    watch = ctl.watcher("preferred-election", lambda: on_preferred_election(ctl))
    request = await read_partition_request(ctl, zk.PREFERRED_REPLICA_ELECTION, watch,
                                           "preferred election request")
    if request is None:
        return
    wanted, version = request
    if not wanted:  # none listed, or a malformed list: every partition
        wanted = ctx.partitions()
    changed = await change_partitions(ctl, [tp for tp in wanted if tp in ctx.states], lambda tp, s: preferred_leader(
        ctx.replicas(tp), s, lambda r: ctx.may_lead(r, tp), ctx.epoch), reread=True)
    send_leader_and_isr(ctl, changed)
    await _delete_nodes(ctl, [DeleteOp(zk.PREFERRED_REPLICA_ELECTION, version)])
    await ctl.zk.exists(zk.PREFERRED_REPLICA_ELECTION, watch=watch)
    send_update_metadata(ctl, [])
