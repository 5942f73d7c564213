"""Swarm testing: the test each explored seed draws.

A bug that needs a partition *and* a leader's power loss, or one type of message delayed, is
found by trying very many different tests, not by running one test many times. So each seed
of an exploration first draws its test's shape (:func:`swarm_config`): how many brokers, the
replication factor and min.insync.replicas, topics and partitions, which fault kinds are on
(a random subset: swarm testing, after Groce et al., since a kind that is off cannot mask the
others), how long faults and quiet periods last, the load, the ZooKeeper session timeout, the
inter-broker protocol, the producer's linger (so that sends from different workers share
produce requests), the consumers' max.poll.records (so that they fall behind) and whether a
power loss tears the files' unsynced tails (so that log recovery has records to cut); and, for a
share of the seeds that draw failover groups (a follower lagging as its leader fails, see
``nemesis.failover``), groups alone over a whole minute, as many as fit, since beside the
other kinds a test held one at most. Every shape stays inside the durability contract
(acks=all, min.insync.replicas of at least 2, no unclean election unless the variant turns
it on), so an invalid run is a real bug, not a permitted loss.

The workload is the exploration's choice, not the seed's: the queue workload (sends and
polls, judged for loss, order and duplicates) by default, or log-lin (appends and reads at
offsets, judged for linearizability), which judges what a consumer reads against real time.
A seed draws the same shape under either, so one that fails under one can be tried under the
other as it is. Each (variant, workload) pair is its own exploration in the store
(:func:`exploration_key`), so their runs and claims never mix.

Draws added over time come from streams of their own, so that every seed pinned in the
regression corpus (``tests/chaos/corpus.json``) stays the test it was when it was pinned.
"""

from __future__ import annotations

from floodmark.harness.config import ALL_KINDS, TestConfig, make_config
from floodmark.harness.seeds import Seeds

SWARM_WORKLOADS = ("queue", "log-lin")  # what an exploration may drive its seeds with

RESTARTING_KINDS = ("kill", "power", "disk")  # faults after which a broker starts again
# Kinds added after seeds were first pinned in the regression corpus, each with the share of
# seeds that draw it: drawn from their own stream (see swarm_config).
LATER_KINDS = {"admin": 0.5, "stall": 0.3}
FAILOVER_SHARE = 0.8  # of the seeds whose test fits failover groups (see swarm_config)
# Of the seeds that draw failover groups, the share whose test is groups alone, over the
# longest time limit (see swarm_config).
FOCUS_SHARE, FOCUS_TIME_LIMIT = 0.5, 60.0
# Kinds the swarm does not draw: an upgrade needs brokers that start below kip-343, which
# the swarm's own protocol draw does not promise (a test names it; see nemesis.upgrade).
UNSWARMED_KINDS = ("upgrade",)
SWARM_KINDS = tuple(kind for kind in ALL_KINDS
                    if kind not in LATER_KINDS and kind not in UNSWARMED_KINDS and kind != "failover")
PROTOCOLS, PROTOCOL_WEIGHTS = ("heartbeats", "kip-343", "legacy"), (0.5, 0.3, 0.2)
TRUNCATE_ON_FETCH_SHARE = 0.5  # of the seeds that draw kip-343
# The producer's linger (seconds, Kafka's linger.ms) a seed draws: none for half the seeds
# (a batch is the sends of one turn), else 5 ms (Kafka 4.0's default) or 20 ms. Our
# invocations are 5-20 ms apart (50-200 ops/s), so 5 ms joins sends to a shared partition
# only at the higher rates (11 of 30 seeds whose workers share partitions), 20 ms in all 30.
LINGER_SHARE, LINGERS = 0.5, (0.005, 0.02)
# The consumers' max.poll.records a seed draws: Kafka's 100 for most seeds, else a few, so
# that consumers fall behind the high watermark and each poll stops short of it (with 100
# they keep up, and a consumer's advance past a short read went untested: a position moved
# to the high watermark instead of past the last record read passed every seed).
POLL_MAX_SHARE, POLL_MAX_RECORDS = 0.3, (1, 2, 5)
# The share of seeds whose power losses keep a random prefix of each file's unsynced bytes
# (torn records, see sim.disk) instead of none.
POWER_LOSS_TEARS_SHARE = 0.5


def swarm_config(seed: int, variant: str = "default", base: TestConfig | None = None,
                 workload: str = "queue") -> TestConfig:
    """The test seed ``seed`` draws: a simulated test of its own shape, driven by ``workload``
    (one of :data:`SWARM_WORKLOADS`; the shape does not depend on it)."""
    if workload not in SWARM_WORKLOADS:
        raise ValueError(f"unknown workload {workload!r} for exploration; choose one of {', '.join(SWARM_WORKLOADS)}")
    rng = Seeds(seed).stream("swarm")
    nodes = rng.randint(3, 5)
    replication_factor = rng.choice((2, 3, 3))
    min_insync = 2 if replication_factor == 2 else rng.choice((2, 2, 3))
    kinds = [kind for kind in SWARM_KINDS if rng.random() < 0.5] or [rng.choice(SWARM_KINDS)]
    fault_low = round(rng.uniform(1.0, 4.0), 1)
    quiet_low = round(rng.uniform(0.5, 3.0), 1)
    values = {
        "cluster": "sim", "workload": workload, "seed": seed, "variant": variant,
        "nodes": nodes, "replication_factor": replication_factor, "min_insync_replicas": min_insync,
        "acks": "all", "topics": rng.randint(1, 2), "partitions": rng.randint(1, 4),
        "nemesis": kinds,
        "fault_duration": [fault_low, round(fault_low + rng.uniform(1.0, 10.0), 1)],
        "quiet_period": [quiet_low, round(quiet_low + rng.uniform(0.5, 6.0), 1)],
        "time_limit": float(rng.choice((20, 30, 40, 60))),
        "rate": float(rng.choice((50, 100, 200))),
        "concurrency": rng.choice((4, 6, 8)),
        "zk_session_timeout": float(rng.choice((4, 6, 8))),
    }
    # Pauses under long sessions, as production runs them (18 s is Kafka's default since 2.5,
    # KIP-537; 30 s is common): longer than the 10 s a follower may lag and the 9 s a broker
    # waits before fencing itself, so a pause that outlasts those but not the session lets a
    # leader that missed its successor's election act on its old view. Such a test leaves out
    # the kinds that restart brokers: a restarted broker waits out its old session before it
    # registers, which would leave partitions offline (unknown) for most of the run. Drawn
    # last, so every earlier draw of every seed stays what it was.
    long_sessions = "pause" in kinds and rng.random() < 0.6
    if long_sessions:
        values["zk_session_timeout"] = rng.choice((18.0, 30.0))
        kinds = [kind for kind in kinds if kind not in RESTARTING_KINDS]
    # Kinds added since seeds were first pinned in the regression corpus draw from their own
    # stream, so a seed that does not draw them is the test it always was.
    later = Seeds(seed).stream("swarm-later-kinds")
    later_kinds = [kind for kind, share in LATER_KINDS.items() if later.random() < share]
    # So is the inter-broker protocol: today's (heartbeats) for most seeds, the others often
    # enough that their own code paths are explored too.
    values["inter_broker_protocol"] = later.choices(PROTOCOLS, PROTOCOL_WEIGHTS)[0]
    # The newest protocol came later still: it takes over a share of the kip-343 seeds,
    # from its own stream, so that every other seed is the test it always was.
    if (values["inter_broker_protocol"] == "kip-343"
            and Seeds(seed).stream("swarm-truncate-on-fetch").random() < TRUNCATE_ON_FETCH_SHARE):
        values["inter_broker_protocol"] = "truncate-on-fetch"
    # Failover groups (a follower lagging as its leader fails, see nemesis.failover) came
    # later still: their own stream, drawn last, for the tests they fit (three replicas to
    # aim at, and restarts: not the long-session pause tests).
    groups = (replication_factor == 3 and not long_sessions
              and Seeds(seed).stream("swarm-groups").random() < FAILOVER_SHARE)
    values["nemesis"] = [*kinds, *later_kinds, *(["failover"] if groups else [])]
    # A group lines its steps up against each other, not against the test's other kinds,
    # which are drawn as often: beside them most tests held one group at most, and rarely
    # one of the long patterns (a follower lagging past the replica lag time, then a
    # failover), which only a test's first seconds had room for. So a share of these seeds
    # run groups alone, for the longest time. Their own stream, drawn last.
    if groups and Seeds(seed).stream("swarm-failover-focus").random() < FOCUS_SHARE:
        values["nemesis"], values["time_limit"] = ["failover"], FOCUS_TIME_LIMIT
    # The producer's linger came last: without it every batch held one record on the
    # simulator. Its own stream, so that every other draw of every seed is what it was.
    lingers = Seeds(seed).stream("swarm-linger")
    values["linger"] = lingers.choice(LINGERS) if lingers.random() < LINGER_SHARE else 0.0
    # The consumers' max.poll.records came after it: its own stream too.
    polls = Seeds(seed).stream("swarm-poll-max-records")
    if polls.random() < POLL_MAX_SHARE:
        values["poll_max_records"] = polls.choice(POLL_MAX_RECORDS)
    # Torn writes at a power loss came after it: until then a power loss dropped exactly the
    # unsynced bytes, always at a record's end, so no run ever tore a record and log recovery's
    # cut of a torn tail went unexercised: a recovery that cut the tail in memory but left it
    # in the file passed every seed. Its own stream.
    values["power_loss_tears"] = Seeds(seed).stream("swarm-power-loss-tears").random() < POWER_LOSS_TEARS_SHARE
    config = make_config(values, f"swarm seed {seed}", base)
    return config.replace(name=f"explore-{exploration_key(variant, workload)}")


def exploration_key(variant: str, workload: str = "queue") -> str:
    """What names an exploration of ``variant`` under ``workload`` in the store: the variant
    for the queue workload (as every exploration was named before there was a choice), else
    ``<variant>-<workload>``. Its runs go to ``explore-<key>``, and its claims carry it."""
    return variant if workload == "queue" else f"{variant}-{workload}"
