"""The real runtime (see floodmark.reference.runtime): asyncio, TCP frames (real.transport),
kazoo against a real ZooKeeper (real.kazoo_coordination), files (real.files), brought
together by real.runtime."""
