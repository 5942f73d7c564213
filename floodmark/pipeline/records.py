"""Rows from one run directory: the pure-Python half of ingestion.

Reading a run is kept free of Spark so that it can be unit-tested alone and so that Spark
executors can call it on whichever run directories they are given. A run is read whole and
validated before any of its rows are emitted (:mod:`floodmark.pipeline.run_checks` says what a
run must be): a malformed run yields one rejection naming the file, line and problem, and
nothing else, so a half-read run never lands in the store.

The columns lifted out of op values, node events and anomalies (partition, offset, epoch,
seed) are what the files say only where the store's column can hold it: a partition number
beyond 32 bits or an offset beyond 64 is left null in its column (the value's JSON keeps it
whole), never wrapped round to another partition's number.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floodmark.checkers.run_partitions import PartitionBounds
from floodmark.contracts.history import (
    NEMESIS,
    HistoryError,
    Op,
    TornTail,
    iter_history,
    iter_judged_history,
)
from floodmark.contracts.node_events import (
    ControllerElected,
    ControllerResigned,
    NodeEvent,
    NodeEventError,
    Rejected,
    leader_epoch_of,
    partition_of,
    read_events_dir,
)
from floodmark.contracts.run_config import TestConfig, config_from_dict
from floodmark.contracts.run_ids import StatedRun
from floodmark.pipeline.run_checks import RunRejected, checked_run, read_config, read_results_if_any
from floodmark.run_dirs.rundir import PARTIAL, RunDir

__all__ = ["RunRejected", "RunRows", "read_config", "read_results_if_any", "read_run", "iter_run_rows"]

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

Row = dict[str, Any]


@dataclass(frozen=True)
class RunRows:
    """Everything one run contributes to the store."""

    run: Row
    ops: list[Row]
    node_events: list[Row]
    anomalies: list[Row]


def run_id_of(run_dir: Path, store: Path) -> str:
    """A stable identity: the run directory's path relative to the store (``test/ts-sSEED``)."""
    try:
        return run_dir.resolve().relative_to(store.resolve()).as_posix()
    except ValueError:
        return f"{run_dir.parent.name}/{run_dir.name}"


def read_run(run_dir: str | os.PathLike[str], store: str | os.PathLike[str]) -> RunRows:
    """Read and validate one run directory into lists of rows; raises RunRejected."""
    tables: dict[str, list[Row]] = {"runs": [], "ops": [], "node_events": [], "anomalies": []}
    for table, row in iter_run_rows(run_dir, store):
        tables[table].append(row)
    return RunRows(tables["runs"][0], tables["ops"], tables["node_events"], tables["anomalies"])


def iter_run_rows(run_dir: str | os.PathLike[str], store: str | os.PathLike[str]) -> Iterator[tuple[str, Row]]:
    """Validate a whole run, then stream its rows as (table, row) pairs.

    Validation reads the history once without keeping it, so a history larger than memory
    can be ingested; RunRejected is raised before any row is produced.
    """
    rd = RunDir(Path(run_dir))
    config, results = checked_run(rd)
    run_id = run_id_of(rd.path, Path(store))
    witnesses = witness_indices(results)
    bounds = PartitionBounds(config)
    torn: list[TornTail] = []
    op_count, first_time, last_time, witness_times = _validate_history(rd, witnesses, bounds, torn.append)
    cut_short: set[str] = set()  # as floodmark check reads them: the re-check is told the same
    try:
        events = read_events_dir(rd.events, topics=None if config is None else config.topic_names,
                                 partitions=bounds.bounds(), cut_short=cut_short,
                                 run=None if config is None else StatedRun(config.run_id, str(rd.config)))
    except NodeEventError as e:
        raise RunRejected(str(e)) from None
    except OSError as e:
        raise RunRejected(f"{rd.events}: {e.strerror or e}") from None
    yield "runs", run_row(run_id, rd, config, results, op_count, first_time, last_time, cut_short,
                          torn[0].where if torn else None)
    for op in iter_history(rd.history):
        yield "ops", _op_row(run_id, op)
    for node in sorted(events):
        for event in events[node]:
            yield "node_events", _event_row(run_id, event)
    for row in anomaly_rows(run_id, results, witness_times) if results else []:
        yield "anomalies", row


def witness_indices(results: dict[str, Any] | None) -> set[int]:
    """The indices of the ops that witness the anomalies of ``results`` (checked: a verdict)."""
    return {i for _, a in _anomalies(results) for i in _ints(a.get("ops"), INT64)}


def _anomalies(results: dict[str, Any] | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(checker, anomaly) for every anomaly of ``results``, checker by checker in name order."""
    for checker, result in sorted(((results or {}).get("checkers") or {}).items()):
        for anomaly in result.get("anomalies") or []:
            yield checker, anomaly


def in_range(value: Any, bounds: tuple[int, int]) -> int | None:
    """``value`` if it is an integer (not a boolean) the column's ``bounds`` hold, else None."""
    return value if type(value) is int and bounds[0] <= value <= bounds[1] else None


def _ints(values: Any, bounds: tuple[int, int]) -> list[int]:
    """The integers of a list that the column's ``bounds`` hold (nothing for a non-list)."""
    return [v for v in values if in_range(v, bounds) is not None] if isinstance(values, list) else []


def _text_or_none(value: Any) -> str | None:
    """A text field as the store keeps it: text as it is, anything else but null as JSON."""
    return value if isinstance(value, str) or value is None else json_text(value)


def _validate_history(rd: RunDir, witnesses: set[int], bounds: PartitionBounds,
                      torn: Callable[[TornTail], None]) -> tuple[int, int | None, int | None, dict[int, int]]:
    """Stream the history once, judged as ``floodmark check`` reads it for its checkers (dense
    indices, well-formed ops in time order, every completion closing its process's invocation:
    :func:`~floodmark.contracts.history.iter_judged_history`), refusing it otherwise; note the
    witnesses' times, show ``bounds`` the nemesis's ops, and hand ``torn`` a torn last line."""
    count, first, last = 0, None, None
    times: dict[int, int] = {}
    try:
        for _, op in iter_judged_history(rd.history, torn=torn):
            if op.process == NEMESIS:
                bounds.see(op)
            if first is None:
                first = op.time
            last = op.time
            if op.index in witnesses:
                times[op.index] = op.time
            count += 1
    except HistoryError as e:
        raise RunRejected(str(e)) from None
    except OSError as e:
        raise RunRejected(f"{rd.history}: {e.strerror or e}") from None
    return count, first, last, times


def _validity_text(value: Any) -> str | None:
    if value is None:
        return None
    return "true" if value is True else "false" if value is False else str(value)


def run_row(
    run_id: str, rd: RunDir, config: TestConfig | None, results: dict[str, Any] | None,
    op_count: int, first_time: int | None, last_time: int | None, cut_short: Collection[str] = (),
    history_torn_tail: str | None = None,
) -> Row:
    """The run's row; what a run without a configuration does not state is null. ``cut_short``:
    the nodes whose event file ends in a line cut short; ``history_torn_tail``: the history's
    last line left unread (both: see :data:`schemas.RUNS`)."""
    seed = config.seed if config is not None else (results or {}).get("seed")
    variant = config.variant if config is not None else (results or {}).get("variant")
    duration = (last_time - first_time) if first_time is not None and last_time is not None else None
    return {
        "run_id": run_id,
        "test": config.name if config is not None else rd.test_name,
        "started": rd.path.name.split("-s")[0],
        "seed": in_range(seed, INT64),
        "variant": variant if isinstance(variant, str) else None,
        "workload": config.workload if config is not None else None,
        "nemesis": (",".join(sorted(config.nemesis)) or "none") if config is not None else None,
        "cluster": config.cluster if config is not None else None,
        "code_version": config.code_version if config is not None else None,
        "valid": _validity_text(results.get("valid")) if results else None,
        "op_count": op_count,
        "duration_ns": in_range(duration, INT64),
        "path": str(rd.path.resolve()),
        "config_json": config_json(config),
        "cut_short": sorted(cut_short),
        "files_recorded": os.path.lexists(rd.digest),
        "history_torn_tail": history_torn_tail,
    }


def config_json(config: TestConfig | None) -> str | None:
    """The configuration as the runs table stores it: JSON, or null for a run that states none."""
    return None if config is None else json.dumps(config.to_dict(), sort_keys=True)


def config_from_json(text: str | None, run_id: str) -> TestConfig | None:
    """A runs-table ``config_json`` back to the configuration. Null, and the ``{}`` that older
    ingests stored for a run without ``test.yaml``, mean the run states none."""
    data = json.loads(text) if text else None
    if not data:
        return None
    return config_from_dict(data, f"config_json of run {run_id}")


def _first_partition(value: Any) -> tuple[str | None, int | None, int | None]:
    """The topic, partition and offset an op is about, when it is about exactly one."""
    if isinstance(value, dict):
        topic, partition, offset = value.get("topic"), value.get("partition"), value.get("offset")
        return topic if isinstance(topic, str) else None, in_range(partition, INT32), in_range(offset, INT64)
    return None, None, None


def _op_row(run_id: str, op: Op) -> Row:
    topic, partition, offset = _first_partition(op.value)
    return {
        "run_id": run_id,
        "index": op.index,
        "time": op.time,
        "type": op.type,
        "process": str(op.process),
        "f": op.f,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "node": op.node,
        "error": None if op.error is None else (op.error if isinstance(op.error, str) else json_text(op.error)),
        "value_json": json_text(op.value),
    }


def json_text(value: Any) -> str:
    """Compact JSON as stored in the ``*_json`` columns (UTF-8 kept, as orjson writes it)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _event_row(run_id: str, e: NodeEvent) -> Row:
    topic, partition, epoch = event_columns(e)
    return {
        "run_id": run_id,
        "node": e.node,
        "seq": e.seq,
        "wall": e.wall,
        "kind": e.kind,
        "topic": topic,
        "partition": partition,
        "leader_epoch": epoch,
        "fields_json": json_text(e.fields()),
    }


def event_columns(e: NodeEvent) -> tuple[str | None, int | None, int | None]:
    """What the store indexes an event by: the partition it names, and the leader epoch it
    names or else its controller epoch."""
    body = e.body
    key = partition_of(body)
    epoch = leader_epoch_of(body)
    if epoch is None and isinstance(body, ControllerElected | ControllerResigned | Rejected):
        epoch = body.controller_epoch
    epoch = in_range(epoch, INT64)
    return (None, None, epoch) if key is None else (key[0], in_range(key[1], INT32), epoch)


def anomaly_rows(run_id: str, results: dict[str, Any], times: dict[int, int]) -> list[Row]:
    """Flatten ``results.json``'s anomalies, with the time of the earliest witnessing op."""
    rows: list[Row] = []
    for checker, a in _anomalies(results):
        witnesses = _ints(a.get("ops"), INT64)
        witness_times = [times[i] for i in witnesses if i in times]
        rows.append({
            "run_id": run_id,
            "checker": checker,
            "type": a.get("type") if isinstance(a.get("type"), str) else json_text(a.get("type")),
            "topic": a.get("topic") if isinstance(a.get("topic"), str) else None,
            "partition": in_range(a.get("partition"), INT32),
            "offsets": _ints(a.get("offsets"), INT64),
            "ops": witnesses,
            "explanation": _text_or_none(a.get("explanation")),
            "permitted_by": _text_or_none(a.get("permitted_by")),
            "first_op_time": min(witness_times) if witness_times else None,
        })
    return rows


def find_runs(store: str | os.PathLike[str]) -> Iterator[Path]:
    """Every directory under the store that holds a history (the ``latest`` link excluded),
    but a partial run (being made, or left half-made by a process killed outright)."""
    root = Path(store)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(name for name in dirnames if not name.startswith(PARTIAL))
        if "history.jsonl" in filenames:
            dirnames.clear()  # a run directory's subfolders (events, logs) are not runs
            yield Path(dirpath)
