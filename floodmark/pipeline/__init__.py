"""The history pipeline: questions across thousands of runs, answered on Spark.

A regression suite that gates protocol changes leaves thousands of run directories behind.
The pipeline turns them into a Parquet store with explicit schemas (``runs``, ``ops``,
``node_events``, ``anomalies``), re-runs the checkers at scale with grouped pandas UDFs
(distributed by run and partition), and aggregates: anomaly rates by nemesis, variant,
workload and code version; detection rates; latency and unavailability during and outside
faults; the failing seeds with the commands that reproduce them.

Modules: ``records`` (one run directory -> rows, no Spark), ``chunks`` (a large JSONL file
cut into byte ranges parsed by many tasks), ``chunk_summaries`` (what the chunks report,
reduced to check's verdict on the file), ``schemas``, ``session``, ``ingest`` (small runs
one task each), ``ingest_large`` (a large run in chunks), ``scale_check``, ``aggregate``,
``summary`` and ``commands`` (``floodmark analyze``).
"""
