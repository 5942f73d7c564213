"""Controller configuration: the knobs of the controller a broker hosts.

A broker derives it from its own configuration (:attr:`BrokerConfig.controller
<floodmark.reference.broker.config.BrokerConfig.controller>`): the same protocol variant, and
a heartbeat timeout one beat longer than the broker's self-fencing timeout, so that a broker
cut off from the controller stops leading on its own before the controller moves its
partitions (KIP-343). Tests and benchmarks that run controllers without brokers build one
directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from floodmark.reference.protocol.variants import VARIANTS, Variant


@dataclass(frozen=True)
class ControllerConfig:
    variant: Variant = field(default_factory=lambda: VARIANTS["default"])
    # KIP-343: a broker silent for this long is treated as failed although still registered.
    # None disables heartbeat fencing (brokers are then live while registered in ZooKeeper).
    heartbeat_timeout: float | None = 9.0
    # How long the controller waits for a broker's answer before sending the request again.
    request_timeout: float = 5.0
    # ZooKeeper writes packed into multi-ops of ``ops_per_multi`` (False: one per transaction,
    # the naive way ``bench/bench_failover.py`` compares against).
    batched_writes: bool = True
    ops_per_multi: int = 500
    # The brokers' default min.insync.replicas, for topics that do not set their own.
    min_insync_replicas: int = 2
