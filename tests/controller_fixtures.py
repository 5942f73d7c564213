"""Test doubles for controller unit tests: brokers that only talk to the controller.

A :class:`StubBroker` registers in the simulated ZooKeeper, runs a real
:class:`~floodmark.reference.controller.controller.Controller` as every broker does, heartbeats to the
active controller and records every request the controller sends it. It keeps no log; it
answers LeaderAndIsr like a broker (fencing stale controller epochs, reporting
KAFKA_STORAGE_ERROR for replicas it was told are on an offline log directory), which is all
the controller's logic can observe. Tests that need real replication use the real broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from floodmark.node_events import LeaderElected
from floodmark.reference.controller.controller import Controller, ControllerConfig
from floodmark.reference.protocol import messages as m
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.runtime import Coordination, NoNodeError
from floodmark.reference.sim import SimRuntime, SimWorld


@dataclass
class StubBroker:
    world: SimWorld
    node: str
    broker_id: int
    config: ControllerConfig = field(default_factory=ControllerConfig)
    heartbeat_interval: float = 1.0
    session_timeout: float = 6.0
    deaf: bool = False  # stop heartbeating (the broker cannot reach the controller)
    offline: set[m.TopicPartition] = field(default_factory=set)  # replicas on a failed log dir
    received: list[Any] = field(default_factory=list)
    controller_epoch_seen: int = 0
    heartbeat_states: list[str] = field(default_factory=list)
    leader_epochs: dict[m.TopicPartition, m.PartitionState] = field(default_factory=dict)
    rt: SimRuntime | None = None
    zk: Coordination | None = None
    controller: Controller | None = None
    incarnation: int = 0
    unclean_shutdown: bool = False  # what its registration says (KIP-966)

    async def start(self) -> None:
        self.rt = self.world.runtime(self.node)
        self.zk = await self.rt.coordination(self.session_timeout)
        await self.zk.ensure_path(zk.BROKER_IDS)
        await self.rt.network.serve(self.handle)
        await self.zk.create(zk.broker_path(self.broker_id),
                             zk.encode_broker(self.node, unclean_shutdown=self.unclean_shutdown), ephemeral=True)
        stat = await self.zk.exists(zk.broker_path(self.broker_id))
        assert stat is not None
        self.incarnation = stat.czxid
        self.controller = Controller(self.rt, self.broker_id, self.zk, self.config)
        await self.controller.start()
        self.rt.spawn(self._heartbeats(), name="heartbeats")

    async def handle(self, sender: str, request: Any) -> Any:
        assert self.controller is not None
        if isinstance(request, m.BrokerHeartbeatRequest):
            return await self.controller.handle_heartbeat(request)
        if isinstance(request, m.ControlledShutdownRequest):
            return await self.controller.handle_controlled_shutdown(request)
        self.received.append(request)
        epoch = getattr(request, "controller_epoch", 0)
        if epoch < self.controller_epoch_seen:
            return _stale(request)
        self.controller_epoch_seen = epoch
        if isinstance(request, m.LeaderAndIsrRequest):
            errors = []
            for p in request.partitions:
                tp = m.TopicPartition(p.topic, p.partition)
                if tp in self.offline:
                    errors.append(m.PartitionError(p.topic, p.partition, m.Errors.KAFKA_STORAGE_ERROR))
                    continue
                old = self.leader_epochs.get(tp)
                if old is None or p.leader_epoch > old.leader_epoch:
                    self.leader_epochs[tp] = p
                errors.append(m.PartitionError(p.topic, p.partition, None))
            return m.LeaderAndIsrResponse(None, tuple(errors))
        if isinstance(request, m.StopReplicaRequest):
            for tp in request.partitions:
                self.leader_epochs.pop(tp, None)
            return m.StopReplicaResponse(None)
        if isinstance(request, m.UpdateMetadataRequest):
            return m.UpdateMetadataResponse(None)
        return m.ErrorResponse(m.Errors.INVALID_REQUEST)

    async def _heartbeats(self) -> None:
        assert self.rt is not None and self.zk is not None
        while True:
            await self.rt.sleep(self.heartbeat_interval)
            if self.deaf:
                continue
            try:
                data, _ = await self.zk.get(zk.CONTROLLER)
                controller = zk.decode_controller(data)
                reg = await self.zk.get(zk.broker_path(controller))
                address = zk.decode_broker(controller, reg[0], reg[1].czxid).address
                response = await self.rt.network.request(
                    address, m.BrokerHeartbeatRequest(self.broker_id, self.incarnation), 2.0)
                self.heartbeat_states.append(response.state)
            except (NoNodeError, ConnectionError, TimeoutError):
                continue

    def requests(self, kind: type) -> list[Any]:
        return [r for r in self.received if isinstance(r, kind)]


def _stale(request: Any) -> Any:
    if isinstance(request, m.LeaderAndIsrRequest):
        return m.LeaderAndIsrResponse(m.Errors.STALE_CONTROLLER_EPOCH)
    if isinstance(request, m.StopReplicaRequest):
        return m.StopReplicaResponse(m.Errors.STALE_CONTROLLER_EPOCH)
    return m.UpdateMetadataResponse(m.Errors.STALE_CONTROLLER_EPOCH)


class StubCluster:
    """N stub brokers "n1".."nN" with ids 1..N, plus an "admin" node for ZooKeeper writes."""

    def __init__(self, world: SimWorld, n: int, config: ControllerConfig | None = None) -> None:
        self.world = world
        self.config = config or ControllerConfig(heartbeat_timeout=None)
        self.brokers: dict[int, StubBroker] = {}
        for i in range(1, n + 1):
            world.add_node(f"n{i}")
            self.brokers[i] = StubBroker(world, f"n{i}", i, self.config)
        self.admin_rt = world.add_node("admin")
        self.admin_zk: Coordination | None = None

    def start(self) -> None:
        async def go() -> None:
            self.admin_zk = await self.admin_rt.coordination(30.0)
            for b in self.brokers.values():
                await b.start()
        self.world.run(go())
        assert self.world.run_until(lambda: self.controller_id() != -1, 10.0)

    def controller_id(self) -> int:
        stat = self.world.zk.exists(zk.CONTROLLER)
        if stat is None:
            return -1
        return zk.decode_controller(self.world.zk.get(zk.CONTROLLER)[0])

    def active(self) -> StubBroker:
        return self.brokers[self.controller_id()]

    def epoch(self) -> int:
        return zk.decode_controller_epoch(self.world.zk.get(zk.CONTROLLER_EPOCH)[0])

    def state(self, topic: str, partition: int) -> zk.LeaderIsr:
        data, stat = self.world.zk.get(zk.partition_state_path(topic, partition))
        return zk.decode_leader_isr(topic, partition, data, stat.version)

    def has_state(self, topic: str, partition: int) -> bool:
        return self.world.zk.exists(zk.partition_state_path(topic, partition)) is not None

    def assignment(self, topic: str) -> zk.TopicAssignment:
        return zk.decode_topic(topic, self.world.zk.get(zk.topic_path(topic))[0])

    def create_topic(self, topic: str, partitions: dict[int, tuple[int, ...]], **config: str) -> None:
        assignment = zk.TopicAssignment(topic, partitions, dict(config))
        self.write(zk.topic_path(topic), zk.encode_topic(assignment))
        last = max(partitions)
        assert self.world.run_until(lambda: self.has_state(topic, last), 30.0, step=0.1)
        assert all(self.has_state(topic, p) for p in partitions)

    def write(self, path: str, data: bytes) -> None:
        async def go() -> None:
            assert self.admin_zk is not None
            if await self.admin_zk.exists(path) is None:
                await self.admin_zk.create(path, data, makepath=True)
            else:
                await self.admin_zk.set(path, data)
        self.world.run(go())

    def crash(self, broker_id: int) -> None:
        self.world.crash(self.brokers[broker_id].node)

    def restart(self, broker_id: int, *, unclean_shutdown: bool = False) -> StubBroker:
        old = self.brokers[broker_id]
        # A real broker waits until its previous session's ephemeral node has expired.
        assert self.world.run_until(lambda: self.world.zk.exists(zk.broker_path(broker_id)) is None, 30.0)
        self.world.restart(old.node)
        new = StubBroker(self.world, old.node, broker_id, self.config, offline=set(),
                         unclean_shutdown=unclean_shutdown)
        self.brokers[broker_id] = new
        self.world.run(new.start())
        return new

    def leader_events(self) -> list[LeaderElected]:
        return [e.body for b in self.brokers.values() for e in self.world.events(b.node)
                if isinstance(e.body, LeaderElected)]


class SimBrokerCluster:
    """Real brokers ("n1".."nN", ids 1..N, two log dirs each) and a "client" node on a sim world."""

    def __init__(self, world: SimWorld, n: int = 3, **config: Any) -> None:
        from floodmark.reference.broker.broker import Broker
        from floodmark.reference.broker.config import BrokerConfig

        self.world = world
        self.config = config
        self.brokers: dict[int, Broker] = {}
        self._make = lambda i: Broker(world.runtime(f"n{i}"), BrokerConfig(
            broker_id=i, log_dirs=("/data/a", "/data/b"), **config))
        for i in range(1, n + 1):
            world.add_node(f"n{i}")
            self.brokers[i] = self._make(i)
        self.client = world.add_node("client")
        self.bootstrap = [f"n{i}" for i in range(1, n + 1)]

    def start(self) -> None:
        async def go() -> None:
            for b in self.brokers.values():
                await b.start()
        self.world.run(go())
        assert self.world.run_until(lambda: self.world.zk.exists(zk.CONTROLLER) is not None, 10.0)

    def admin(self) -> Any:
        from floodmark.reference.client.admin import Admin
        return self.world.run(Admin.connect(self.client, bootstrap=self.bootstrap))

    def state(self, topic: str, partition: int) -> zk.LeaderIsr:
        data, stat = self.world.zk.get(zk.partition_state_path(topic, partition))
        return zk.decode_leader_isr(topic, partition, data, stat.version)

    def create_topic(self, topic: str, partitions: int, rf: int, min_isr: int = 2) -> None:
        admin = self.admin()
        self.world.run(admin.create_topic(topic, partitions, rf, {zk.MIN_INSYNC_REPLICAS: str(min_isr)}))
        self.world.run(admin.close())
        # Leaders elected and every replica in sync (the followers have fetched once).
        assert self.world.run_until(lambda: all(
            self.world.zk.exists(zk.partition_state_path(topic, p)) is not None
            and len(self.state(topic, p).isr) == rf for p in range(partitions)), 20.0)
        self.world.run_for(1.0)

    def crash(self, broker_id: int) -> None:
        self.world.crash(f"n{broker_id}")

    def restart(self, broker_id: int) -> None:
        assert self.world.run_until(lambda: self.world.zk.exists(zk.broker_path(broker_id)) is None, 30.0)
        self.world.restart(f"n{broker_id}")
        self.brokers[broker_id] = self._make(broker_id)
        self.world.run(self.brokers[broker_id].start())


def sim_broker_cluster_with_topic(world: SimWorld) -> SimBrokerCluster:
    """Three started real brokers with topic "t" (2 partitions, 3 replicas) created and in sync."""
    cluster = SimBrokerCluster(world, 3)
    cluster.start()
    cluster.create_topic("t", 2, 3)
    return cluster
