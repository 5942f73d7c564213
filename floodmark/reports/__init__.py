"""Reports: what an engineer reads when a chaos run fails, and the browser over all runs.

A run's ``report.html`` (``report.write_report``) is one self-contained file: the verdict
and the command that reproduces the run, every anomaly with the ops and node events around
it (``anomaly_groups``, ``anomaly_context``), latency and throughput against the faults
(``time_plots``, ``faults``), a lane chart per partition (``partition_lanes``), a per-process
op timeline that scales to millions of ops (``process_timeline``, ``op_table``) and a
Porcupine-style chart of linearizability failures (``lin_chart``). ``server`` and
``run_index`` are ``floodmark serve``, an index of every run in a store.

Everything a report shows comes from a run directory (``run_data``, ``history_columns``);
everything that came from the history is escaped when rendered (``templating``).
"""

from typing import Any

__all__ = ["write_report"]


def __getattr__(name: str) -> Any:
    # Imported lazily: the CLI loads this package for its commands, and matplotlib is slow.
    if name == "write_report":
        from floodmark.reports.report import write_report

        return write_report
    raise AttributeError(name)
