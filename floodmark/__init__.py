"""floodmark: Jepsen-style chaos testing for Kafka-style replicated logs.

Packages: ``reference`` (the replicated log under test), ``harness`` (runs, clusters, CLI),
``nemesis`` (faults), ``workloads`` (what clients do), ``checkers`` (verdicts), ``reports``
(HTML), ``pipeline`` (Spark). The contracts between them live in ``history``,
``node_events``, ``results`` and ``rundir``.
"""

__version__ = "0.1.0"
