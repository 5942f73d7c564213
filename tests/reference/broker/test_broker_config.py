"""Broker configuration (floodmark.reference.broker.config): defaults and validation."""

from __future__ import annotations

import pytest

from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.protocol.variants import VARIANTS


def test_defaults_have_every_fix_on_and_fence_before_the_controller_gives_up() -> None:
    config = BrokerConfig(broker_id=1, log_dirs=("/a",))
    assert config.variant == VARIANTS["default"]
    assert config.min_insync_replicas == 2
    assert config.broker_fence_timeout is not None
    assert config.heartbeat_interval < config.broker_fence_timeout < config.replica_lag_time_max
    # The default protocol is the one this reference always spoke: heartbeats, ZooKeeper ISR writes.
    assert config.inter_broker_protocol == "heartbeats"
    assert config.protocol.heartbeats and not config.protocol.isr_changes_by_request
    assert config.protocol.registration_version is None


@pytest.mark.parametrize("changes, message", [
    ({"broker_id": -1}, "broker_id"),
    ({"log_dirs": ()}, "log_dirs"),
    ({"min_insync_replicas": 0}, "min_insync_replicas"),
    ({"replica_lag_time_max": 0.0}, "replica_lag_time_max"),
    ({"heartbeat_interval": -1.0}, "heartbeat_interval"),
    ({"inter_broker_protocol": "3.0"}, "inter-broker protocol version '3.0'"),
])
def test_invalid_values_are_refused_with_the_field_named(changes: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"broker_id": 1, "log_dirs": ("/a",), **changes}
    with pytest.raises(ValueError, match=message):
        BrokerConfig(**values)  # type: ignore[arg-type]
