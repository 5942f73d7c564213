"""The default variant under random faults on the simulated runtime: nothing acked is lost.

For each seed, producers write acks=all batches to a 3-replica topic on four brokers while a
seeded schedule crashes and restarts brokers (losing unsynced writes), partitions the
network, pauses nodes, skews their wall clocks and heals. At the end everything is healed and the test checks what
the durability and hw checkers check on real runs:

* every acknowledged value is in the final log at the offset it was acknowledged at;
* the replicas agree on the committed prefix (up to the leader's HW);
* per broker, partition and leader epoch, the HW never decreased.
"""

from __future__ import annotations

import random

import pytest
from broker_fixtures import SimCluster

from floodmark.node_events import HwChanged, Started
from floodmark.reference.protocol.messages import ProduceRequest, ProduceResponse


def run(seed: int) -> None:
    rng = random.Random(seed)
    cluster = SimCluster(seed=seed, nodes=4, replica_lag_time_max=4.0)
    try:
        cluster.create_topic("t", 2, 3, min_isr=2)
        acked: dict[tuple[int, int], str] = {}  # (partition, offset) -> value
        stop = False

        async def producer(worker: int) -> None:
            sequence = 0
            while not stop:
                partition = rng.randrange(2)
                values = tuple(f"{worker}-{sequence}-{i}" for i in range(rng.randint(1, 5)))
                sequence += 1
                state = cluster.state("t", partition)
                if state is None or state.leader < 0:
                    await cluster.client.sleep(0.2)
                    continue
                try:
                    response = await cluster.client.network.request(
                        cluster.name_of(state.leader), ProduceRequest("t", partition, values, timeout=2.0), 4.0)
                except (ConnectionError, TimeoutError):
                    await cluster.client.sleep(0.1)
                    continue
                if isinstance(response, ProduceResponse) and response.error is None:
                    for i, value in enumerate(values):
                        acked[(partition, response.base_offset + i)] = value
                await cluster.client.sleep(0.05)  # ~20 batches/s per producer

        tasks = [cluster.client.spawn(producer(w), name=f"producer-{w}") for w in range(3)]
        down: set[str] = set()
        for _ in range(6):
            cluster.world.run_for(rng.uniform(2.0, 6.0))
            fault = rng.choice(["crash", "kill", "partition", "pause", "clock", "heal"])
            replicas = [n for n in cluster.names[1:]]  # n1 is the controller; spare it
            target = rng.choice(replicas)
            if fault in ("crash", "kill") and target not in down and len(down) < 1:
                (cluster.crash if fault == "crash" else cluster.kill)(target)
                down.add(target)
            elif fault == "partition":
                cluster.world.partition({target}, set(cluster.names) - {target, "n1"})
            elif fault == "clock":
                cluster.world.set_clock_offset(target, rng.uniform(-30.0, 30.0))
            elif fault == "pause":
                cluster.world.pause(target)
                cluster.world.run_for(rng.uniform(1.0, 8.0))
                cluster.world.resume(target)
            else:
                cluster.world.heal()
                for name in sorted(down):
                    cluster.restart(name)
                down.clear()
        cluster.world.heal()
        for name in sorted(down):
            cluster.restart(name)
        cluster.world.run_for(20.0)
        stop = True
        cluster.world.run_until(lambda: all(t.done() for t in tasks), 20.0)
        cluster.world.run_for(20.0)

        assert acked, "nothing was acknowledged at all"
        for partition in (0, 1):
            final = cluster.consume_all("t", partition)
            for (p, offset), value in sorted(acked.items()):
                if p == partition:
                    assert offset < len(final) and final[offset] == value, (
                        f"seed {seed}: acked {value!r} at {partition}/{offset}, final log has "
                        f"{final[offset] if offset < len(final) else 'nothing'}")
            leader = cluster.replica(cluster.leader_name("t", partition), "t", partition)
            assert leader is not None
            committed = leader.high_watermark
            for name in cluster.names:
                replica = cluster.replica(name, "t", partition)
                if replica is not None and cluster.broker_id(name) in leader.isr:
                    assert cluster.values(name, "t", partition)[:committed] == final[:committed], (seed, name)
        for name in cluster.names:
            seen: dict[tuple[str, int, int], int] = {}
            for event in cluster.world.events(name):
                body = event.body
                if isinstance(body, Started):
                    seen = {}  # a power loss may take unsynced records below the HW with it
                elif isinstance(body, HwChanged):
                    key = (body.topic, body.partition, body.leader_epoch)
                    assert body.high_watermark >= seen.get(key, -1), (seed, name, event)
                    seen[key] = body.high_watermark
        assert cluster.world.failures == [], cluster.world.failures
    finally:
        cluster.close()


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_no_acknowledged_write_is_lost_under_random_faults(seed: int) -> None:
    run(seed)
