"""The default variant under random faults that hit the controller too: nothing acked is lost.

``test_broker_random_faults`` spares the controller, which is why it never saw the loss the
simulator found (see ``test_unclean_shutdown``): a leader lost power while the controller
was cut off from ZooKeeper, and registered again before the next controller was elected.
Here, in each of a few episodes, a broker (the controller's host included) loses power (its
unsynced writes are gone) or is killed; the controller, or another node, may be cut off
from ZooKeeper just before or after; the broker comes back while the network is still
partitioned or once it healed, racing a controller failover. The same faults also found a
second way in: a deposed controller retrying a LeaderAndIsr meant for the broker's previous
incarnation, delivered to the restarted process before it had registered.

Power loss is the fault the guarantee is about: losing unsynced writes on fewer than
min.insync.replicas (2) replicas at once loses nothing acknowledged. So a broker loses power
only while every broker that came back from an unclean shutdown has been acknowledged by a
controller (it has left the ISRs it lost records of); otherwise it is killed. At the end
everything is healed and the durability and hw checks run (``random_fault_fixtures``).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from broker_fixtures import SimCluster
from random_fault_fixtures import AckedProducers, settle_and_check

from floodmark.reference.protocol import zk_layout as zk


def controller_name(cluster: SimCluster) -> str | None:
    if cluster.world.zk.exists(zk.CONTROLLER) is None:
        return None
    return cluster.name_of(zk.decode_controller(cluster.world.zk.get(zk.CONTROLLER)[0]))


def unclean_recovery_pending(cluster: SimCluster) -> bool:
    return any(cluster.brokers[name].session.unclean_recovery for name in cluster.names)


def episode(cluster: SimCluster, rng: random.Random) -> str:
    """One fault episode, from a healed cluster back to a healed one; returns what it did.

    A broker (any, the controller's host included) loses power or is killed; the controller
    may be cut off from ZooKeeper a moment before or after, or not at all; the broker comes
    back while the network is still partitioned, or only once it healed. The random delays
    decide whether the broker registers again before or after a controller failover.
    """
    world = cluster.world
    target = rng.choice(cluster.names)
    power_loss = rng.random() < 0.75 and not unclean_recovery_pending(cluster)
    isolate = rng.choice(["controller", "controller", "broker", None])
    isolated = controller_name(cluster) if isolate == "controller" else rng.choice(cluster.names)
    isolate_first = rng.random() < 0.3
    if isolate is not None and isolate_first and isolated is not None:
        world.partition({isolated}, {"zk"})
        world.run_for(rng.uniform(0.1, 3.0))
    (cluster.crash if power_loss else cluster.kill)(target)
    if isolate is not None and not isolate_first and isolated is not None:
        world.run_for(rng.uniform(0.1, 3.0))
        world.partition({isolated}, {"zk"})
    world.run_for(rng.uniform(0.5, 6.0))
    heal_first = rng.random() < 0.3 or not world.network.link_up(target, "zk")  # else it cannot register
    if heal_first:
        world.heal()
    cluster.restart(target)
    world.run_for(rng.uniform(0.0, 10.0))
    world.heal()
    story = f"{'power-loss' if power_loss else 'kill'}:{target}"
    if isolate is not None:
        story += f" isolate:{isolated}{' (before)' if isolate_first else ''}"
    return story + (" heal, restart" if heal_first else " restart, heal")


def run(seed: int, episodes: int = 4, variant: str = "default", **config: Any) -> list[str]:
    """One seeded schedule (``config``: more broker settings); returns the episodes, in order."""
    rng = random.Random(seed)
    cluster = SimCluster(seed=seed, nodes=4, variant=variant, replica_lag_time_max=4.0, **config)
    applied: list[str] = []
    try:
        cluster.create_topic("t", 2, 3, min_isr=2)
        producers = AckedProducers(cluster, rng, "t", 2)
        producers.start()
        for _ in range(episodes):
            cluster.world.run_for(rng.uniform(1.0, 4.0))
            applied.append(episode(cluster, rng))
        settle_and_check(cluster, producers, "t", 2, seed)
    finally:
        cluster.close()
    return applied


# Of seeds 1-40, eleven lost acknowledged records before KIP-966 and the start-up hold of
# controller requests (1, 24 and 29 among these), four with the no-kip-966 variant (24 and
# 29); the schedules shift whenever the protocol's timing does.
@pytest.mark.parametrize("seed", [1, 24, 29])
def test_no_acknowledged_write_is_lost_when_faults_hit_the_controller(seed: int) -> None:
    applied = run(seed)
    assert any(e.startswith("power-loss") for e in applied), applied


def test_the_same_faults_lose_acknowledged_records_before_kip_966() -> None:
    # A follower's HW in epoch 0 falls to 0: it truncated to a leader that lost its log.
    with pytest.raises(AssertionError, match="fell in leader epoch 0 from [0-9]+ to 0"):
        run(24, variant="no-kip-966")
