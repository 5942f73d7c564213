"""Log operations under guard: how a disk error becomes an offline replica (KIP-112).

Any operation on a replica's log may raise ``OSError`` (a failed disk, a directory made
unreadable). The replica manager runs such operations under its guard: an ``OSError`` takes
the replica's whole log directory offline (its replicas stop, the controller is told) and
the caller gets :class:`ReplicaOffline`, which it answers with KAFKA_STORAGE_ERROR or, in a
fetcher, by leaving the partition alone. Parts that only need the guard (the fetchers)
receive it as a :class:`StorageGuard`, not the replica manager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from floodmark.reference.broker.partition import Partition

T = TypeVar("T")


class ReplicaOffline(Exception):
    """The replica's log directory is offline (answer KAFKA_STORAGE_ERROR)."""


class StorageGuard(Protocol):
    def __call__(self, p: Partition, action: Callable[[], T]) -> T:
        """Run ``action`` on ``p``'s log; raise ReplicaOffline if the log's directory failed."""
        ...
