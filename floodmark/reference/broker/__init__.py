"""The broker: one node of the cluster, holding partition replicas and serving clients and peers.

``broker`` owns the parts: the replica manager (``replica_manager``) holds the replicas
(``partition``: the ISR, HW and leader epoch rules) and applies the controller's orders;
followers pull from leaders (``replica_fetcher``, owned by the replica manager); log
operations run under a ``storage_guard`` (KIP-112); leaders serve fetches
(``fetch_serving``) and produce requests (``produce``) and keep their ISR (``isr``: which
followers are in, and the two ways to change it); heartbeats and self-fencing follow
KIP-343 (``heartbeat``), sent by the ``controller_route``; ``session`` is the broker's changing standing (ZooKeeper session,
incarnation, self-fenced), ``metadata_cache`` its copy of the cluster map and ``config``
its knobs.
"""

from floodmark.reference.broker.config import BrokerConfig

__all__ = ["BrokerConfig"]
