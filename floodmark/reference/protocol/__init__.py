"""The protocol: every message nodes exchange, how it crosses the wire, what ZooKeeper holds.

``messages`` defines requests and responses as frozen dataclasses; ``wire`` turns them into
length-prefixed frames and back; ``zk_layout`` names and encodes every ZooKeeper node the
brokers, the controller and the admin tools share; ``variants`` names the switches that bring
back one historical flaw each. Nothing here does I/O.
"""

from floodmark.reference.protocol.variants import VARIANTS, Variant, get_variant

__all__ = ["VARIANTS", "Variant", "get_variant"]
