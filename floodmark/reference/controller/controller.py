"""The controller: one broker, elected through ZooKeeper, that decides leaders and ISRs.

Every broker runs a :class:`Controller` and competes for the ephemeral ``/controller`` node
(V3 design). The winner bumps ``/controller_epoch`` in the same transaction that creates the
node, so the epoch it holds identifies its reign: all its ZooKeeper writes are conditional on
that node's version (KAFKA-6082) and every request it sends carries the epoch, so brokers
ignore a deposed controller.

Once elected it re-reads the cluster state from ZooKeeper, takes brokers that registered
after an unclean shutdown out of every ISR (KIP-966), sends every live broker its full
state (LeaderAndIsr with the init flag), elects leaders for partitions whose leader is gone
and finishes whatever its predecessor left pending: reassignments, topic deletions,
preferred elections, log-directory events. It then reacts to ZooKeeper watches and to the
brokers' heartbeats (KIP-343) one event at a time, in order, on a single task, as Kafka's
controller event thread does. The handlers live in function modules by concept
(``partitions``, ``brokers``, ``admin``, ``reassignment``, ``log_dirs``); the controller
passes them itself as :class:`~floodmark.reference.controller.parts.ControllerParts`, the
parts they work with, and they never import this module.

It resigns when ``/controller`` is no longer its own, when a write fails the epoch check,
or when its ZooKeeper session is lost (its ephemeral node is gone with it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from floodmark.contracts.node_event_kinds import ControllerElected, ControllerResigned
from floodmark.reference.controller import admin as controller_admin
from floodmark.reference.controller import brokers as controller_brokers
from floodmark.reference.controller import isr_changes, reassignment, unclean_recovery
from floodmark.reference.controller import log_dirs as controller_log_dirs
from floodmark.reference.controller.channel import ControllerChannel
from floodmark.reference.controller.config import ControllerConfig
from floodmark.reference.controller.context import ControllerContext
from floodmark.reference.controller.partitions import (
    StatesAsWritten,
    send_leader_and_isr,
)
from floodmark.reference.controller.parts import Handler
from floodmark.reference.controller.zk_writes import ControllerMoved, ControllerZk
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    Errors,
    IsrChangeRequest,
    IsrChangeResponse,
    LeaderAndIsrResponse,
    TopicPartition,
)
from floodmark.reference.runtime import (
    BadVersionError,
    ConnectionLossError,
    Coordination,
    CreateOp,
    NoNodeError,
    Runtime,
    SessionExpiredError,
    SessionState,
    SetDataOp,
    TransactionFailed,
    WatchEvent,
)

R = TypeVar("R")  # a request's response type

# Events that run whether or not this broker is controller; every other event was queued
# for a reign that may have ended, and is dropped if it did.
_ALWAYS = frozenset({"elect", "controller-change", "session-lost", "controlled-shutdown", "isr-change"})


def event_thread_name(broker_id: int) -> str:
    """The name of the task that handles the controller's events one at a time (what a
    simulated stall of the event thread aims at)."""
    return f"controller-{broker_id}"


class Controller:
    def __init__(self, runtime: Runtime, broker_id: int, zk_client: Coordination,
                 config: ControllerConfig) -> None:
        self.runtime = runtime
        self.broker_id = broker_id
        self.config = config
        self.zk = zk_client
        self.ctx = ControllerContext(broker_id)
        self.zkw = ControllerZk(
            zk_client, self.ctx, runtime.log, epoch_check=not self.config.variant.controller_writes_without_epoch_check,
            batched=self.config.batched_writes, ops_per_multi=self.config.ops_per_multi,
        )
        self.channel = ControllerChannel(runtime, self._on_response, request_timeout=self.config.request_timeout)
        self.is_active = False
        self.active_controller_id = -1
        self._events: asyncio.Queue[tuple[str, Handler]] = asyncio.Queue()
        self._tasks: list[Any] = []
        self._stopped = False
        self.events_handled = 0  # events the event thread finished (evidence of a stall)

    # ------------------------------------------------------------------ lifecycle

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    async def start(self) -> None:
        """Join the election; returns once the first attempt has been made."""
        self.zk.add_session_listener(self._on_session_state)
        await self.zkw.ensure_layout()
        self._tasks.append(self.runtime.spawn(self._run_events(), name=event_thread_name(self.broker_id)))
        self.enqueue("elect", self._elect)

    async def stop(self) -> None:
        """Stop taking part; resign (deleting /controller) if this broker is controller."""
        if self.is_active:
            await self._resign("stopped")
            with contextlib.suppress(ConnectionLossError, SessionExpiredError):
                await self._release_own_node()  # others need not wait for our session to end
        self._stopped = True
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self.channel.close()

    async def replace_session(self, zk_client: Coordination) -> None:
        """The broker opened a new ZooKeeper session after losing its old one."""
        await self._resign("session replaced")
        self.zk = zk_client
        self.zkw.replace_session(zk_client)
        zk_client.add_session_listener(self._on_session_state)
        self.enqueue("elect", self._elect)

    @property
    def events_waiting(self) -> int:
        """Events queued for the event thread and not yet taken."""
        return self._events.qsize()

    def enqueue(self, name: str, handler: Handler) -> None:
        if not self._stopped:
            self._events.put_nowait((name, handler))

    def watcher(self, name: str, handler: Handler) -> Callable[[WatchEvent], None]:
        """A one-shot watch callback that queues ``handler`` while this broker is controller."""
        def fire(event: WatchEvent) -> None:
            if self.is_active:
                self.enqueue(name, handler)
        return fire

    async def _run_events(self) -> None:
        while True:
            name, handler = await self._events.get()
            if name not in _ALWAYS and not self.is_active:
                continue
            try:
                await handler()
            except ControllerMoved as e:
                await self._resign(str(e))
                self.enqueue("elect", self._elect)
            except SessionExpiredError:
                await self._resign("session expired")
            except ConnectionLossError as e:
                # The outcome of the last write is unknown: re-read everything by re-electing.
                self.runtime.log.warning("controller event %s: ZooKeeper connection lost (%s)", name, e)
                await self.runtime.sleep(0.5)
                if self.is_active:
                    await self._resign("zookeeper connection lost")
                self.enqueue("elect", self._elect)
            except Exception:
                self.runtime.log.exception("controller event %s failed", name)
            self.events_handled += 1

    def _on_session_state(self, state: SessionState) -> None:
        if state == "LOST" and self.is_active:
            self.enqueue("session-lost", lambda: self._resign("zookeeper session lost"))

    # ------------------------------------------------------------------ election

    async def _elect(self) -> None:
        if self.is_active or self._stopped:
            return
        stat = await self.zk.exists(zk.CONTROLLER, watch=self._controller_watch)
        if stat is not None:
            await self._read_active_controller()
            if self.active_controller_id == self.broker_id:
                # Our own node from a reign we gave up (e.g. after a connection loss, when we
                # could not know what our last write did): release it and elect afresh.
                await self._release_own_node()
            return
        epoch, version = await self.zkw.read_epoch()
        try:
            results = await self.zk.multi([
                CreateOp(zk.CONTROLLER, zk.encode_controller(self.broker_id), ephemeral=True),
                SetDataOp(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(epoch + 1), version),
            ])
        except TransactionFailed:
            await self._read_active_controller()  # someone else won this round
            return
        self.ctx.epoch = epoch + 1
        self.ctx.epoch_zk_version = results[1].version
        self.is_active = True
        self.active_controller_id = self.broker_id
        self.runtime.emit(ControllerElected(controller_epoch=self.ctx.epoch, broker=self.broker_id,
                                            zxid=results[1].mzxid))
        self.runtime.log.info("broker %s is controller at epoch %s", self.broker_id, self.ctx.epoch)
        try:
            await self._on_become_controller()
        except (ControllerMoved, SessionExpiredError, ConnectionLossError):
            raise
        except Exception:
            # A controller with half its state loaded must not go on deciding: step down and
            # free /controller (after a pause, so a persistent fault does not churn epochs).
            self.runtime.log.exception("controller failover failed at epoch %s", self.ctx.epoch)
            await self._resign("failover failed")
            await self.runtime.sleep(1.0)
            await self._release_own_node()

    async def _release_own_node(self) -> None:
        """Delete /controller if it is this session's node; the watch then re-runs the election."""
        stat = await self.zk.exists(zk.CONTROLLER)
        if stat is not None and stat.ephemeral_owner == self.zk.session_id:
            with contextlib.suppress(NoNodeError, BadVersionError):
                await self.zk.delete(zk.CONTROLLER, stat.version)

    def _controller_watch(self, event: WatchEvent) -> None:
        self.enqueue("controller-change", self._controller_changed)

    async def _read_active_controller(self) -> None:
        try:
            data, _ = await self.zk.get(zk.CONTROLLER, watch=self._controller_watch)
        except NoNodeError:
            self.active_controller_id = -1
            self.enqueue("elect", self._elect)
            return
        self.active_controller_id = zk.decode_controller(data)

    async def _controller_changed(self) -> None:
        await self._read_active_controller()
        if self.is_active and self.active_controller_id != self.broker_id:
            await self._resign(f"/controller now names broker {self.active_controller_id}")
        if self.active_controller_id == -1:
            await self._elect()

    async def _resign(self, why: str) -> None:
        if not self.is_active:
            return
        self.is_active = False
        self.runtime.emit(ControllerResigned(controller_epoch=self.ctx.epoch, why=why))
        self.runtime.log.info("broker %s resigns as controller (epoch %s): %s", self.broker_id, self.ctx.epoch, why)
        self.channel.close()
        # Keep the old epoch and its version: a write still in flight must keep failing the check.
        self.ctx = ControllerContext(self.broker_id, epoch=self.ctx.epoch,
                                     epoch_zk_version=self.ctx.epoch_zk_version)
        self.zkw.begin_reign(self.ctx)

    async def _on_become_controller(self) -> None:
        """Failover (V3 design): re-read everything, tell every broker, finish pending work."""
        await controller_brokers.load_brokers(self)
        await controller_admin.load_topics(self)
        await reassignment.load(self)
        # Brokers that registered after an unclean shutdown leave every ISR (KIP-966): the
        # predecessor may have had no time to (or, cut off from ZooKeeper, no way to) see
        # them fail. Then leaders for partitions whose leader is gone, so that every broker
        # gets one LeaderAndIsr with the complete, current state (is_init) rather than two.
        await unclean_recovery.remove_recovered_brokers(self, self.ctx.brokers)
        written = StatesAsWritten(self)
        await controller_brokers.elect_offline_partitions(self, send=False, on_written=written)
        send_leader_and_isr(self, self.ctx.partitions(), is_init=True, known=written.states)
        await controller_admin.init_missing_partitions(self)
        self.enqueue("reassign", lambda: reassignment.on_reassign_node(self))
        self.enqueue("reassign-cancel", lambda: reassignment.on_cancel_node(self))
        self.enqueue("delete-topics", lambda: controller_admin.on_delete_topics(self))
        self.enqueue("preferred-election", lambda: controller_admin.on_preferred_election(self))
        self.enqueue("log-dir-events", lambda: controller_log_dirs.on_log_dir_events(self))
        self.enqueue("isr-changes", lambda: controller_log_dirs.on_isr_changes(self))
        if self.config.heartbeat_timeout:
            self._tasks.append(self.runtime.spawn(
                controller_brokers.heartbeat_monitor(self, self.ctx.epoch), name="controller-heartbeats"))

    # ------------------------------------------------------------------ requests from brokers

    async def handle_heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        if not self.is_active:
            return BrokerHeartbeatResponse(Errors.NOT_CONTROLLER, controller_epoch=self.ctx.epoch)
        return controller_brokers.on_heartbeat(self, request)

    async def handle_controlled_shutdown(self, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        return await self._answer_as_event(
            "controlled-shutdown", lambda: controller_brokers.controlled_shutdown(self, request),
            ControlledShutdownResponse(Errors.NOT_CONTROLLER))

    async def handle_isr_change(self, request: IsrChangeRequest) -> IsrChangeResponse:
        """KIP-343: a leader's proposed ISRs, decided and written as one controller event."""
        return await self._answer_as_event(
            "isr-change", lambda: isr_changes.on_isr_change(self, request),
            IsrChangeResponse(Errors.NOT_CONTROLLER))

    async def _answer_as_event(self, name: str, handle: Callable[[], Awaitable[R]], not_controller: R) -> R:
        """Answer a broker's request with what one controller event decides. A controller that
        is not active, or is deposed before or during the event (ZooKeeper lost, mid-write:
        the outcome is unknown), answers ``not_controller``: the broker asks the next one,
        which answers from what ZooKeeper holds."""
        if not self.is_active:
            return not_controller
        done: asyncio.Future[R] = asyncio.get_running_loop().create_future()

        async def run() -> None:
            if not self.is_active:
                done.set_result(not_controller)
                return
            try:
                done.set_result(await handle())
            except BaseException as e:
                if not done.done():
                    done.set_result(not_controller)
                raise e
        self.enqueue(name, run)
        return await done

    # ------------------------------------------------------------------ responses

    def _on_response(self, broker: int, request: Any, response: Any) -> None:
        error = getattr(response, "error", None)
        if error == Errors.STALE_CONTROLLER_EPOCH and self.is_active:
            self.enqueue("controller-change", self._controller_changed)
            return
        if isinstance(response, LeaderAndIsrResponse):
            offline = [TopicPartition(e.topic, e.partition) for e in response.partition_errors
                       if e.error == Errors.KAFKA_STORAGE_ERROR]
            if offline:
                self.enqueue("offline-replicas",
                             lambda: controller_log_dirs.on_offline_replicas(self, broker, offline))
