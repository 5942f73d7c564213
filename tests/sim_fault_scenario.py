"""A small simulated cluster run under faults of every kind the world offers, as a digest.

Three brokers with the CPU model on, a producer and a consumer on the client node, and in
turn: overlapping link faults healed one by one, a kill and a power loss, a clock rate and
a reset, a directory replaced by a file and a permission fault healed separately, the
session expiry of a running broker, and message rules that drop, delay, duplicate and
reorder protocol and ZooKeeper messages. The digest covers every node event (seq, wall
time, kind, fields), what each fault reported, and the world's clock at the end, so two
runs with the same seed must print the same digest whatever ``PYTHONHASHSEED`` is.

    python tests/sim_fault_scenario.py SEED    (prints the digest)
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

from broker_fixtures import LOG_DIRS, SimCluster

from floodmark.reference.sim.cpu import CpuCosts
from floodmark.reference.sim.message_faults import ZK_RESPONSES, MessageRule


def run_scenario(seed: int) -> str:
    cluster = SimCluster(seed=seed, nodes=3, cpu=CpuCosts())
    world = cluster.world
    evidence: list[Any] = []  # what each fault reported
    outcomes: list[tuple[int, str, int | None]] = []
    try:
        cluster.create_topic("t", partitions=2, replication_factor=3, min_isr=2)
        producer = cluster.producer(request_timeout=2.0)
        sent = 0

        async def produce() -> None:
            nonlocal sent
            while True:
                result = await producer.send("t", sent % 2, f"v{sent}", timeout=3.0)
                outcomes.append((sent, result.status, result.offset))
                sent += 1
                await cluster.client.sleep(0.05)

        cluster.client.spawn(produce(), "producer")
        rules = [
            world.add_message_rule(MessageRule("drop", frozenset({"FetchResponse", "ProduceResponse"}), count=3)),
            world.add_message_rule(MessageRule("delay", frozenset({"LeaderAndIsrRequest"}), delay=0.3)),
            world.add_message_rule(MessageRule("duplicate", frozenset({"ReplicaFetchResponse"}), probability=0.2)),
            world.add_message_rule(MessageRule("reorder", frozenset({"OffsetForLeaderEpochResponse"}) | ZK_RESPONSES,
                                               probability=0.1)),
            world.add_message_rule(MessageRule("drop", frozenset({"ZkWatchEvent"}), probability=0.1)),
        ]
        world.run_for(2.0)
        split = world.partition({"n1"}, {"n2", "n3"})
        world.cut("n2", "zk")
        world.run_for(3.0)
        world.restore(split)
        world.uncut("n2", "zk")
        world.set_clock_rate("n1", 2.0)
        world.run_for(2.0)
        evidence.append(world.kill("n2"))
        world.run_for(2.0)
        cluster.restart("n2")
        world.reset_clock("n1")
        replaced = world.disk("n3").replace_with_file(LOG_DIRS[1])
        closed = world.disk("n1").chmod(LOG_DIRS[0], 0)
        world.run_for(3.0)
        world.disk("n3").heal_fault(replaced)
        evidence.append(world.expire_session("n3"))
        world.run_for(3.0)
        evidence.append(world.power_loss("n1"))
        world.disk("n1").heal_fault(closed)
        world.run_for(2.0)
        cluster.restart("n1")
        world.run_for(5.0)
        removed = world.remove_message_rules()
        assert removed == rules and all(rule.acted for rule in rules), rules
        evidence += [rule.evidence() for rule in removed]
        world.run_for(5.0)
        assert any(status == "ok" for _, status, _ in outcomes[-20:]), outcomes[-20:]
        digest = hashlib.sha256()
        for name in sorted(world.nodes):
            for event in world.events(name):
                digest.update(repr((name, event.seq, event.wall, event.kind, sorted(event.fields().items()))).encode())
            cpu = world.cpu(name)
            digest.update(repr((name, cpu.jobs, cpu.busy) if cpu is not None else name).encode())
        digest.update(repr((evidence, outcomes, world.now(), len(world.failures))).encode())
        events = sum(len(world.events(n)) for n in world.nodes)
        return f"{digest.hexdigest()} events={events} sends={len(outcomes)}"
    finally:
        cluster.close()


if __name__ == "__main__":
    print(run_scenario(int(sys.argv[1])))
