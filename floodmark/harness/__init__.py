"""The harness core: the types every other part of a run is built from.

``config`` (the test, validated), ``seeds`` (one seed, named streams), ``schedule`` (the
faults planned and executed), ``generator`` (workers, rate, Jepsen's process rules),
``recorder`` (the history, as it happens), ``cluster`` (the node-control and cluster
interfaces every backend offers), ``progress`` (the live line), ``code_version`` and
``run_identity`` (the id a run's node events carry).
Nothing here knows a backend, a nemesis or a workload.
"""
