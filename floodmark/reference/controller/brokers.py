"""Broker liveness: registration, failure, heartbeats (KIP-343) and controlled shutdown.

A broker is *live* for the controller while its ephemeral ``/brokers/ids/<id>`` node exists
AND it keeps heartbeating. ZooKeeper alone is not enough: a broker can keep its ZooKeeper
session while it cannot reach the controller ("alive in ZooKeeper, deaf to the
controller"); it would then never hear that it lost leadership. KIP-343 closes the gap:

* each registration is an *incarnation*, named by the czxid of its node; requests carry it,
  and anything from or for an older incarnation is refused (STALE_BROKER_EPOCH);
* the controller keeps each broker Inactive (registered, not yet set up), Active
  (heartbeating) or Stopping (controlled shutdown);
* a broker that misses heartbeats for ``heartbeat_timeout`` is *fenced*: handled exactly like
  a failed broker (its leaderships move, it leaves every ISR) although still registered. The
  broker fences itself on its side after its own, shorter timeout, so it stops serving
  before the controller moves its partitions. When it heartbeats again it is set up afresh,
  like a restarted broker;
* a broker registered at the legacy inter-broker protocol (BrokerInfo version 4) never
  heartbeats: it is Active once set up and never fenced for silence (only its registration
  going tells the controller it failed), as every broker was before KIP-343.

Broker failure (V3 design): partitions it led elect a new leader from the live ISR (or go
offline, or elect unclean if the variant allows); it leaves the ISR of partitions it
followed. Broker start-up: a broker whose registration says it recovered from an unclean
shutdown first leaves every ISR (KIP-966, ``unclean_recovery``); then it gets
UpdateMetadata and LeaderAndIsr for all its replicas, and offline partitions it can lead
are elected. Controlled shutdown moves every leadership it holds to another in-sync
replica first and takes it out of every ISR, so clients never see an unavailable leader.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from floodmark.contracts.node_event_kinds import BrokerState
from floodmark.reference.controller import reassignment, unclean_recovery
from floodmark.reference.controller.context import (
    ACTIVE,
    INACTIVE,
    OFFLINE,
    STOPPING,
    BrokerLiveness,
)
from floodmark.reference.controller.election import (
    Decision,
    elect_leader,
    remove_from_isr,
    resume_balanced_recovery,
)
from floodmark.reference.controller.partitions import (
    StatesAsWritten,
    change_partitions,
    send_leader_and_isr,
    send_stop_replica,
    send_update_metadata,
)
from floodmark.reference.controller.parts import ControllerParts
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.inter_broker_protocol import always_active
from floodmark.reference.protocol.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    Errors,
    TopicPartition,
)
from floodmark.reference.protocol.zk_layout import BrokerRegistration, LeaderIsr


async def _read_registrations(ctl: ControllerParts) -> dict[int, BrokerRegistration]:
    children = await ctl.zk.get_children(zk.BROKER_IDS, watch=ctl.watcher("brokers", lambda: on_brokers_changed(ctl)))
    registrations: dict[int, BrokerRegistration] = {}
    for name in children:
        try:
            broker_id = zk.parse_broker_id(name)
            reg = await ctl.zkw.read_broker(broker_id)
        except zk.LayoutError as e:
            ctl.runtime.log.error("ignoring malformed broker registration: %s", e)
            continue
        if reg is not None:
            registrations[broker_id] = reg
    return registrations


async def load_brokers(ctl: ControllerParts) -> None:
    now = ctl.runtime.monotonic()
    for broker_id, reg in sorted((await _read_registrations(ctl)).items()):
        # Failover sends every live broker its full state (is_init), which sets it up.
        ctl.ctx.brokers[broker_id] = BrokerLiveness(reg, last_heartbeat=now, set_up=True)
        ctl.channel.add_broker(broker_id, reg.address)
        _activate_legacy(ctl, broker_id)


async def on_brokers_changed(ctl: ControllerParts) -> None:
    current = await _read_registrations(ctl)
    known = ctl.ctx.brokers
    gone = sorted(b for b in known if b not in current or current[b].incarnation != known[b].registration.incarnation)
    new = sorted(b for b in current if b not in known or current[b].incarnation != known[b].registration.incarnation)
    if gone:
        for b in gone:
            ctl.runtime.emit(BrokerState(broker=b, state=OFFLINE, incarnation=known[b].registration.incarnation,
                                         why="registration gone"))  # the failure is detected here
            known.pop(b, None)
            ctl.channel.remove_broker(b)
            ctl.ctx.offline_replicas.pop(b, None)
        await on_broker_failure(ctl, gone)
    if new:
        await on_broker_startup(ctl, [current[b] for b in new])


async def on_broker_failure(ctl: ControllerParts, brokers: Iterable[int]) -> None:
    """Move leadership away from and shrink ISRs without ``brokers`` (already not live)."""
    failed = set(brokers)
    ctx = ctl.ctx
    affected = [tp for tp in ctx.partitions()
                if ctx.states[tp].leader in failed or failed & set(ctx.states[tp].isr)]
    written = StatesAsWritten(ctl)  # built once, for both requests
    changed = await change_partitions(ctl, affected, lambda tp, s: elect_leader(
        ctx.replicas(tp), s, lambda r: ctx.may_lead(r, tp), ctx.epoch,
        allow_unclean=ctl.config.variant.unclean_leader_election), on_written=written)
    send_leader_and_isr(ctl, changed, update_metadata=False, known=written.states)
    # Let the channel send LeaderAndIsr (what brokers act on) while UpdateMetadata is built.
    await ctl.runtime.sleep(0)
    send_update_metadata(ctl, ctx.partitions(), known=written.states)


async def on_broker_startup(ctl: ControllerParts, registrations: Iterable[BrokerRegistration]) -> None:
    ctx = ctl.ctx
    now = ctl.runtime.monotonic()
    started: list[int] = []
    for reg in registrations:
        ctx.brokers[reg.broker_id] = BrokerLiveness(reg, last_heartbeat=now)
        ctx.offline_replicas.pop(reg.broker_id, None)  # a new incarnation reports its dirs afresh
        ctl.channel.add_broker(reg.broker_id, reg.address)
        ctl.runtime.emit(BrokerState(broker=reg.broker_id, state=INACTIVE, incarnation=reg.incarnation,
                                     why="registered", unclean_shutdown=reg.unclean_shutdown))
        started.append(reg.broker_id)
    # KIP-966: out of every ISR before it hears anything, so that it cannot lead what it lost.
    changed = await unclean_recovery.remove_recovered_brokers(ctl, started)
    if changed:  # the others hear of it now; the started brokers get their full state next
        send_leader_and_isr(ctl, changed, brokers=[b for b in ctx.live_broker_ids() if b not in started],
                            update_metadata=False)
    await _set_up_brokers(ctl, started)


async def _set_up_brokers(ctl: ControllerParts, brokers: list[int]) -> None:
    ctx = ctl.ctx
    send_update_metadata(ctl, ctx.partitions())
    for b in brokers:
        send_leader_and_isr(ctl, ctx.partitions_on(b), brokers=[b], update_metadata=False)
    for b in brokers:
        if b in ctx.brokers:
            ctx.brokers[b].set_up = True
            _activate_legacy(ctl, b)
    await elect_offline_partitions(ctl)
    await reassignment.resume_all(ctl)


async def elect_offline_partitions(
    ctl: ControllerParts, *, send: bool = True, on_written: Callable[[list[TopicPartition]], None] | None = None,
) -> list[TopicPartition]:
    """Partitions without an eligible leader get one if possible (or go offline), and
    ineligible replicas leave the ISR (after failover the dead are simply not registered).
    A balanced unclean recovery (KIP-966) that waited for its possible leaders resumes once
    they are all back."""
    ctx = ctl.ctx
    leaderless = [tp for tp in ctx.partitions()
                  if not all(ctx.may_lead(r, tp) for r in (ctx.states[tp].leader, *ctx.states[tp].isr))]
    ends = await unclean_recovery.waiting_log_ends(ctl, leaderless)

    def decide(tp: TopicPartition, s: LeaderIsr) -> Decision | None:
        eligible = functools.partial(ctx.may_lead, tp=tp)
        return (elect_leader(ctx.replicas(tp), s, eligible, ctx.epoch,
                             allow_unclean=ctl.config.variant.unclean_leader_election)
                or resume_balanced_recovery(  # KIP-966: every possible leader is back
                    ctx.replicas(tp), s, eligible, ctx.epoch, log_ends=ends.get(tp)))

    changed = await change_partitions(ctl, leaderless, decide, on_written=on_written)
    if send:
        send_leader_and_isr(ctl, changed)
    return changed


# ----------------------------------------------------------------------------- KIP-343 heartbeats


def _activate_legacy(ctl: ControllerParts, broker_id: int) -> None:
    """A legacy registration (no heartbeats) is Active as soon as it is set up."""
    live = ctl.ctx.brokers[broker_id]
    if always_active(live.registration.info_version) and live.state == INACTIVE:
        live.state = ACTIVE
        ctl.runtime.emit(BrokerState(broker=broker_id, state=ACTIVE, incarnation=live.registration.incarnation,
                                     why="legacy registration"))


def on_heartbeat(ctl: ControllerParts, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
    ctx = ctl.ctx
    live = ctx.brokers.get(request.broker_id)
    if live is None or request.broker_incarnation > live.registration.incarnation:
        # Registered after our last look at /brokers/ids: look again.
        ctl.enqueue("brokers", lambda: on_brokers_changed(ctl))
        return BrokerHeartbeatResponse(None, ctx.epoch, INACTIVE)
    if request.broker_incarnation < live.registration.incarnation:
        return BrokerHeartbeatResponse(Errors.STALE_BROKER_EPOCH, ctx.epoch, INACTIVE, should_shutdown=True)
    live.last_heartbeat = ctl.runtime.monotonic()
    if live.fenced:
        live.fenced = False
        live.state = INACTIVE
        live.set_up = False
        ctl.channel.add_broker(request.broker_id, live.registration.address)
        ctl.runtime.emit(BrokerState(broker=request.broker_id, state=INACTIVE,
                                     incarnation=live.registration.incarnation, why="heartbeats resumed"))
        ctl.enqueue("broker-unfenced", lambda: _set_up_brokers(ctl, [request.broker_id]))
        return BrokerHeartbeatResponse(None, ctx.epoch, INACTIVE)
    if live.state == INACTIVE and live.set_up:
        live.state = ACTIVE
        ctl.runtime.emit(BrokerState(broker=request.broker_id, state=ACTIVE,
                                     incarnation=live.registration.incarnation))
    stopping = live.state == STOPPING
    should_shutdown = stopping and not ctx.partitions_led_by(request.broker_id)
    return BrokerHeartbeatResponse(None, ctx.epoch, live.state, should_shutdown=should_shutdown)


async def heartbeat_monitor(ctl: ControllerParts, epoch: int) -> None:
    """Fence brokers whose heartbeats stopped, for as long as this reign lasts."""
    timeout = ctl.config.heartbeat_timeout or 0.0
    while ctl.is_active and ctl.ctx.epoch == epoch:
        await ctl.runtime.sleep(max(0.05, timeout / 4))
        now = ctl.runtime.monotonic()
        for broker_id, live in sorted(ctl.ctx.brokers.items()):
            if (not live.fenced and now - live.last_heartbeat > timeout
                    and not always_active(live.registration.info_version)):
                live.fenced = True
                live.state = INACTIVE
                ctl.channel.remove_broker(broker_id)
                ctl.runtime.emit(BrokerState(broker=broker_id, state="Fenced",
                                             incarnation=live.registration.incarnation, why="heartbeat timeout"))
                ctl.runtime.log.warning("broker %s missed heartbeats for %.1fs: fenced", broker_id, timeout)
                ctl.enqueue("broker-fenced", functools.partial(on_broker_failure, ctl, [broker_id]))


# ----------------------------------------------------------------------------- controlled shutdown


async def controlled_shutdown(ctl: ControllerParts, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
    ctx = ctl.ctx
    b = request.broker_id
    live = ctx.brokers.get(b)
    if live is None:
        return ControlledShutdownResponse(Errors.INVALID_REQUEST)
    if request.broker_incarnation != live.registration.incarnation:
        return ControlledShutdownResponse(Errors.STALE_BROKER_EPOCH)
    if live.state != STOPPING:
        live.state = STOPPING
        ctl.runtime.emit(BrokerState(broker=b, state=STOPPING, incarnation=live.registration.incarnation))

    def decide(tp: TopicPartition, s: LeaderIsr) -> Decision | None:
        # Only move a leadership if another in-sync replica can take it; else keep it.
        others = [r for r in s.isr if r != b and ctx.may_lead(r, tp)]
        if s.leader == b and not others:
            return None
        return remove_from_isr(s, {b}, lambda r: ctx.may_lead(r, tp), ctx.epoch, ctx.replicas(tp))

    involved = [tp for tp in ctx.partitions_on(b) if b in ctx.states[tp].isr or ctx.states[tp].leader == b]
    changed = await change_partitions(ctl, involved, decide)
    send_leader_and_isr(ctl, changed)
    followed = [tp for tp in ctx.partitions_on(b) if ctx.states[tp].leader != b]
    send_stop_replica(ctl, b, followed, delete=False)
    remaining = tuple(ctx.partitions_led_by(b))
    return ControlledShutdownResponse(None, remaining_partitions=remaining)
