"""The Spark session: local by default, any cluster through ``--master`` or spark-submit.

When the code runs under ``spark-submit`` a session already exists and its master comes from
the submit command; otherwise a local session is built. Nothing else in the pipeline knows
where Spark runs.
"""

from __future__ import annotations

from pyspark.sql import SparkSession


def get_session(master: str | None = None, *, app_name: str = "floodmark", progress: bool = True,
                driver_memory: str = "2g") -> SparkSession:
    """The active session, or a new one. ``driver_memory`` only applies when this call starts
    the JVM (in local mode the executors share the driver's heap)."""
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
        builder = builder.master(master)
    elif not _submitted():
        builder = builder.master("local[*]")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _submitted() -> bool:
    """True under spark-submit, which sets the master through configuration."""
    from pyspark import SparkConf

    return SparkConf().contains("spark.master")
