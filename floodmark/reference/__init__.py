"""The reference: a compact replicated log in the design of ZooKeeper-era Kafka, under test.

Its rooms, from the bottom up:

- ``runtime``: the boundary. Protocol code touches clocks, tasks, the network, ZooKeeper,
  disks and randomness only through a :class:`~floodmark.reference.runtime.Runtime`;
- ``protocol``: what nodes say to each other (messages, the wire codec, the ZooKeeper
  layout) and the variants that bring back historical flaws;
- ``log``: a partition's segmented log, its leader epoch cache, checkpoints, log directories;
- ``broker``: replicas, fetchers, produce and fetch serving, ISR changes, heartbeats;
- ``controller``: election, the cached cluster state, ZooKeeper writes, partition and broker
  state machines, admin work, reassignment, log directory failures;
- ``client``: producer, consumer, admin client and their metadata;
- ``real`` and ``sim``: the two runtimes (asyncio + TCP + kazoo + files; one deterministic
  process on virtual time), and the process shells that run a broker for real.
"""
