"""Broker heartbeats and self-fencing (KIP-343).

ZooKeeper tells the controller whether a broker's *session* is alive, not whether the broker
can hear the controller. A broker cut off from the controller but not from ZooKeeper would
keep leading partitions whose leadership the controller may already have moved. So the
broker heartbeats the controller every ``heartbeat_interval``; the controller answers with
the broker's state (Inactive: registered, not yet set up; Active; Stopping: controlled
shutdown). If no heartbeat succeeds for ``broker_fence_timeout`` the broker **fences
itself**: every replica stops acting as leader, produce requests get BROKER_FENCED, and it
re-registers in ZooKeeper as a new *incarnation* (a new ephemeral node, hence a new czxid),
which the controller treats like a restarted broker: it gets its partitions' state afresh.
The broker unfences when a heartbeat of that new incarnation succeeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from floodmark.reference.runtime import ConnectionLossError, NoNodeError, SessionExpiredError

if TYPE_CHECKING:
    from floodmark.reference.broker.broker import Broker


class BrokerHeartbeat:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.runtime = broker.runtime
        self.config = broker.config
        self.controller_state = "Inactive"
        self.fenced_incarnation: int | None = None  # the incarnation that was fenced

    @property
    def fenced(self) -> bool:
        return self.fenced_incarnation is not None

    async def run(self) -> None:
        last_success = self.runtime.monotonic()
        while True:
            response = await self._beat()
            now = self.runtime.monotonic()
            if response is not None and response.error is None:
                last_success = now
                self._on_success(response)
            elif (self.config.broker_fence_timeout is not None and not self.fenced
                  and now - last_success > self.config.broker_fence_timeout):
                self._fence(now - last_success)
            await self.runtime.sleep(self.config.heartbeat_interval)

    async def _beat(self) -> BrokerHeartbeatResponse | None:
        broker = self.broker
        request = BrokerHeartbeatRequest(self.config.broker_id, broker.incarnation,
                                         want_shutdown=broker.stopping)
        controller = broker.controller
        if controller is not None and controller.is_active:
            return await controller.handle_heartbeat(request)
        address = await self.controller_address()
        if address is None:
            return None
        try:
            response = await self.runtime.network.request(address, request, self.config.request_timeout)
        except (ConnectionError, TimeoutError):
            return None
        return response if isinstance(response, BrokerHeartbeatResponse) else None

    async def controller_address(self) -> str | None:
        """Where the active controller is: /controller names it, /brokers/ids has its address."""
        zk_client = self.broker.zk
        if zk_client is None:
            return None
        try:
            data, _ = await zk_client.get(zk.CONTROLLER)
            controller_id = zk.decode_controller(data)
            known = self.broker.metadata.address_of(controller_id)
            if known is not None:
                return known
            data, stat = await zk_client.get(zk.broker_path(controller_id))
            return zk.decode_broker(controller_id, data, stat.czxid).address
        except (NoNodeError, ConnectionLossError, SessionExpiredError, zk.LayoutError):
            return None

    def _on_success(self, response: BrokerHeartbeatResponse) -> None:
        broker = self.broker
        if self.fenced and broker.incarnation != self.fenced_incarnation:
            self.fenced_incarnation = None
            broker.replicas.self_fenced = False
            self.controller_state = "Fenced"
        if self.fenced:
            return  # heard by the controller, but as the fenced incarnation: wait for the new one
        if response.state != self.controller_state:
            self.controller_state = response.state
            self.runtime.emit("broker_state", state=response.state, incarnation=broker.incarnation)

    def _fence(self, silence: float) -> None:
        broker = self.broker
        self.fenced_incarnation = broker.incarnation
        self.controller_state = "Fenced"
        why = f"no successful controller heartbeat for {silence:.1f}s"
        self.runtime.emit("broker_state", state="Fenced", incarnation=broker.incarnation, why=why)
        self.runtime.log.warning("broker %s fences itself: %s", self.config.broker_id, why)
        broker.replicas.fence_all(why)
        self.runtime.spawn(broker.reregister("self-fenced"), name="reregister")
