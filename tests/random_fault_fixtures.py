"""What the random-fault tests share: acks=all producers, and the checks made at the end.

Producers write batches of unique values with acks=all to every partition of a topic,
straight to whichever broker ZooKeeper names leader, and record every acknowledged value at
its offset. Once the faults are over and everything is healed and restarted, the checks are
those the durability and hw checkers make on real runs:

* every acknowledged value is in the final log, read from the leader, at the offset it was
  acknowledged at;
* the replicas in the ISR agree on the committed prefix (up to the leader's HW);
* per broker, partition and leader epoch, the HW never decreased.

A healed cluster may keep a partition offline for one reason only: its last in-sync replica
recovered from an unclean shutdown and left the ISR (KIP-966), which no unclean election
follows. Such a partition's ISR is empty, and every acknowledged record must then still be
held, at its offset, by one of its replicas: offline, not lost.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from broker_fixtures import SimCluster

from floodmark.node_events import HwChanged, Started
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import ProduceRequest, ProduceResponse


@dataclass
class AckedProducers:
    """``count`` producers writing acks=all batches to ``topic`` until stopped."""

    cluster: SimCluster
    rng: random.Random
    topic: str
    partitions: int
    count: int = 3
    acked: dict[tuple[int, int], str] = field(default_factory=dict)  # (partition, offset) -> value
    stopped: bool = False
    tasks: list[Any] = field(default_factory=list)

    def start(self) -> None:
        self.tasks = [self.cluster.client.spawn(self._produce(w), name=f"producer-{w}") for w in range(self.count)]

    def stop(self) -> None:
        self.stopped = True
        self.cluster.world.run_until(lambda: all(t.done() for t in self.tasks), 20.0)

    async def _produce(self, worker: int) -> None:
        cluster, rng = self.cluster, self.rng
        sequence = 0
        while not self.stopped:
            partition = rng.randrange(self.partitions)
            values = tuple(f"{worker}-{sequence}-{i}" for i in range(rng.randint(1, 5)))
            sequence += 1
            state = cluster.state(self.topic, partition)
            if state is None or state.leader < 0:
                await cluster.client.sleep(0.2)
                continue
            try:
                response = await cluster.client.network.request(
                    cluster.name_of(state.leader), ProduceRequest(self.topic, partition, values, timeout=2.0), 4.0)
            except (ConnectionError, TimeoutError):
                await cluster.client.sleep(0.1)
                continue
            if isinstance(response, ProduceResponse) and response.error is None:
                for i, value in enumerate(values):
                    self.acked[(partition, response.base_offset + i)] = value
            await cluster.client.sleep(0.05)  # ~20 batches/s per producer


def settle_and_check(cluster: SimCluster, producers: AckedProducers, topic: str, partitions: int,
                     seed: int) -> None:
    """After the faults: run on, stop the producers, let replication settle, then check
    that nothing acknowledged was lost and that no node's task failed."""
    cluster.world.run_for(20.0)
    producers.stop()
    cluster.world.run_for(20.0)
    check_nothing_acknowledged_lost(cluster, topic, partitions, producers.acked, seed)
    assert cluster.world.failures == [], cluster.world.failures


def check_nothing_acknowledged_lost(cluster: SimCluster, topic: str, partitions: int,
                                    acked: dict[tuple[int, int], str], seed: int) -> list[int]:
    """The end-of-run checks (module docstring); returns the partitions left offline."""
    assert acked, "nothing was acknowledged at all"
    offline: list[int] = []
    for partition in range(partitions):
        mine = {offset: value for (p, offset), value in sorted(acked.items()) if p == partition}
        state = cluster.state(topic, partition)
        assert state is not None
        if state.leader == zk.NO_LEADER:
            assert state.isr == (), f"seed {seed}: {topic}-{partition} offline with live ISR members: {state}"
            for offset, value in mine.items():
                holders = [name for name in cluster.names if _holds(cluster, name, topic, partition, offset, value)]
                assert holders, f"seed {seed}: acked {value!r} at {partition}/{offset} is on no replica"
            offline.append(partition)
            continue
        final = cluster.consume_all(topic, partition)
        for offset, value in mine.items():
            assert offset < len(final) and final[offset] == value, (
                f"seed {seed}: acked {value!r} at {partition}/{offset}, final log has "
                f"{final[offset] if offset < len(final) else 'nothing'}")
        leader = cluster.replica(cluster.leader_name(topic, partition), topic, partition)
        assert leader is not None
        committed = leader.high_watermark
        for name in cluster.names:
            replica = cluster.replica(name, topic, partition)
            if replica is not None and cluster.broker_id(name) in leader.isr:
                assert cluster.values(name, topic, partition)[:committed] == final[:committed], (seed, name)
    check_high_watermarks_never_decrease(cluster, seed)
    return offline


def _holds(cluster: SimCluster, name: str, topic: str, partition: int, offset: int, value: str) -> bool:
    if cluster.replica(name, topic, partition) is None:
        return False
    values = cluster.values(name, topic, partition)
    return offset < len(values) and values[offset] == value


def check_high_watermarks_never_decrease(cluster: SimCluster, seed: int) -> None:
    for name in cluster.names:
        seen: dict[tuple[str, int, int], int] = {}
        for event in cluster.world.events(name):
            body = event.body
            if isinstance(body, Started):
                seen = {}  # a power loss may take unsynced records below the HW with it
            elif isinstance(body, HwChanged):
                key = (body.topic, body.partition, body.leader_epoch)
                assert body.high_watermark >= seen.get(key, -1), (
                    f"seed {seed}: the HW of {body.topic}-{body.partition} on {name} fell in leader "
                    f"epoch {body.leader_epoch} from {seen[key]} to {body.high_watermark}")
                seen[key] = body.high_watermark
