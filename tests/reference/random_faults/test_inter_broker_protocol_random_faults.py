"""The KIP-343 inter-broker protocol, and a cluster mixing it with legacy brokers, under the
random faults of ``test_broker_random_faults`` and ``test_controller_random_faults``:
nothing acknowledged is lost, and the HW checks hold, as with the default protocol."""

from __future__ import annotations

import pytest
import test_broker_random_faults as broker_faults
import test_controller_random_faults as controller_faults

MIXED = {"n1": {"inter_broker_protocol": "legacy"}, "n2": {"inter_broker_protocol": "kip-343"},
         "n3": {"inter_broker_protocol": "legacy"}, "n4": {"inter_broker_protocol": "kip-343"}}


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_kip343_brokers_lose_nothing_acknowledged_under_random_faults(seed: int) -> None:
    broker_faults.run(seed, inter_broker_protocol="kip-343")
    controller_faults.run(seed, inter_broker_protocol="kip-343")


@pytest.mark.parametrize("seed", [5, 6, 7, 8])
def test_a_mixed_cluster_loses_nothing_acknowledged_under_random_faults(seed: int) -> None:
    broker_faults.run(seed, node_config=MIXED)
    controller_faults.run(seed, node_config=MIXED)
