"""A watch that fires at once after it is set must still reach its callback.

ZooKeeper can deliver a watch event right behind the reply that set the watch; kazoo then
posts both to the event loop before the awaiting coroutine resumes. The adapter must already
count the watch as armed by then, or the event (a topic created just after the controller
listed the topics) is lost for good: watches are one-shot.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from kazoo.client import KazooClient
from runtime_fixtures import zookeeper_server_fixture  # noqa: F401
from zookeeper_server import ZooKeeperServer

from floodmark.reference.real.kazoo_coordination import KazooCoordination
from floodmark.reference.runtime import WatchEvent


def test_a_watch_firing_before_the_caller_resumes_is_delivered(zookeeper_server: ZooKeeperServer) -> None:
    root = f"/watch-race-{uuid.uuid4().hex[:8]}"
    other = KazooClient(hosts=zookeeper_server.address)
    other.start()
    try:
        other.ensure_path(root)

        async def scenario() -> list[WatchEvent]:
            zk = await KazooCoordination.connect(zookeeper_server.address, session_timeout=6.0)
            try:
                original = zk._client.get_children_async
                fired: list[WatchEvent] = []

                def get_children_then_change(*args, **kwargs):  # type: ignore[no-untyped-def]
                    result = original(*args, **kwargs)
                    result.get(timeout=5)  # ZooKeeper has answered and set the watch
                    # Another client adds a child while this loop is still busy, and the
                    # watch event reaches kazoo before the caller can resume.
                    other.create(f"{root}/child")
                    time.sleep(0.3)
                    return result

                zk._client.get_children_async = get_children_then_change
                assert await zk.get_children(root, watch=fired.append) == []
                for _ in range(100):
                    if fired:
                        break
                    await asyncio.sleep(0.02)
                return fired
            finally:
                await zk.close()

        fired = asyncio.run(scenario())
        assert [e.type for e in fired] == ["CHILD"]
    finally:
        other.delete(root, recursive=True)
        other.stop()
        other.close()
