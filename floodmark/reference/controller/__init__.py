"""The controller: one broker, elected through ZooKeeper, that decides leaders and ISRs.

``controller`` holds the office (election, failover, the event queue) and its parts:
``config`` (its knobs, derived from the hosting broker's), ``context`` (the cached cluster
state), ``zk_writes`` (ZooKeeper writes fenced by the controller epoch), ``channel``
(requests to each broker, in order), ``election`` (leader selection rules). The event
handlers live in function modules by concept: ``partitions`` (decide, write, tell),
``brokers`` (liveness, heartbeats, controlled shutdown), ``admin`` (topic lifecycle,
preferred election), ``reassignment`` (KIP-236) and ``log_dirs`` (KIP-112, ISR change
notifications). They receive the controller's parts through the ``parts`` interface and
never import ``controller``, so the package's imports point one way.
"""
