"""How a broker reaches the active controller: heartbeats, ISR changes, controlled shutdown.

A broker sends these requests to the controller (KIP-343): BrokerHeartbeat, every beat,
IsrChange, when a leader's ISR changes (at the ``kip-343`` inter-broker protocol), and
ControlledShutdown, when it stops. Every broker is a controller candidate, so the active
controller may be the one this broker hosts: then the request is handed to it directly.
Otherwise ``/controller`` names the active controller and the broker's metadata cache (or,
failing that, ``/brokers/ids/<id>``) gives its address, and the request goes over the
network. A controller that cannot be found or reached gives no answer (``None``): the caller
tries again on its next beat.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from floodmark.reference.broker.metadata_cache import MetadataCache
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.controller.controller import Controller
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    IsrChangeRequest,
    IsrChangeResponse,
)
from floodmark.reference.runtime import (
    ConnectionLossError,
    NoNodeError,
    Runtime,
    SessionExpiredError,
)

Answer = TypeVar("Answer")


class ControllerRoute:
    def __init__(self, runtime: Runtime, session: BrokerSession, metadata: MetadataCache, *,
                 request_timeout: float) -> None:
        self.runtime = runtime
        self.session = session
        self.metadata = metadata
        self.request_timeout = request_timeout
        self._hosted: Controller | None = None

    def host(self, controller: Controller) -> None:
        """The controller candidate this broker runs (a broker that runs none never calls this)."""
        self._hosted = controller

    def _hosted_if_active(self) -> Controller | None:
        hosted = self._hosted
        return hosted if hosted is not None and hosted.is_active else None

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse | None:
        return await self._ask(request, lambda hosted: hosted.handle_heartbeat(request), BrokerHeartbeatResponse)

    async def isr_change(self, request: IsrChangeRequest) -> IsrChangeResponse | None:
        return await self._ask(request, lambda hosted: hosted.handle_isr_change(request), IsrChangeResponse)

    async def controlled_shutdown(self, request: ControlledShutdownRequest) -> ControlledShutdownResponse | None:
        return await self._ask(request, lambda hosted: hosted.handle_controlled_shutdown(request),
                               ControlledShutdownResponse)

    async def _ask(self, request: object, handle: Callable[[Controller], Awaitable[Answer]],
                   answer: type[Answer]) -> Answer | None:
        """``handle`` it if this broker hosts the active controller, else send it there; None
        if no controller answered (or answered something else)."""
        hosted = self._hosted_if_active()
        if hosted is not None:
            return await handle(hosted)
        response = await self._send(request)
        return response if isinstance(response, answer) else None

    async def _send(self, request: object) -> object | None:
        address = await self.controller_address()
        if address is None:
            return None
        try:
            return await self.runtime.network.request(address, request, self.request_timeout)
        except (ConnectionError, TimeoutError):
            return None

    async def controller_address(self) -> str | None:
        """Where the active controller is: /controller names it, /brokers/ids has its address."""
        zk_client = self.session.zk
        if zk_client is None:
            return None
        try:
            data, _ = await zk_client.get(zk.CONTROLLER)
            controller_id = zk.decode_controller(data)
            known = self.metadata.address_of(controller_id)
            if known is not None:
                return known
            data, stat = await zk_client.get(zk.broker_path(controller_id))
            return zk.decode_broker(controller_id, data, stat.czxid).address
        except (NoNodeError, ConnectionLossError, SessionExpiredError, zk.LayoutError):
            return None
