"""The Spark session: local by default, any cluster through ``--master`` or spark-submit.

When the code runs under ``spark-submit`` a session already exists and its master comes from
the submit command; otherwise a local session is built. Nothing else in the pipeline knows
where Spark runs.

Spark's console progress bar (``[Stage 3:>   (0 + 2) / 8]``, redrawn in place on stderr) is
off unless asked for: ``floodmark analyze`` and ``floodmark explore`` print their own progress
lines, and the bar, drawn between and over them without a newline of its own, left its
remains at the start of their lines and before their final summary.
"""

from __future__ import annotations

import re

from pyspark.sql import SparkSession

from floodmark.errors import UsageError, printable

# The master URLs Spark knows (its SparkContext refuses any other, after starting the JVM).
# A master URL Spark accepts: local with at least one thread (local[0] started a JVM that
# then failed in forty lines of log), standalone masters each with a host, or a cluster URL.
_HOST_PORT = r"[^\s:/,\[\]]+(:\d+)?"
_MASTER_URL = re.compile(r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]|yarn|"
                         rf"spark://{_HOST_PORT}(,{_HOST_PORT})*|(k8s|mesos)://\S+")


def get_session(master: str | None = None, *, app_name: str = "floodmark", progress: bool = False,
                driver_memory: str = "2g") -> SparkSession:
    """The active session, or a new one. ``progress`` (Spark's console progress bar, for a
    caller that prints no progress of its own) and ``driver_memory`` only apply when this call
    starts the JVM (in local mode the executors share the driver's heap)."""
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "true" if progress else "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.memory", driver_memory)
    )
    if master is not None:
        check_master(master)  # refused here, before a JVM starts and prints its stack
        builder = builder.master(master)
    elif not _submitted():
        builder = builder.master("local[*]")
    try:
        session = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001 - Py4J's and PySpark's own errors, whatever the cause
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UsageError(f"Spark could not start{f' with master {master!r}' if master else ''}: {first}") from None
    session.sparkContext.setLogLevel("ERROR")
    return session


def check_master(master: str | None) -> None:
    """UsageError unless ``master`` (None: the default) is a master URL Spark knows."""
    if master is not None and not _MASTER_URL.fullmatch(master):
        raise UsageError(f"--master {printable(master)}: not a Spark master URL (local, local[*], local[N], "
                         "spark://HOST:PORT, yarn, k8s://URL or mesos://URL)")


def _submitted() -> bool:
    """True under spark-submit, which sets the master through configuration."""
    from pyspark import SparkConf

    return SparkConf().contains("spark.master")
