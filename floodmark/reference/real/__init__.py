"""The real runtime (see floodmark.reference.runtime) and the process shells that use it.

asyncio with TCP frames (``transport``), kazoo against a real ZooKeeper
(``kazoo_coordination``, ``kazoo_multi_read``) and files (``files``), brought together by
``runtime``. ``process`` runs one broker as an operating-system process (``floodmark
broker``); ``commands`` are the Kafka-shaped admin tools (``floodmark topics`` and friends).
"""
