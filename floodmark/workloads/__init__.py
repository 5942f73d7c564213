"""Workloads: what the clients do to the log while the nemesis breaks things.

``queue`` is Jepsen's Kafka workload (producers and consumers, then a final drain); ``log-lin``
appends and reads at offsets for the linearizability checker, then reads every partition whole. ``registry`` picks one by name,
``clients`` is how their processes reach the cluster through the reference client library.
"""
