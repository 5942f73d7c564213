"""Broker start-up against a ZooKeeper that answers late.

A request whose answer is lost ends in ConnectionLoss while the session lives on. Start-up
steps are idempotent, so the broker retries them (until its start-up timeout) instead of
exiting: a slow ZooKeeper must not turn into a dead broker.
"""

from __future__ import annotations

import pytest

from floodmark.reference.broker.broker import Broker
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.runtime import ConnectionLossError
from floodmark.reference.sim import SimWorld


def _start_while_cut_from_zookeeper(cut_for: float, startup_timeout: float) -> tuple[SimWorld, Broker]:
    world = SimWorld(seed=3)
    runtime = world.add_node("n1")
    config = BrokerConfig(broker_id=1, log_dirs=("/data/a",), zk_session_timeout=6.0,
                          startup_timeout=startup_timeout, broker_fence_timeout=None)
    broker = Broker(runtime, config)

    async def start() -> None:
        runtime.spawn(cut_once_connected(), name="cut")
        await broker.start()

    async def cut_once_connected() -> None:
        while broker.zk is None:  # the session is open before the first start-up request
            await runtime.sleep(0.001)
        world.cut("zk", "n1")  # requests arrive, answers do not
        await runtime.sleep(cut_for)
        world.heal()

    try:
        world.run(start())
    except BaseException:
        world.close()
        raise
    return world, broker


def test_start_up_retries_requests_whose_answers_were_lost() -> None:
    world, broker = _start_while_cut_from_zookeeper(cut_for=5.0, startup_timeout=60.0)
    assert broker.incarnation > 0
    assert world.zk.get(zk.broker_path(1)) is not None
    assert world.failures == []
    world.close()


def test_start_up_gives_up_after_its_timeout() -> None:
    with pytest.raises(ConnectionLossError, match="no reply from ZooKeeper"):
        _start_while_cut_from_zookeeper(cut_for=5.0, startup_timeout=1.0)
