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

from collections.abc import Callable, Iterable
from typing import TypeVar

from floodmark.reference.controller import reassignment
from floodmark.reference.controller.election import elect_leader
from floodmark.reference.controller.partitions import (
    change_partitions,
    send_leader_and_isr,
    send_update_metadata,
)
from floodmark.reference.controller.parts import ControllerParts, Handler
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import TopicPartition
from floodmark.reference.runtime import DeleteOp, NoNodeError

T = TypeVar("T")


async def _take_notifications(ctl: ControllerParts, parent: str, handler: str,
                              reread: Handler, what: str,
                              read: Callable[[str, str, bytes], Iterable[T]], prefix: str = "") -> list[T]:
    """Read and delete each notification under ``parent`` whose name starts with ``prefix``.

    Watches ``parent`` for more (``reread`` runs as ``handler`` when one comes). ``read(name,
    path, data)`` is what a notification says; one that does not parse is logged as a
    malformed ``what`` and deleted all the same; one that vanished meanwhile is skipped.
    """
    names = await ctl.zk.get_children(parent, watch=ctl.watcher(handler, reread))
    found: list[T] = []
    for name in sorted(names):
        if not name.startswith(prefix):
            continue
        path = f"{parent}/{name}"
        try:
            data, _ = await ctl.zk.get(path)
            found.extend(read(name, path, data))
        except NoNodeError:
            continue
        except zk.LayoutError as e:
            ctl.runtime.log.error("ignoring malformed %s: %s", what, e)
        try:
            await ctl.zkw.multi([DeleteOp(path)])
        except Exception as e:
            if not isinstance(getattr(e, "cause", None), NoNodeError):
                raise
    return found


async def on_log_dir_events(ctl: ControllerParts) -> None:
    ctx = ctl.ctx
    brokers = set(await _take_notifications(
        ctl, zk.LOG_DIR_EVENTS, "log-dir-events", lambda: on_log_dir_events(ctl), "log dir event",
        lambda name, _path, data: [zk.decode_log_dir_event(name, data).broker_id],
        prefix=zk.LOG_DIR_EVENT_PREFIX))
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
    changed = set(await _take_notifications(
        ctl, zk.ISR_CHANGES, "isr-changes", lambda: on_isr_changes(ctl), "ISR change notification",
        lambda _name, path, data: zk.decode_partition_list(path, data)))
    tps = [tp for tp in zk.sorted_partitions(changed) if tp in ctx.states]
    for tp, fresh in zip(tps, await ctl.zkw.read_states(tps)):
        if fresh is not None:
            ctx.states[tp] = fresh
    if tps:
        send_update_metadata(ctl, tps)
        await reassignment.resume(ctl, [tp for tp in tps if tp in ctx.reassignments])
