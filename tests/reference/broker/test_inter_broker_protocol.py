"""Inter-broker protocol versions on the simulated runtime: legacy brokers, and a cluster that
mixes legacy and KIP-343 brokers (as during the upgrade's double roll) staying correct.

A legacy broker registers with BrokerInfo version 4, never heartbeats and never fences
itself; the controller holds it Active and never fences it for silence. A KIP-343 broker
registers with version 5 and proposes its ISR changes to the controller; a legacy leader
writes them to ZooKeeper itself. In one cluster, with faults moving leaders and the
controller between the two kinds, every acknowledged record stays.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from broker_fixtures import SimCluster

from floodmark.contracts.node_events import BrokerState, IsrChanged
from floodmark.reference.broker.isr import maintenance as isr_maintenance
from floodmark.reference.broker.isr import updates as isr_updates
from floodmark.reference.client.producer import SendResult
from floodmark.reference.protocol import zk_layout as zk

LEGACY = {"inter_broker_protocol": "legacy"}
KIP_343 = {"inter_broker_protocol": "kip-343"}


@pytest.fixture
def direct_writers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The broker ids that wrote an ISR to ZooKeeper themselves, in order."""
    writers: list[int] = []
    original = isr_updates.write_isr

    async def recorded(runtime: Any, zk_client: Any, partition: Any, new_isr: Any, change: str) -> bool:
        writers.append(partition.broker_id)
        return await original(runtime, zk_client, partition, new_isr, change)
    monkeypatch.setattr(isr_maintenance, "write_isr", recorded)
    yield writers


def registration(cluster: SimCluster, broker_id: int) -> zk.BrokerRegistration:
    data, stat = cluster.world.zk.get(zk.broker_path(broker_id))
    return zk.decode_broker(broker_id, data, stat.czxid)


def fenced(cluster: SimCluster, node: str, broker: int | None = None) -> list[BrokerState]:
    return [e for e in cluster.events(node, BrokerState)
            if e.state == "Fenced" and (broker is None or e.broker == broker)]


def test_a_legacy_broker_cut_off_from_the_controller_is_neither_fenced_nor_fences_itself() -> None:
    cluster = SimCluster(seed=7, nodes=3, node_config={"n3": LEGACY})
    try:
        assert registration(cluster, 3).info_version == 4
        assert registration(cluster, 2).info_version is None  # the default protocol: no field
        assert cluster.world.run_until(lambda: any(
            e.broker == 3 and e.state == "Active" for e in cluster.events("n1", BrokerState)), 10.0)
        cluster.world.partition({"n3"}, {"n1"})
        cluster.world.run_for(30.0)  # three times the heartbeat timeout
        assert fenced(cluster, "n1", 3) == [] and fenced(cluster, "n3") == []
        assert cluster.brokers["n1"].controller.ctx.is_serving(3)  # type: ignore[union-attr]
        # A broker at the default protocol cut off the same way is fenced on both sides.
        cluster.world.heal()
        cluster.world.partition({"n2"}, {"n1"})
        cluster.world.run_for(30.0)
        assert fenced(cluster, "n1", 2) and fenced(cluster, "n2")
        assert cluster.world.failures == []
    finally:
        cluster.close()


def send(cluster: SimCluster, partition: int, value: str) -> SendResult:
    return cluster.run(cluster.producer().send_batch("t", partition, [value], timeout=8.0))


def full_isrs(cluster: SimCluster) -> bool:
    return all(len(cluster.state("t", p).isr) == 3 for p in range(4))  # type: ignore[union-attr]


def test_a_mixed_cluster_moves_leaders_and_isrs_and_keeps_every_acknowledged_record(
        direct_writers: list[int]) -> None:
    cluster = SimCluster(seed=3, nodes=4, replica_lag_time_max=3.0,
                         node_config={"n1": LEGACY, "n2": LEGACY, "n3": KIP_343, "n4": KIP_343})
    try:
        assert [registration(cluster, b).info_version for b in (1, 2, 3, 4)] == [4, 4, 5, 5]
        # Leaders of both kinds: 0 and 2 are led by legacy brokers, 1 and 3 by KIP-343 ones.
        cluster.create_topic("t", 4, 3, min_isr=2,
                             assignment={0: (1, 3, 4), 1: (3, 1, 2), 2: (2, 4, 3), 3: (4, 2, 1)})
        acked: dict[int, list[str]] = {p: [] for p in range(4)}

        def produce_round(name: str) -> None:
            for p in range(4):
                if send(cluster, p, f"{name}{p}").status == "ok":
                    acked[p].append(f"{name}{p}")

        produce_round("a")
        # n2 (legacy) loses its peers: every ISR it is in shrinks, through ZooKeeper where a
        # legacy broker leads and through the controller where a KIP-343 broker does.
        cluster.world.partition({"n2"}, {"n1", "n3", "n4"})
        assert cluster.world.run_until(lambda: all(
            2 not in cluster.state("t", p).isr for p in (1, 3)), 30.0)  # type: ignore[union-attr]
        produce_round("b")
        cluster.world.heal()
        assert cluster.world.run_until(lambda: full_isrs(cluster), 60.0)
        # The controller (legacy n1) dies: a successor takes over, leaders move.
        cluster.kill("n1")
        assert cluster.wait_leader("t", 0, 1) != "n1"
        produce_round("c")
        cluster.restart("n1")
        assert cluster.world.run_until(lambda: full_isrs(cluster), 60.0)
        produce_round("d")
        for p in range(4):
            assert cluster.consume_all("t", p) == acked[p], p
        assert all(len(acked[p]) >= 3 for p in (0, 1, 3))  # the faults acknowledged most rounds
        # Who wrote ISRs where: only legacy brokers wrote ZooKeeper; KIP-343 leaders changed
        # theirs through the controller, and nobody was fenced for not heartbeating.
        assert direct_writers and set(direct_writers) <= {1, 2}
        assert {e.change for e in cluster.events("n3", IsrChanged)} >= {"shrink", "expand"}
        assert {e.change for e in cluster.events("n4", IsrChanged)} >= {"shrink", "expand"}
        assert not any(fenced(cluster, name, b) for name in cluster.names for b in (1, 2))
        assert cluster.world.failures == []
    finally:
        cluster.close()
