"""Broker configuration: the knobs of one broker, with Kafka's names where Kafka has them.

A broker is configured once at start-up. The timing knobs are what the replication rules
are made of: ``replica_lag_time_max`` decides when a silent follower leaves the ISR,
``zk_session_timeout`` when ZooKeeper (and so the controller) declares the broker dead, and
``broker_fence_timeout`` when the broker, having heard nothing from the controller, stops
acting as a leader on its own (KIP-343 self-fencing). The protocol ``variant`` selects which
historical fixes are on (see :mod:`floodmark.reference.protocol.variants`); the
``inter_broker_protocol`` version which generation of the protocol it speaks (heartbeats,
ISR changes through the controller; see
:mod:`floodmark.reference.protocol.inter_broker_protocol`), set per broker so that one
cluster can mix versions during an upgrade.

Every broker is also a controller candidate; the configuration of the controller it hosts is
derived from the broker's (``controller``), so the two can never disagree on the variant or
on how long a silent broker has before it is fenced.

``run_id`` is no knob: it names the chaos run the broker was started for, and the broker
only says it in its ``started`` events (see :mod:`floodmark.contracts.run_ids`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from floodmark.reference.controller.config import ControllerConfig
from floodmark.reference.protocol import inter_broker_protocol as ibp
from floodmark.reference.protocol.variants import VARIANTS, Variant


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int
    log_dirs: tuple[str, ...]
    variant: Variant = field(default_factory=lambda: VARIANTS["default"])
    # ZooKeeper session; its expiry is how the controller learns that this broker died.
    zk_session_timeout: float = 6.0
    # Start-up keeps retrying ZooKeeper requests whose answer was lost (a slow or briefly
    # unreachable ZooKeeper) for this long before the broker gives up.
    startup_timeout: float = 60.0
    # A follower that has not caught up with the leader's log end for this long (by the
    # leader's *wall* clock, as in Kafka) leaves the ISR.
    replica_lag_time_max: float = 10.0
    # ... or one that is this many records behind (Kafka's old replica.lag.max.messages).
    replica_lag_max_records: int = 1_000_000
    # How often the leader looks for followers to drop from the ISR.
    isr_check_interval: float = 1.0
    # KIP-343: heartbeats to the controller, and the silence after which the broker fences
    # itself. ``None`` disables self-fencing (a broker driven by hand in tests, no controller).
    heartbeat_interval: float = 1.0
    broker_fence_timeout: float | None = 9.0
    # Every broker is a controller candidate unless a test drives LeaderAndIsr by hand.
    controller_candidate: bool = True
    # Default min.insync.replicas; topics may override it (topic config in ZooKeeper).
    min_insync_replicas: int = 2
    # Follower fetching: records per fetch and how long the leader may hold an empty fetch.
    replica_fetch_max_records: int = 5000
    replica_fetch_wait_max: float = 0.5
    # After an error, a partition waits ``replica_fetch_backoff``; a leader that gives no
    # answer at all (dead, unreachable, refusing the session) is retried after waits doubling
    # up to ``replica_fetch_backoff_max`` (Kafka's replica.fetch.backoff.ms), so a dead leader
    # of thousands of partitions is not re-asked for all of them ten times a second.
    replica_fetch_backoff: float = 0.1
    replica_fetch_backoff_max: float = 1.0
    request_timeout: float = 5.0
    # HW checkpoint cadence, and fsync cadence of the logs: None (the default) never fsyncs
    # on a timer, as Kafka by default relies on replication (ISR-based commit), not fsync;
    # logs are still flushed on clean shutdown and when a segment is rolled.
    high_watermark_checkpoint_interval: float = 5.0  # Kafka's default
    log_flush_interval: float | None = None
    segment_records: int = 100_000
    # Largest records a single fetch may return to a consumer.
    fetch_max_records: int = 5000
    # Kafka's inter.broker.protocol.version: legacy, heartbeats (the default) or kip-343.
    inter_broker_protocol: str = ibp.DEFAULT
    # The run the harness started this broker for, named in its ``started`` events so that
    # its events are told from another run's; None for a broker started by hand.
    run_id: str | None = None

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ValueError(f"broker_id must be >= 0, got {self.broker_id}")
        if not self.log_dirs:
            raise ValueError("log_dirs must name at least one directory")
        if self.min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas must be >= 1, got {self.min_insync_replicas}")
        ibp.features(self.inter_broker_protocol)  # raises for an unknown version
        for name in ("zk_session_timeout", "replica_lag_time_max", "heartbeat_interval",
                     "isr_check_interval", "request_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def protocol(self) -> ibp.ProtocolFeatures:
        """What this broker's inter-broker protocol version has it do."""
        return ibp.features(self.inter_broker_protocol)

    @property
    def controller(self) -> ControllerConfig:
        """The configuration of the controller this broker hosts: the same variant; the
        controller gives up on a silent broker a heartbeat after that broker fenced itself."""
        fence = self.broker_fence_timeout
        return ControllerConfig(
            variant=self.variant,
            heartbeat_timeout=None if fence is None else fence + self.heartbeat_interval,
            min_insync_replicas=self.min_insync_replicas,
        )
