"""The controller's channel to each broker: requests in order, retried until delivered.

The controller tells brokers what it decided with LeaderAndIsr, UpdateMetadata and
StopReplica requests. As in Kafka's ControllerChannelManager each live broker has its own
queue and sender, so one slow or unreachable broker never delays the others, and a broker
sees the controller's requests in the order they were decided. A request that cannot be
delivered is retried (brokers ignore duplicates by their epochs) until the broker leaves the
cluster or re-registers as a new incarnation, at which point its queue is dropped: the
controller sends a newly registered broker its full state anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from floodmark.reference.runtime import Runtime

ResponseHandler = Callable[[int, Any, Any], None]
"""Called on the controller's loop with (broker id, request, response)."""


class _BrokerQueue:
    def __init__(self, broker_id: int, address: str) -> None:
        self.broker_id = broker_id
        self.address = address
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self.closed = False


class ControllerChannel:
    def __init__(
        self, runtime: Runtime, on_response: ResponseHandler, *, request_timeout: float = 5.0,
        retry_backoff: float = 0.2,
    ) -> None:
        self.runtime = runtime
        self.on_response = on_response
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self._queues: dict[int, _BrokerQueue] = {}

    def add_broker(self, broker_id: int, address: str) -> None:
        self.remove_broker(broker_id)
        q = _BrokerQueue(broker_id, address)
        q.task = self.runtime.spawn(self._sender(q), name=f"controller-send-{broker_id}")
        self._queues[broker_id] = q

    def remove_broker(self, broker_id: int) -> None:
        q = self._queues.pop(broker_id, None)
        if q is not None:
            q.closed = True
            if q.task is not None:
                q.task.cancel()

    def has_broker(self, broker_id: int) -> bool:
        return broker_id in self._queues

    def send(self, broker_id: int, request: Any) -> None:
        q = self._queues.get(broker_id)
        if q is None:
            self.runtime.log.debug("no channel to broker %s; dropping %s", broker_id, type(request).__name__)
            return
        q.queue.put_nowait(request)

    def pending(self) -> int:
        return sum(q.queue.qsize() for q in self._queues.values())

    def close(self) -> None:
        for broker_id in sorted(self._queues):
            self.remove_broker(broker_id)

    async def _sender(self, q: _BrokerQueue) -> None:
        while not q.closed:
            request = await q.queue.get()
            while not q.closed:
                try:
                    response = await self.runtime.network.request(q.address, request, self.request_timeout)
                except (ConnectionError, TimeoutError, OSError) as e:
                    self.runtime.log.debug("controller request to %s failed (%s); retrying", q.broker_id, e)
                    await self.runtime.sleep(self.retry_backoff)
                    continue
                if not q.closed:
                    self.on_response(q.broker_id, request, response)
                break
