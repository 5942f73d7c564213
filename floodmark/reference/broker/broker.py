"""The broker: one node of the cluster, holding replicas and serving clients and peers.

A broker's life, after the V3 design and KIP-343:

* **Start-up.** Open the log directories (a directory that fails goes offline at once), read
  the HW checkpoints and the clean shutdown markers (removing them), open a ZooKeeper
  session and start serving. Read the assignment and state of every local replica: replicas
  the assignment no longer gives this broker are deleted; the others are opened, which
  recovers their logs (a torn tail is cut here, before anything is served), and wait without
  a role for the controller's LeaderAndIsr, which the controller sends every newly
  registered broker (a controller request that arrives before the broker has registered
  waits until it has). Then register as the ephemeral
  ``/brokers/ids/<id>``. The node's czxid is this *incarnation*'s id: requests meant for an
  older incarnation are refused. If a log directory was not shut down cleanly, the
  registration says so (KIP-966): the controller takes the broker out of every ISR before
  it may lead again, and the first LeaderAndIsr it then sends is the acknowledgement, after
  which the registration is rewritten clean.
* **Serving.** Produce, Fetch, OffsetForLeaderEpoch and Metadata from clients and peers;
  LeaderAndIsr, StopReplica and UpdateMetadata from the controller; DescribeLogDirs from
  admins. BrokerHeartbeat, IsrChange and ControlledShutdown go to the controller this broker
  hosts (every broker is a controller candidate). What it sends the controller itself
  depends on its inter-broker protocol version (``BrokerConfig.inter_broker_protocol``):
  heartbeats unless legacy, ISR changes by request at kip-343.
* **Losing ZooKeeper.** When the session is lost its ephemeral node is gone and the
  controller has moved its leaderships; the broker stops acting as leader of anything,
  opens a new session and registers again as a new incarnation.
* **Shutdown.** Controlled shutdown first (the controller moves its leaderships away), then
  the fetchers stop, the HWs are checkpointed, the logs flushed and, last, the clean
  shutdown markers written. A crash or a kill leaves no marker.

The broker owns its parts and passes each what it uses. What changes over its life (the
ZooKeeper session, the incarnation, self-fencing, stopping, unclean recovery) lives in one
:class:`~floodmark.reference.broker.session.BrokerSession` that the broker owns and lends
to the replica manager (which owns the fetchers), the heartbeat and the route to the
controller; it hosts its controller candidate itself.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from floodmark.contracts.node_event_kinds import (
    BrokerState,
    LogDirOffline,
    Rejected,
    Started,
    Stopped,
)
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.broker.controller_route import ControllerRoute
from floodmark.reference.broker.fetch_serving import (
    handle_fetch,
    handle_offset_for_leader_epoch,
    handle_replica_fetch,
)
from floodmark.reference.broker.heartbeat import BrokerHeartbeat
from floodmark.reference.broker.isr.change_requests import IsrChangeRequests
from floodmark.reference.broker.log_info import handle_replica_log_info
from floodmark.reference.broker.metadata_cache import MetadataCache
from floodmark.reference.broker.produce import handle_produce
from floodmark.reference.broker.replica_fetcher import ReplicaFetchers
from floodmark.reference.broker.replica_manager import ReplicaManager
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.controller.controller import Controller
from floodmark.reference.log.log_dirs import LogDirs, partition_dir_name
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    BrokerHeartbeatRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ErrorResponse,
    Errors,
    FetchRequest,
    IsrChangeRequest,
    IsrChangeResponse,
    LeaderAndIsrRequest,
    LogDirInfo,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    ReplicaDirInfo,
    ReplicaFetchRequest,
    ReplicaLogInfoRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from floodmark.reference.runtime import (
    ConnectionLossError,
    Coordination,
    NodeExistsError,
    NoNodeError,
    Runtime,
    SessionExpiredError,
    SessionState,
)

T = TypeVar("T")

# How long a start may go on once the process is told to stop, so that the stop is clean; a
# start still running then (ZooKeeper unreachable, say) is abandoned and the process exits.
START_GRACE = 10.0


class Broker:
    def __init__(self, runtime: Runtime, config: BrokerConfig) -> None:
        self.runtime = runtime
        self.config = config
        self.session = BrokerSession()
        self.metadata = MetadataCache()
        self.log_dirs = LogDirs(runtime.storage, list(config.log_dirs),
                                segment_records=config.segment_records)
        self.replicas = ReplicaManager(runtime, config, self.log_dirs, self.metadata, self.session)
        self.route = ControllerRoute(runtime, self.session, self.metadata,
                                     request_timeout=config.request_timeout)
        self.heartbeat = BrokerHeartbeat(runtime, config, self.session, self.route, self.replicas,
                                         self.reregister)
        if config.protocol.isr_changes_by_request:
            self.replicas.isr.proposer = IsrChangeRequests(
                runtime, config.broker_id, self.session, self.route, lambda: self.replicas.closed)
        self.controller: Controller | None = None  # the controller candidate it hosts, once started
        self._tasks: list[Any] = []
        self._registering = False

    @property
    def zk(self) -> Coordination | None:
        """The current ZooKeeper session (replaced when the broker re-registers)."""
        return self.session.zk

    @property
    def incarnation(self) -> int:
        return self.session.incarnation

    @property
    def fetchers(self) -> ReplicaFetchers:
        return self.replicas.fetchers

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.runtime.emit(Started(broker=self.config.broker_id, run_id=self.config.run_id))
        for offline in self.log_dirs.offline_dirs:
            self.runtime.emit(LogDirOffline(dir=offline.directory, error=offline.error, partitions=()))
        failures = self.replicas.load_high_watermarks()
        deadline = self.runtime.monotonic() + self.config.startup_timeout
        zk_client = await self._retry_startup_step(
            lambda: self.runtime.coordination(self.config.zk_session_timeout), deadline)
        zk_client.add_session_listener(self._on_session_state)
        self.session.opened(zk_client)
        await self._retry_startup_step(self._ensure_paths, deadline)
        for failure in failures:
            self.replicas.handle_offline_error(failure)
        clean, failures = self.log_dirs.clear_clean_shutdown_markers()
        for failure in failures:
            self.replicas.handle_offline_error(failure)
        if not clean:
            self.session.recovered_uncleanly()
        if self.log_dirs.offline_dirs and not failures:
            self.runtime.spawn(self.replicas.notify_log_dir_failure(), name="log-dir-event")
        await self.runtime.network.serve(self.handle)
        await self._retry_startup_step(self._start_replicas, deadline)
        await self._retry_startup_step(self._register, deadline)
        self._tasks = [
            self.runtime.spawn(self.replicas.isr.run(), name="isr-maintenance"),
            self.runtime.spawn(self.replicas.checkpoint_loop(), name="hw-checkpoint"),
        ]
        if self.config.protocol.heartbeats:  # a legacy broker neither heartbeats nor fences itself
            self._tasks.append(self.runtime.spawn(self.heartbeat.run(), name="broker-heartbeat"))
        if self.config.log_flush_interval is not None:
            self._tasks.append(self.runtime.spawn(
                self.replicas.flush_loop(self.config.log_flush_interval), name="log-flush"))
        if self.config.controller_candidate:
            current = self.session.zk  # a lost session may have been replaced meanwhile
            assert current is not None
            self.controller = Controller(self.runtime, self.config.broker_id, current,
                                         self.config.controller)
            self.route.host(self.controller)
            await self.controller.start()

    async def stop(self) -> None:
        """Controlled shutdown, then a clean stop (HW checkpoint, flushed logs)."""
        self.session.begin_stopping()
        self.runtime.emit(BrokerState(state="Stopping", incarnation=self.incarnation))
        await self._controlled_shutdown()
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        self.fetchers.stop_all()
        await self.runtime.network.close()
        if self.controller is not None:
            await self.controller.stop()
        self.replicas.close()
        self.log_dirs.close()
        if not self.session.unclean_recovery:
            # KIP-966: only now is the shutdown clean. A broker whose unclean recovery no
            # controller acted on yet may still be counted in an ISR it lacks records of.
            self.log_dirs.write_clean_shutdown_markers()
        if self.zk is not None:
            await self.zk.close()
        self.runtime.emit(Stopped())

    async def _controlled_shutdown(self) -> None:
        deadline = self.runtime.monotonic() + 2 * self.config.request_timeout
        request = ControlledShutdownRequest(self.config.broker_id, self.incarnation)
        while self.runtime.monotonic() < deadline:
            response = await self.route.controlled_shutdown(request)
            if response is not None and response.error is None and not response.remaining_partitions:
                return
            await self.runtime.sleep(0.2)
        self.runtime.log.warning("controlled shutdown did not finish; stopping anyway")

    # ------------------------------------------------------------------ ZooKeeper registration

    async def _ensure_paths(self) -> None:
        zk_client = self.session.zk
        assert zk_client is not None
        for path in zk.PERSISTENT_PATHS:
            await zk_client.ensure_path(path)

    async def _retry_startup_step(self, step: Callable[[], Awaitable[T]], deadline: float) -> T:
        """Run an idempotent start-up step (connecting included) again while ZooKeeper's
        answers get lost, until ``deadline``; its result.

        A loaded or briefly unreachable ZooKeeper makes a request end in ConnectionLoss
        although the session lives on; giving up at once would turn a slow start into a
        dead broker. A session that expires meanwhile is no reason to give up either: the
        broker replaces a lost session itself (``reregister``, which also registers the new
        one), and a step run again uses the session current then.
        """
        while True:
            try:
                return await step()
            except (ConnectionLossError, SessionExpiredError) as e:
                if self.runtime.monotonic() >= deadline:
                    raise
                self.runtime.log.warning("start-up: %s; retrying", e)
                await self.runtime.sleep(0.5)

    async def _register(self) -> None:
        """Create /brokers/ids/<id>; its czxid becomes this incarnation's id."""
        zk_client = self.session.zk
        assert zk_client is not None
        path = zk.broker_path(self.config.broker_id)
        data = zk.encode_broker(self.runtime.advertised_address, unclean_shutdown=self.session.unclean_recovery,
                                info_version=self.config.protocol.registration_version)
        while True:
            try:
                await zk_client.create(path, data, ephemeral=True, makepath=True)
                break
            except NodeExistsError:
                stat = await zk_client.exists(path)
                if stat is not None and stat.ephemeral_owner == zk_client.session_id:
                    if stat.czxid == self.session.incarnation:
                        return  # registered already, by the re-registration of a lost session
                    break
                # The previous incarnation's node lives until its session expires.
                await self.runtime.sleep(0.5)
            except ConnectionLossError:
                await self.runtime.sleep(0.5)
        stat = await zk_client.exists(path)
        self.session.registered(stat.czxid if stat is not None else 0)
        self.runtime.emit(BrokerState(state="Inactive", incarnation=self.incarnation,
                                      unclean_shutdown=self.session.unclean_recovery))

    async def _unclean_recovery_acknowledged(self) -> None:
        """KIP-966: a controller took this broker out of every ISR (it does so before sending
        a registration that says "unclean" anything), so the registration stops saying it;
        a successor controller would otherwise take it out again after it caught up. Done
        before the broker acts on that first LeaderAndIsr, hence before it can rejoin an ISR."""
        self.session.unclean_recovery_acknowledged()  # a re-registration from now on says clean
        zk_client = self.session.zk
        assert zk_client is not None
        try:
            await zk_client.set(zk.broker_path(self.config.broker_id),
                                zk.encode_broker(self.runtime.advertised_address,
                                                 info_version=self.config.protocol.registration_version))
        except (NoNodeError, ConnectionLossError, SessionExpiredError) as e:
            # Gone with its session (the next registration says clean), or unknown: at worst
            # a successor controller takes this broker out of the ISRs once more.
            self.runtime.log.warning("could not mark the registration clean: %s", e)

    def _on_session_state(self, state: SessionState) -> None:
        if state == "LOST" and not self.session.stopping:
            self.runtime.spawn(self.reregister("zookeeper session lost"), name="reregister")

    async def reregister(self, why: str) -> None:
        """Become a new incarnation: new session, new ephemeral registration."""
        if self._registering or self.session.stopping:
            return
        self._registering = True
        try:
            for key in sorted(self.replicas.partitions):
                p = self.replicas.partitions[key]
                if p.role == "leader":
                    p.fence(why)
            while not self.session.stopping:
                old = self.session.zk
                try:
                    zk_client = await self.runtime.coordination(self.config.zk_session_timeout)
                    zk_client.add_session_listener(self._on_session_state)
                    self.session.opened(zk_client)
                    if old is not None:
                        # Closing a dead session may fail in any way; it is gone anyway.
                        with contextlib.suppress(Exception):
                            await old.close()
                    await self._register()
                except (ConnectionLossError, SessionExpiredError, ConnectionError, TimeoutError) as e:
                    self.runtime.log.warning("re-registration failed (%s); retrying", e)
                    await self.runtime.sleep(0.5)
                    continue
                if self.controller is not None:
                    await self.controller.replace_session(zk_client)
                return
        finally:
            self._registering = False

    async def _start_replicas(self) -> None:
        """V3 start-up: read the assignment and state of every local replica; drop those no
        longer assigned here; open (and so recover) the others, which then wait, without a
        role, for the controller's LeaderAndIsr."""
        zk_client = self.session.zk
        assert zk_client is not None
        assignments: dict[str, zk.TopicAssignment | None] = {}
        kept: list[tuple[str, int]] = []
        for topic, partition in self.log_dirs.replicas():
            if self.log_dirs.is_offline(topic, partition):
                continue
            if topic not in assignments:
                try:
                    data, _ = await zk_client.get(zk.topic_path(topic))
                    assignments[topic] = zk.decode_topic(topic, data)
                except NoNodeError:
                    assignments[topic] = None
                except (zk.LayoutError, ConnectionLossError):
                    continue  # unknown: keep the data, the controller will say
            assignment = assignments[topic]
            replicas = None if assignment is None else assignment.partitions.get(partition)
            if replicas is None or self.config.broker_id not in replicas:
                self.runtime.log.info("deleting replica %s-%s: no longer assigned here", topic, partition)
                self.replicas.stop_replica(topic, partition, delete=True)
            else:
                kept.append((topic, partition))
        if not kept:
            return
        states = await zk_client.get_many([zk.partition_state_path(t, p) for t, p in kept])
        for (topic, partition), state in zip(kept, states):
            if state is not None:  # a partition still being created gets its state from the controller
                self.replicas.start_replica(topic, partition)

    # ------------------------------------------------------------------ requests

    async def handle(self, sender: str, message: Any) -> Any:
        try:
            # The requests of every second are handled here, without _dispatch's own coroutine.
            if isinstance(message, ReplicaFetchRequest):
                return await handle_replica_fetch(self.runtime, self.replicas, message)
            if isinstance(message, FetchRequest):
                return await handle_fetch(self.runtime, self.replicas, message)
            if isinstance(message, ProduceRequest):
                return await handle_produce(self.runtime, self.replicas, message)
            return await self._dispatch(message)
        except (ConnectionLossError, SessionExpiredError) as e:
            return ErrorResponse(Errors.NOT_CONTROLLER, f"ZooKeeper unavailable: {e}")

    async def _dispatch(self, message: Any) -> Any:
        """Every request but the hot three, which :meth:`handle` takes itself."""
        replicas = self.replicas
        if isinstance(message, OffsetForLeaderEpochRequest):
            return handle_offset_for_leader_epoch(self.runtime, replicas, message)
        if isinstance(message, MetadataRequest):
            return self.metadata.describe(message)
        if isinstance(message, ReplicaLogInfoRequest):
            return handle_replica_log_info(replicas, message)
        if isinstance(message, (LeaderAndIsrRequest, StopReplicaRequest)) and not self.incarnation:
            # KIP-380's gap at start-up: a deposed controller, cut off from ZooKeeper, may
            # still be retrying a request for this broker's previous incarnation (a restarted
            # broker with an empty log once became leader that way). Judge it once this
            # process knows its own incarnation.
            await self.session.wait_registered()
        if isinstance(message, LeaderAndIsrRequest):
            if (self.session.unclean_recovery and message.broker_incarnation
                    and not replicas.stale_incarnation(message.broker_incarnation)):
                await self._unclean_recovery_acknowledged()
            return await replicas.handle_leader_and_isr(message)
        if isinstance(message, UpdateMetadataRequest):
            error = self.metadata.update(message)
            if error is not None:
                self.runtime.emit(Rejected(request="UpdateMetadata", why="stale controller epoch",
                                           controller_epoch=message.controller_epoch))
            return UpdateMetadataResponse(error)
        if isinstance(message, StopReplicaRequest):
            return replicas.handle_stop_replica(message)
        if isinstance(message, DescribeLogDirsRequest):
            return self.describe_log_dirs()
        if isinstance(message, BrokerHeartbeatRequest):
            if self.controller is None:
                return ErrorResponse(Errors.NOT_CONTROLLER)
            return await self.controller.handle_heartbeat(message)
        if isinstance(message, IsrChangeRequest):
            if self.controller is None:
                return IsrChangeResponse(Errors.NOT_CONTROLLER)
            return await self.controller.handle_isr_change(message)
        if isinstance(message, ControlledShutdownRequest):
            if self.controller is None:
                return ControlledShutdownResponse(Errors.NOT_CONTROLLER)
            return await self.controller.handle_controlled_shutdown(message)
        return ErrorResponse(Errors.INVALID_REQUEST, f"unexpected request {type(message).__name__}")

    def describe_log_dirs(self) -> DescribeLogDirsResponse:
        offline = {d.directory: d.error for d in self.log_dirs.offline_dirs}
        dirs = []
        for directory in self.log_dirs.dirs:
            if directory in offline:
                dirs.append(LogDirInfo(directory, Errors.KAFKA_STORAGE_ERROR))
                continue
            infos = []
            for topic, partition in self.log_dirs.partitions_in(directory):
                p = self.replicas.get(topic, partition)
                infos.append(ReplicaDirInfo(topic, partition, self._dir_size(directory, topic, partition),
                                            p.log_end if p is not None else -1))
            dirs.append(LogDirInfo(directory, None, tuple(infos)))
        return DescribeLogDirsResponse(self.config.broker_id, tuple(dirs))

    def _dir_size(self, directory: str, topic: str, partition: int) -> int:
        path = posixpath.join(directory, partition_dir_name(topic, partition))
        storage = self.runtime.storage
        try:
            return sum(storage.size(posixpath.join(path, name)) for name in storage.list_dir(path))
        except OSError as error:
            self.replicas.storage_failed(topic, partition, error)
            return -1
