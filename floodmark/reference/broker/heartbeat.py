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

A broker at the ``legacy`` inter-broker protocol (before KIP-343) runs none of this: it
neither heartbeats nor fences itself, and the controller holds it active while registered.

The heartbeat decides self-fencing and records it in the broker's session, where the
replica manager reads it; it fences the replicas itself and asks the broker (a callback) to
re-register. Where each beat goes is the route's business (``controller_route``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from floodmark.contracts.node_event_kinds import BrokerState
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.broker.controller_route import ControllerRoute
from floodmark.reference.broker.replica_manager import ReplicaManager
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.protocol.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from floodmark.reference.runtime import Runtime

Reregister = Callable[[str], Coroutine[Any, Any, None]]
"""Start a new incarnation (new ZooKeeper session, new registration); the argument says why."""


class BrokerHeartbeat:
    def __init__(self, runtime: Runtime, config: BrokerConfig, session: BrokerSession,
                 route: ControllerRoute, replicas: ReplicaManager, reregister: Reregister) -> None:
        self.runtime = runtime
        self.config = config
        self.session = session
        self.route = route
        self.replicas = replicas
        self.reregister = reregister
        self.controller_state = "Inactive"

    @property
    def fenced(self) -> bool:
        return self.session.fenced

    async def run(self) -> None:
        last_success = self.runtime.monotonic()
        while True:
            response = await self._beat_until(self._fence_deadline(last_success))
            now = self.runtime.monotonic()
            if response is not None and response.error is None:
                last_success = now
                self._on_success(response)
            elif (self.config.broker_fence_timeout is not None and not self.fenced
                  and now - last_success >= self.config.broker_fence_timeout):
                self._fence(now - last_success)
            await self.runtime.sleep(self.config.heartbeat_interval)

    def _fence_deadline(self, last_success: float) -> float | None:
        """When this broker fences itself unless a beat succeeds first (None: it does not)."""
        fence = self.config.broker_fence_timeout
        return None if fence is None or self.fenced else last_success + fence

    async def _beat_until(self, deadline: float | None) -> BrokerHeartbeatResponse | None:
        """One beat, given up at the fence deadline: a beat stuck on the way (a ZooKeeper
        read of where the controller is waits up to two thirds of the session timeout) must
        not hold off self-fencing (explore seed 5173: a broker cut from ZooKeeper for 6.5 s
        stayed stuck in one beat for 20 s, and served reads as a deposed leader long after
        the controller had fenced it and moved its partitions)."""
        if deadline is None:
            return await self._beat()
        try:
            return await asyncio.wait_for(self._beat(), max(0.0, deadline - self.runtime.monotonic()))
        except TimeoutError:
            return None

    async def _beat(self) -> BrokerHeartbeatResponse | None:
        session = self.session
        request = BrokerHeartbeatRequest(self.config.broker_id, session.incarnation,
                                         want_shutdown=session.stopping)
        return await self.route.heartbeat(request)

    def _on_success(self, response: BrokerHeartbeatResponse) -> None:
        session = self.session
        if session.fenced and session.incarnation != session.fenced_incarnation:
            session.unfence()
            self.controller_state = "Fenced"
        if session.fenced:
            return  # heard by the controller, but as the fenced incarnation: wait for the new one
        if response.state != self.controller_state:
            self.controller_state = response.state
            self.runtime.emit(BrokerState(state=response.state, incarnation=session.incarnation))

    def _fence(self, silence: float) -> None:
        session = self.session
        session.fence()
        self.controller_state = "Fenced"
        why = f"no successful controller heartbeat for {silence:.1f}s"
        self.runtime.emit(BrokerState(state="Fenced", incarnation=session.incarnation, why=why))
        self.runtime.log.warning("broker %s fences itself: %s", self.config.broker_id, why)
        self.replicas.fence_all(why)
        self.runtime.spawn(self.reregister("self-fenced"), name="reregister")
