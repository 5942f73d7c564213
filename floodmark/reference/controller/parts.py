"""What the controller's event handlers work with: the controller's parts, behind one interface.

The controller's work is split by concept into function modules (``partitions``, ``brokers``,
``admin``, ``reassignment``, ``log_dirs``). Each handler needs the same few things: the
cached cluster state of the current reign (``ctx``), the ZooKeeper session (``zk``, for
reads and watches) and the epoch-fenced writer (``zkw``), the channel to the brokers, the
runtime, the configuration, and the event queue (``enqueue``, ``watcher``) to schedule
follow-up work. :class:`ControllerParts` names exactly that, read-only; the
:class:`~floodmark.reference.controller.controller.Controller` provides it and passes itself
to the handlers, which therefore never import the controller (the modules would otherwise
import each other in a cycle) and cannot reach its election or lifecycle.

The context and the ZooKeeper session are looked up at each use, not captured: a reign's end
replaces the context and a lost session is replaced by a new one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from floodmark.reference.controller.channel import ControllerChannel
from floodmark.reference.controller.config import ControllerConfig
from floodmark.reference.controller.context import ControllerContext
from floodmark.reference.controller.zk_writes import ControllerZk
from floodmark.reference.runtime import Coordination, Runtime, WatchEvent

Handler = Callable[[], Awaitable[None]]
"""One controller event: runs on the controller's event task, one at a time."""


class ControllerParts(Protocol):
    @property
    def runtime(self) -> Runtime: ...

    @property
    def config(self) -> ControllerConfig: ...

    @property
    def ctx(self) -> ControllerContext:
        """The cluster state as this reign knows it."""
        ...

    @property
    def zk(self) -> Coordination:
        """The current ZooKeeper session, for reads and watches (writes go through ``zkw``)."""
        ...

    @property
    def zkw(self) -> ControllerZk: ...

    @property
    def channel(self) -> ControllerChannel: ...

    @property
    def is_active(self) -> bool:
        """This broker holds the controller's office now."""
        ...

    def enqueue(self, name: str, handler: Handler) -> None:
        """Run ``handler`` after the events already queued."""
        ...

    def watcher(self, name: str, handler: Handler) -> Callable[[WatchEvent], None]:
        """A one-shot watch callback that queues ``handler`` while this broker is controller."""
        ...
