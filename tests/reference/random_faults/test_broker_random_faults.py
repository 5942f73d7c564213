"""The default variant under random faults on the simulated runtime: nothing acked is lost.

For each seed, producers write acks=all batches to a 3-replica topic on four brokers while a
seeded schedule crashes and restarts brokers (losing unsynced writes), partitions the
network, pauses nodes, skews their wall clocks and heals. The controller (n1) is spared here;
``test_controller_random_faults`` aims at it. At the end everything is healed and the test
checks what the durability and hw checkers check on real runs (``random_fault_fixtures``).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from broker_fixtures import SimCluster
from random_fault_fixtures import AckedProducers, settle_and_check


def run(seed: int, **config: Any) -> None:
    rng = random.Random(seed)
    cluster = SimCluster(seed=seed, nodes=4, replica_lag_time_max=4.0, **config)
    try:
        cluster.create_topic("t", 2, 3, min_isr=2)
        producers = AckedProducers(cluster, rng, "t", 2)
        producers.start()
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
        settle_and_check(cluster, producers, "t", 2, seed)
    finally:
        cluster.close()


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_no_acknowledged_write_is_lost_under_random_faults(seed: int) -> None:
    run(seed)
