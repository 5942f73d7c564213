"""What makes a run directory fit to ingest, decided before any of its rows is read.

The store is a record of runs and of their verdicts, and Spark re-checks what it holds; so a
run goes in whole and as the run it was, or it is rejected with one line naming the file and
what is wrong (``floodmark analyze`` lists those lines and exits 254). The rules are the
ones ``floodmark check`` and the report apply to one run:

* every file of the run is a regular file: a FIFO, a device, a directory or a symbolic link
  that leads nowhere where ``history.jsonl``, ``events/<node>.jsonl``, ``test.yaml``,
  ``results.json`` or ``digest.json`` belongs is named at once, never waited on or read
  without end; and ``events``, when there, is a directory (a file or a symbolic link loop
  there was read as a run without node events);
* its path is text: the store keeps a run's path as a string (its id, and the ``floodmark
  repro`` command of a failing seed), and a name that is not UTF-8 would be stored as
  another name, colliding with any run whose name differs in the same bytes;
* the history and node events are the ones ``digest.json`` recorded as the run ended: files
  cut at a line's end, edited, lost or added since are another run, and node events cut short
  can make up violations (remove the digest to ingest the files as they are, on purpose).
  This is decided before anything else of the run is read, since nothing else of another run
  is worth reading, and digest.json itself before the files it names are hashed (which reads
  them whole: a damaged digest must not cost a pass over a history of gigabytes);
* ``results.json``, when there is one, is a verdict: a results file whose checkers are not
  judgements, or whose overall verdict is not the merge of theirs, or that has no checker at
  all, is no verdict, and the run's recorded verdict must never be taken from it
  (:func:`floodmark.contracts.results.verdict_problem`); and it is read whole by one task, so one larger
  than :data:`floodmark.contracts.results.MAX_RESULTS_BYTES` is refused unread, as the report and the results browser
  refuse it, rather than exhaust that task's memory and fail the whole analysis.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from floodmark.contracts.results import read_results, verdict_problem
from floodmark.contracts.run_config import ConfigError, TestConfig, read_run_config
from floodmark.inputs.sources import describe_os_error, file_problem
from floodmark.run_dirs.run_digests import compute_digest, unrecorded_problem
from floodmark.run_dirs.rundir import RunDir
from floodmark.run_dirs.unfinished_runs import unfinished_reason


class RunRejected(ValueError):
    """A run directory that cannot be ingested; the message says where and why."""


def checked_run(rd: RunDir) -> tuple[TestConfig | None, dict[str, Any] | None]:
    """The run's configuration and results (None for each it does not have), once every rule
    of the module docstring holds; RunRejected naming the file otherwise."""
    path_problem = _path_problem(rd.path)
    if path_problem is not None:
        raise RunRejected(path_problem)
    for path in run_files(rd):
        problem = _path_problem(path) or (f"{path}: {unreadable}" if (unreadable := file_problem(path)) else None)
        if problem is not None:
            raise RunRejected(problem)
    changed = digest_problem(rd)  # first: another run's configuration and verdict are not worth reading
    if changed is not None:
        raise RunRejected(changed)
    interrupted = unfinished_reason(rd)  # its history stops early: no verdict on it is a test's
    if interrupted is not None:
        raise RunRejected(f"{rd.path}: {interrupted}")
    return read_config(rd), read_results_if_any(rd)


def run_files(rd: RunDir) -> list[Path]:
    """The files of the run that ingestion reads (those that are there; the history always)."""
    files = [rd.history, *(p for p in (rd.config, rd.results, rd.digest) if os.path.lexists(p))]
    if os.path.lexists(rd.events) and not _is_directory(rd.events):  # read as no events at all, unsaid
        raise RunRejected(f"{rd.events}: {file_problem(rd.events) or 'is a file, not a directory'}")
    if rd.events.is_dir():
        try:
            files += sorted(rd.events.glob("*.jsonl"))
        except OSError as e:
            raise RunRejected(f"{rd.events}: cannot be listed: {describe_os_error(e)}") from None
    return files


def _is_directory(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # (a name too long; a loop is False)
        return False


def _path_problem(path: Path) -> str | None:
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return (f"{path}: its name is not UTF-8 text, and the store keeps a run's paths and node "
                "names as text (rename it)")
    return None


def read_config(rd: RunDir) -> TestConfig | None:
    """The run's configuration (None when it has no ``test.yaml``); a malformed one, or one
    ``check`` refuses (an unknown name, a layout no cluster holds), rejects the run."""
    try:
        return read_run_config(rd.config)
    except ConfigError as e:
        raise RunRejected(str(e)) from None


def read_results_if_any(rd: RunDir) -> dict[str, Any] | None:
    """The run's results (None without ``results.json``); a file that is no verdict rejects the run."""
    if not os.path.lexists(rd.results):
        return None
    try:
        results = read_results(rd.results)  # its messages name the file; it refuses one too large unread
    except (OSError, ValueError) as e:
        raise RunRejected(str(e) if str(rd.results) in str(e) else f"{rd.results}: {e}") from None
    problem = verdict_problem(results)
    if problem is not None:
        raise RunRejected(f"{rd.results}: {problem}")
    return results


def digest_problem(rd: RunDir) -> str | None:
    """Why the run's history and node events are not those its ``digest.json`` recorded, naming
    the files; None when they are, or when the run has no digest (nothing records them)."""
    if not os.path.lexists(rd.digest):
        return None
    remedy = f"remove {rd.digest.name} to ingest the files as they are now"
    unreadable = unrecorded_problem(rd, None, remedy)  # digest.json alone (cheap), before hashing what it names
    if unreadable is not None:
        return unreadable
    try:
        files = compute_digest(rd)
    except OSError as e:
        return f"{rd.path}: cannot be digested: {describe_os_error(e)}"
    return unrecorded_problem(rd, files, remedy)
