"""A simulated cluster for broker tests: brokers on the deterministic in-memory runtime.

``SimCluster`` starts brokers ``n1..nN`` (broker ids 1..N) in one :class:`SimWorld`, each
with two log directories, every broker a controller candidate (the real controller), plus a
``client`` node for producers, consumers and the admin client. Tests drive faults through
``cluster.world`` and look inside brokers through ``cluster.replica(node, topic, p)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from floodmark.node_events import NodeEventBody
from floodmark.reference.broker.broker import Broker
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.broker.partition import Partition
from floodmark.reference.client.admin import Admin
from floodmark.reference.client.consumer import Consumer
from floodmark.reference.client.producer import Producer, SendResult
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import ACKS_ALL, FetchRequest, FetchResponse, Record
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.reference.sim.cpu import CpuCosts
from floodmark.reference.sim.world import SimWorld

T = TypeVar("T")
E = TypeVar("E", bound=NodeEventBody)
LOG_DIRS = ("/data/a", "/data/b")


class SimCluster:
    def __init__(self, seed: int = 1, nodes: int = 3, variant: str = "default",
                 node_config: dict[str, dict[str, Any]] | None = None, cpu: CpuCosts | None = None,
                 **config: Any) -> None:
        self.world = SimWorld(seed=seed, cpu=cpu)
        self.configs: dict[str, BrokerConfig] = {}
        self.brokers: dict[str, Broker] = {}
        self.names = [f"n{i}" for i in range(1, nodes + 1)]
        base = dict(zk_session_timeout=6.0, replica_lag_time_max=10.0, heartbeat_interval=1.0,
                    broker_fence_timeout=9.0)
        base.update(config)
        for i, name in enumerate(self.names, start=1):
            self.world.add_node(name)
            own = {**base, **(node_config or {}).get(name, {})}
            self.configs[name] = BrokerConfig(broker_id=i, log_dirs=LOG_DIRS, variant=VARIANTS[variant],
                                              **own)
        self.client = self.world.add_node("client", cpu=False)  # the workload is not under test
        for name in self.names:
            self.start(name)
        self._admin: Admin | None = None

    # ------------------------------------------------------------------ running

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.world.run(coro)

    def start(self, name: str) -> Broker:
        broker = Broker(self.world.runtime(name), self.configs[name])
        self.brokers[name] = broker
        self.run(broker.start())
        return broker

    def crash(self, name: str) -> None:
        """Power loss: whatever the broker did not fsync is gone."""
        self.world.power_loss(name)

    def kill(self, name: str) -> None:
        """kill -9 of the process: the OS page cache survives, so written data does too."""
        self.world.kill(name)

    def wait_leader(self, topic: str, partition: int, not_epoch_below: int, timeout: float = 30.0) -> str:
        """Wait until a live broker leads ``topic-partition`` in an epoch >= ``not_epoch_below``."""
        def led() -> bool:
            state = self.state(topic, partition)
            if state is None or state.leader < 0 or state.leader_epoch < not_epoch_below:
                return False
            replica = self.replica(self.name_of(state.leader), topic, partition)
            return replica is not None and replica.is_leader and replica.leader_epoch == state.leader_epoch
        assert self.world.run_until(led, timeout), f"no leader in epoch >= {not_epoch_below}: {self.state(topic, partition)}"
        return self.leader_name(topic, partition)

    def restart(self, name: str, **changes: Any) -> Broker:
        self.world.restart(name)
        if changes:
            self.configs[name] = dataclasses.replace(self.configs[name], **changes)
        return self.start(name)

    def close(self) -> None:
        self.world.close()

    def broker_id(self, name: str) -> int:
        return self.configs[name].broker_id

    def name_of(self, broker_id: int) -> str:
        return self.names[broker_id - 1]

    # ------------------------------------------------------------------ topics and clients

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            self._admin = self.run(Admin.connect(self.client, bootstrap=self.names))
        return self._admin

    def create_topic(self, topic: str, partitions: int = 1, replication_factor: int = 3,
                     min_isr: int = 2, assignment: dict[int, tuple[int, ...]] | None = None) -> None:
        self.run(self.admin.create_topic(topic, partitions, replication_factor,
                                         {zk.MIN_INSYNC_REPLICAS: str(min_isr)}, assignment=assignment))
        for p in range(partitions):
            assert self.world.run_until(lambda p=p: self._fully_replicated(topic, p), 30.0), \
                f"{topic}-{p} never got a leader and a full ISR"

    def _fully_replicated(self, topic: str, partition: int) -> bool:
        state = self.state(topic, partition)
        if state is None or state.leader < 0:
            return False
        leader = self.replica(self.name_of(state.leader), topic, partition)
        return leader is not None and leader.is_leader and len(leader.isr) == len(self._assigned(topic, partition))

    def _assigned(self, topic: str, partition: int) -> tuple[int, ...]:
        data, _ = self.world.zk.get(zk.topic_path(topic))
        return zk.decode_topic(topic, data).partitions[partition]

    def producer(self, acks: int = ACKS_ALL, request_timeout: float = 5.0) -> Producer:
        return Producer(self.client, self.names, acks=acks, request_timeout=request_timeout)

    def consumer(self) -> Consumer:
        return Consumer(self.client, self.names)

    def send(self, topic: str, partition: int, values: list[str], acks: int = ACKS_ALL,
             timeout: float = 10.0) -> SendResult:
        return self.run(self.producer(acks).send_batch(topic, partition, values, timeout=timeout))

    # ------------------------------------------------------------------ looking inside

    def state(self, topic: str, partition: int) -> zk.LeaderIsr | None:
        try:
            data, stat = self.world.zk.get(zk.partition_state_path(topic, partition))
        except Exception:
            return None
        return zk.decode_leader_isr(topic, partition, data, stat.version)

    def replica(self, name: str, topic: str, partition: int) -> Partition | None:
        return self.brokers[name].replicas.get(topic, partition)

    def leader_name(self, topic: str, partition: int) -> str:
        state = self.state(topic, partition)
        assert state is not None and state.leader > 0, f"{topic}-{partition} has no leader: {state}"
        return self.name_of(state.leader)

    def records(self, name: str, topic: str, partition: int) -> list[Record]:
        p = self.replica(name, topic, partition)
        assert p is not None, f"{name} has no replica of {topic}-{partition}"
        return p.read(p.log.log_start, 1_000_000)

    def values(self, name: str, topic: str, partition: int) -> list[str]:
        return [r.value for r in self.records(name, topic, partition)]

    def consume_all(self, topic: str, partition: int, timeout: float = 20.0) -> list[str]:
        """Every committed value, read from the current leader like a consumer."""
        values: list[str] = []

        async def read() -> None:
            deadline = self.world.now() + timeout
            while self.world.now() < deadline:
                state = self.state(topic, partition)
                if state is None or state.leader < 0:
                    await self.client.sleep(0.1)
                    continue
                try:
                    response = await self.client.network.request(
                        self.name_of(state.leader),
                        FetchRequest(topic, partition, len(values), max_records=10_000), 2.0)
                except (ConnectionError, TimeoutError):
                    await self.client.sleep(0.1)
                    continue
                if isinstance(response, FetchResponse) and response.error is None:
                    values.extend(response.batch.values if response.batch is not None
                                  else [r.value for r in response.records])
                    if len(values) >= response.high_watermark:
                        return
                else:
                    await self.client.sleep(0.1)

        self.run(read())
        return values

    def events(self, name: str, kind: type[E]) -> list[E]:
        """The bodies of ``name``'s events of one kind, in its order."""
        return [e.body for e in self.world.events(name) if isinstance(e.body, kind)]


def running_cluster(**options: Any) -> Iterator[SimCluster]:
    """A fixture body: a SimCluster, closed afterwards, that must not have failed inside."""
    cluster = SimCluster(**options)
    yield cluster
    assert cluster.world.failures == [], cluster.world.failures
    cluster.close()


def request(cluster: SimCluster, node: str, message: object, timeout: float = 10.0) -> object:
    """Send a raw request to ``node`` from the cluster's client and wait for the answer."""
    return cluster.run(cluster.client.network.request(node, message, timeout))
