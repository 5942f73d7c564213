"""A leader paused past its ZooKeeper session timeout is fenced when it resumes (real processes).

SIGSTOP freezes the leader. Its session expires, the controller elects another leader from
the ISR and bumps the leader epoch. Produce requests sent to the frozen leader wait in its
socket; when SIGCONT wakes it, it must not acknowledge any of them in its old epoch: its
followers follow the new leader, and its conditional ISR write fails on the ZooKeeper version.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from reference_processes import ProcessCluster, run_client, skip_reason

from floodmark.reference.client.consumer import Consumer
from floodmark.reference.client.producer import Producer
from floodmark.reference.protocol import messages as m

pytestmark = [pytest.mark.integration, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

SESSION_TIMEOUT = 6.0  # the broker's default zk_session_timeout


@pytest.mark.timeout(300)
def test_paused_leader_is_fenced_without_acknowledging_old_epoch_writes(tmp_path: Path) -> None:
    with ProcessCluster(tmp_path, 3) as cluster:
        cluster.admin_call(lambda a: a.create_topic("t", 1, 3, {"min.insync.replicas": "2"}))
        cluster.wait_for(lambda: (s := cluster.state("t", 0)) is not None and len(s.isr) == 3, 30.0, "t in sync")

        async def produce(runtime: Any, prefix: str, count: int) -> list[Any]:
            producer = Producer(runtime, cluster.bootstrap())
            return [await producer.send("t", 0, f"{prefix}-{i}", timeout=30.0) for i in range(count)]
        before = run_client(lambda rt: produce(rt, "before", 10))
        assert [r.status for r in before] == ["ok"] * 10
        old = cluster.state("t", 0)
        assert old is not None
        answers: list[Any] = []

        async def to_frozen_leader(runtime: Any) -> None:
            # A request to the frozen leader in its old epoch, answered only after it wakes.
            request = m.ProduceRequest("t", 0, ("zombie",), m.ACKS_ALL, 5.0, old.leader_epoch)
            try:
                answers.append(await runtime.network.request(cluster.addresses[old.leader], request,
                                                             SESSION_TIMEOUT * 6))
            except (ConnectionError, TimeoutError, OSError) as e:
                answers.append(e)

        cluster.pause(old.leader)
        sender = threading.Thread(target=run_client, args=(to_frozen_leader,))
        try:
            sender.start()
            time.sleep(SESSION_TIMEOUT * 2)  # well past the session timeout
            cluster.wait_for(lambda: (s := cluster.state("t", 0)) is not None and s.leader != old.leader,
                             30.0, "a new leader")
        finally:
            cluster.resume(old.leader)
            sender.join(timeout=SESSION_TIMEOUT * 7)
        assert answers, "the request to the resumed leader never completed"
        answer = answers[0]
        assert not (isinstance(answer, m.ProduceResponse) and answer.error is None), \
            f"the deposed leader acknowledged a write in epoch {old.leader_epoch}: {answer}"
        new = cluster.state("t", 0)
        assert new is not None and new.leader_epoch > old.leader_epoch
        time.sleep(2.0)
        after = run_client(lambda rt: produce(rt, "after", 10))
        assert all(r.status == "ok" for r in after), after

        async def read(runtime: Any) -> list[str]:
            consumer = Consumer(runtime, cluster.bootstrap())
            result = await consumer.fetch("t", 0, 0, timeout=20.0)
            assert result.ok, result
            return [r.value for r in result.records]
        values = run_client(read)
        assert values[:10] == [f"before-{i}" for i in range(10)]
        assert [v for v in values if v.startswith("after")] == [f"after-{i}" for i in range(10)]
        assert "zombie" not in values
