"""The broker's standing in the cluster: its ZooKeeper session, incarnation and fencing.

Some of a broker's state changes over its life and is read by several of its parts:

* the **ZooKeeper session**: opened at start-up and replaced by a new one when the old one
  is lost (the replica manager writes ISR changes and log directory events with it, the
  heartbeat finds the controller through it);
* the **incarnation** (KIP-343): the czxid of its current ``/brokers/ids/<id>`` node,
  changed by every re-registration; requests from or for an older incarnation are refused,
  and controller requests that reach a process before it first registered wait until it
  knows its incarnation;
* **self-fenced** (KIP-343): which incarnation stopped acting as leader after hearing
  nothing from the controller for too long; a newer incarnation that the controller hears
  ends it;
* **stopping**: controlled shutdown has begun;
* **unclean recovery** (KIP-966): the logs were recovered from an unclean shutdown and may
  lack records the ISR counted on. Every registration says so until a controller has acted
  on it: a controller takes the broker out of every ISR before it sends it anything, so the
  first LeaderAndIsr meant for a registration that said so is the acknowledgement.

:class:`BrokerSession` holds them in one place. The broker owns it and changes the session,
the incarnation, stopping and the unclean recovery; the heartbeat, which decides
self-fencing, changes that. The others (replica manager, fetchers, the route to the
controller) are lent it to read.
"""

from __future__ import annotations

import asyncio

from floodmark.reference.runtime import Coordination


class BrokerSession:
    def __init__(self) -> None:
        self._zk: Coordination | None = None
        self._incarnation = 0
        self._registered = asyncio.Event()
        self._fenced_incarnation: int | None = None
        # KIP-343: fenced itself for want of controller heartbeats; no longer acts as leader.
        # Read-only for everyone but fence/unfence; a plain attribute, not a property, as
        # every request for a partition asks.
        self.fenced = False
        self._stopping = False
        self._unclean_recovery = False

    @property
    def zk(self) -> Coordination | None:
        """The current ZooKeeper session; None before start-up opened the first one."""
        return self._zk

    @property
    def incarnation(self) -> int:
        """The czxid of this broker's registration; 0 until it first registered."""
        return self._incarnation

    @property
    def fenced_incarnation(self) -> int | None:
        """The incarnation that fenced itself, while fenced."""
        return self._fenced_incarnation

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def unclean_recovery(self) -> bool:
        """KIP-966: recovered from an unclean shutdown, and no controller has acted on it yet."""
        return self._unclean_recovery

    def opened(self, zk_client: Coordination) -> None:
        """A new ZooKeeper session (at start-up, or replacing a lost one)."""
        self._zk = zk_client

    def registered(self, incarnation: int) -> None:
        self._incarnation = incarnation
        self._registered.set()

    async def wait_registered(self) -> None:
        """Until this process first registered, it cannot tell a request meant for it from
        one a deposed controller still retries for its previous incarnation."""
        await self._registered.wait()

    def fence(self) -> None:
        self._fenced_incarnation = self._incarnation
        self.fenced = True

    def unfence(self) -> None:
        self._fenced_incarnation = None
        self.fenced = False

    def begin_stopping(self) -> None:
        self._stopping = True

    def recovered_uncleanly(self) -> None:
        self._unclean_recovery = True

    def unclean_recovery_acknowledged(self) -> None:
        self._unclean_recovery = False
