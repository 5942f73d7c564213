"""Log directory failure (KIP-112) and ISR change notifications, as the controller sees them.

A broker with several log directories (JBOD) keeps running when one of them fails: it takes
that directory offline and writes ``/log_dir_event_notification/log_dir_event_<seq>``. The
notification does not say which replicas were lost; the controller finds out by sending the
broker a LeaderAndIsr for all its replicas, to which the broker answers
``KAFKA_STORAGE_ERROR`` for each replica on an offline directory. Those replicas are then
*offline*: they leave the ISR and any leadership among them moves to another in-sync replica,
while the broker's other replicas keep serving. The offline set is not stored in ZooKeeper:
a new controller re-learns it from the answers to its initial LeaderAndIsr, and a broker
that restarts starts with a clean slate.

ISR changes are made by leaders, not the controller; a leader announces them with
``/isr_change_notification/isr_change_<seq>`` so the controller can refresh every broker's
metadata (and notice that reassigned replicas caught up).
"""

from __future__ import annotations

from collections.abc import Iterable

from floodmark.reference.controller import reassignment
from floodmark.reference.controller.election import elect_leader
from floodmark.reference.controller.partitions import (
    change_partitions,
    send_leader_and_isr,
    send_update_metadata,
)
from floodmark.reference.controller.parts import ControllerParts
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import TopicPartition
from floodmark.reference.runtime import DeleteOp, NoNodeError


async def on_log_dir_events(ctl: ControllerParts) -> None:
    ctx = ctl.ctx
    names = await ctl.zk.get_children(
        zk.LOG_DIR_EVENTS, watch=ctl.watcher("log-dir-events", lambda: on_log_dir_events(ctl)))
    brokers: set[int] = set()
    for name in sorted(names):
        if not name.startswith(zk.LOG_DIR_EVENT_PREFIX):
            continue
        path = zk.log_dir_event_path(name)
        try:
            data, stat = await ctl.zk.get(path)
            brokers.add(zk.decode_log_dir_event(name, data).broker_id)
        except NoNodeError:
            continue
        except zk.LayoutError as e:
            ctl.runtime.log.error("ignoring malformed log dir event: %s", e)
            stat = None
        try:
            await ctl.zkw.multi([DeleteOp(path)])
        except Exception as e:
            if not isinstance(getattr(e, "cause", None), NoNodeError):
                raise
        del stat
    for broker in sorted(brokers):
        if ctx.is_serving(broker):
            ctl.runtime.log.info("log dir failure on broker %s: asking it which replicas are offline", broker)
            # Current state, unchanged epochs: the broker answers KAFKA_STORAGE_ERROR per lost replica.
            send_leader_and_isr(ctl, ctx.partitions_on(broker), brokers=[broker], update_metadata=False)


async def on_offline_replicas(ctl: ControllerParts, broker: int, partitions: Iterable[TopicPartition]) -> None:
    """``broker`` reported these replicas on an offline log directory."""
    ctx = ctl.ctx
    if not ctx.is_serving(broker):
        return
    known = ctx.offline_replicas.setdefault(broker, set())
    new = [tp for tp in zk.sorted_partitions(set(partitions)) if tp in ctx.states and tp not in known]
    if not new:
        return
    known.update(new)
    ctl.runtime.log.warning("broker %s reports %d offline replicas", broker, len(new))
    changed = await change_partitions(ctl, new, lambda tp, s: elect_leader(
        ctx.replicas(tp), s, lambda r: ctx.may_lead(r, tp), ctx.epoch,
        allow_unclean=ctl.config.variant.unclean_leader_election))
    send_leader_and_isr(ctl, changed, update_metadata=False)
    send_update_metadata(ctl, new)


async def on_isr_changes(ctl: ControllerParts) -> None:
    ctx = ctl.ctx
    names = await ctl.zk.get_children(
        zk.ISR_CHANGES, watch=ctl.watcher("isr-changes", lambda: on_isr_changes(ctl)))
    changed: set[TopicPartition] = set()
    for name in sorted(names):
        path = zk.isr_change_path(name)
        try:
            data, _ = await ctl.zk.get(path)
            changed.update(zk.decode_partition_list(path, data))
        except NoNodeError:
            continue
        except zk.LayoutError as e:
            ctl.runtime.log.error("ignoring malformed ISR change notification: %s", e)
        try:
            await ctl.zkw.multi([DeleteOp(path)])
        except Exception as e:
            if not isinstance(getattr(e, "cause", None), NoNodeError):
                raise
    tps = [tp for tp in zk.sorted_partitions(changed) if tp in ctx.states]
    for tp, fresh in zip(tps, await ctl.zkw.read_states(tps)):
        if fresh is not None:
            ctx.states[tp] = fresh
    if tps:
        send_update_metadata(ctl, tps)
        await reassignment.resume(ctl, [tp for tp in tps if tp in ctx.reassignments])
