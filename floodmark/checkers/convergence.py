"""Convergence: once every fault has healed, every replica of every partition is in sync again.

The safety checkers judge what was written and read, so they cannot see a replica that never
catches up after the faults end: a follower stuck on a truncation it cannot finish, a
fetcher that stopped for good, an ISR expansion nobody writes. The data stays readable (a
leader and min.insync.replicas suffice, so the final reads succeed), but the partition has
lost a copy for good, which is what Kafka's operators watch as under-replicated partitions.

So the runner, after the final reads, with every fault healed and the workload quiet, waits
up to the test's recovery time for every partition's ISR to hold all its replicas, and
records what it found as one nemesis op, :data:`AWAIT_FULL_ISR`: invoked with the time it
allows, completed with the seconds it waited and each partition still short at the deadline,
with why. This checker reads that op:

* every partition whole: valid;
* a partition still short (its ISR lacks a replica, it has no leader, the metadata lacks
  it): invalid, one ``under-replicated-after-healing`` anomaly per partition;
* no controller: ZooKeeper named none by the end of the wait: invalid, one
  ``no-controller-after-healing`` anomaly (the brokers' metadata still lists the ISRs they
  last heard of, whole or not, but nothing can change a leader or an ISR any more, and
  brokers that lost their controller fence themselves: a cluster that never recovers);
* the wait found no broker to ask, never completed, or its record cannot be read: unknown,
  saying why; it must not pass as valid.

A wait that records no controller (ZooKeeper could not be read, or a run recorded before the
wait looked) is judged on its ISRs alone, and its stats say the controller was not recorded.

Every partition counts, not only those ``test.yaml`` declares: an admin fault may add some
during the run, and a reassignment moves a partition's replicas. The wait holds every
partition the metadata lists to the replicas it lists then, and records each it checked
with those replicas. A partition the node events name (of the test's topics) that the wait
did not check is one the cluster's metadata never listed after healing: invalid, as short.
A wait recorded before it listed what it checked held only the declared partitions: if the
node events name another, the verdict is unknown.

The runner records one wait; a history holding several (edited, or joined from two) has each
completed wait judged: a partition one of them found short stays a finding whatever a later
one found, and one whose record cannot be read makes a verdict found valid unknown (the last
wait alone was judged: an earlier wait's short partitions passed unread, VALID).

Only a run that recorded the wait, or ran on the simulator (which always records it after
the final reads), is judged by this checker (:func:`records_the_wait`): a simulator run's
history without it ends early (cut at a line's end, the op removed) and is unknown; runs on
real clusters, which do not wait, and foreign histories never name it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from floodmark.checkers.api import CheckInput
from floodmark.contracts.history import NEMESIS, Op
from floodmark.contracts.node_events import PartitionEvent, PartitionKey
from floodmark.contracts.results import Anomaly, CheckerResult, merge_validity

AWAIT_FULL_ISR = "await-full-isr"
UNDER_REPLICATED = "under-replicated-after-healing"
NO_CONTROLLER = "no-controller-after-healing"


def _waits(ops: Iterable[Op]) -> Iterator[Op]:
    """The ops of the runner's wait for whole ISRs."""
    return (op for op in ops if op.f == AWAIT_FULL_ISR and op.process == NEMESIS)


def records_the_wait(ops: Iterable[Op]) -> bool:
    """Does the history record the runner's wait for whole ISRs (and so ask for this checker)?"""
    return next(_waits(ops), None) is not None


class ConvergenceChecker:
    name = "convergence"

    def check(self, run: CheckInput) -> CheckerResult:
        waits = list(_waits(run.history))
        if not waits:
            why = "the history records no wait for whole ISRs after healing"
            if run.config is not None and run.config.cluster == "sim":
                why += (" (a simulator run records one after its final reads: this history ends before it, "
                        "or was recorded before the wait existed)")
            return _unknown(why)
        result = _judge_wait(waits[-1], run)
        for earlier in waits[:-1]:
            if earlier.type != "ok":  # (it found nothing: the last one is the record)
                continue
            before = _judge_wait(earlier, run)
            result.anomalies[:0] = before.anomalies
            merged = merge_validity((result.valid, before.valid))
            if merged != result.valid:
                result.valid = merged
                if merged == "unknown":
                    result.stats["unjudged_because"] = before.stats["unjudged_because"]
        if len(waits) > 1:
            result.stats["waits"] = len(waits)
            result.stats["under_replicated"] = len(result.anomalies)
        return result


def _judge_wait(last: Op, run: CheckInput) -> CheckerResult:
    """The verdict of one wait for whole ISRs (``last``: its last op, the completion if it has one)."""
    if last.type == "invoke":
        return _unknown(f"the wait for whole ISRs (op {last.index}) never completed")
    if last.type != "ok":
        return _unknown(f"the wait for whole ISRs (op {last.index}) ended {last.type}: {last.error}")
    found = last.value
    problem = _shape_problem(found)
    if problem is not None:
        return _unknown(f"op {last.index} is no record of a wait for whole ISRs: {problem}")
    stats: dict[str, Any] = {"waited": found["waited"], "timeout": found["timeout"]}
    short = found["short"]
    unasked = [entry["why"] for entry in short if entry["topic"] is None]
    if unasked:
        return _unknown(f"the wait for whole ISRs could not ask the cluster: {unasked[0]}", stats)
    existing = _partitions_named(run)
    if "checked" in found:
        checked = {(entry["topic"], entry["partition"]) for entry in found["checked"]}
        stats["partitions_checked"] = len(checked)
        short = [*short, *({"topic": topic, "partition": number, "why": UNLISTED}
                           for topic, number in sorted(existing - checked))]
    elif run.config is not None and (unheld := existing - set(run.config.topic_partitions)):
        return _unknown("the wait for whole ISRs, recorded before it listed the partitions it checked, held "
                        f"only those test.yaml declares; the node events name {_named(unheld)} too", stats)
    anomalies = [Anomaly(
        UNDER_REPLICATED,
        f"{entry['topic']}-{entry['partition']}: {entry['why']}, {found['timeout']:g} s after the final "
        "reads, with every fault healed and no client writing",
        topic=entry["topic"], partition=entry["partition"], ops=(last.index,))
        for entry in short]
    stats["under_replicated"] = len(anomalies)
    controller = found.get("controller")
    stats["controller"] = "not recorded" if controller is None else controller
    if controller == -1:
        anomalies.append(Anomaly(
            NO_CONTROLLER,
            f"no broker was controller {found['timeout']:g} s after the final reads, with every fault healed "
            "(ZooKeeper named none): no partition can change its leader or ISR any more",
            ops=(last.index,)))
    return CheckerResult(not anomalies, anomalies, stats)


UNLISTED = "its node events show it exists, but the cluster's metadata never listed it to the wait"


def _partitions_named(run: CheckInput) -> set[PartitionKey]:
    """The partitions of the test's topics (any, for a history stating no test) the node events name."""
    topics = None if run.config is None else set(run.config.topic_names)
    return {(event.body.topic, event.body.partition) for events in run.events.values() for event in events
            if isinstance(event.body, PartitionEvent) and (topics is None or event.body.topic in topics)}


def _named(partitions: set[PartitionKey]) -> str:
    return ", ".join(f"{topic}/{number}" for topic, number in sorted(partitions))


def _unknown(why: str, stats: dict[str, Any] | None = None) -> CheckerResult:
    return CheckerResult("unknown", [], {**(stats or {}), "unjudged_because": why})


def _shape_problem(found: Any) -> str | None:
    """Why ``found`` is not ``{"waited": s, "timeout": s, "short": [{"topic", "partition", "why"}],
    "checked": [...], "controller": id}``."""
    if not isinstance(found, Mapping):
        return f"its value is {type(found).__name__}, not a map"
    for key in ("waited", "timeout"):
        seconds = found.get(key)
        if not (type(seconds) is int or type(seconds) is float) or not 0 <= seconds < math.inf:
            return f"{key!r} is not a number of seconds (from 0, finite)"
    short = found.get("short")
    if not isinstance(short, list):
        return "'short' is not a list of partitions"
    for entry in short:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("why"), str):
            return f"'short' holds {entry!r}, not a partition with why"
        topic, number = entry.get("topic"), entry.get("partition")
        if topic is None and number is None:
            continue  # the whole cluster: nobody answered
        if not isinstance(topic, str) or type(number) is not int or number < 0:
            return f"'short' names partition {topic!r}/{number!r}"
    controller = found.get("controller", -1)  # (absent: not read, or a wait recorded before it looked)
    if type(controller) is not int or controller < -1:
        return f"'controller' is {controller!r}, not a broker id or -1 (none)"
    checked = found.get("checked", [])  # (absent from waits recorded before it was listed)
    if not isinstance(checked, list):
        return "'checked' is not a list of partitions"
    for entry in checked:
        if not (isinstance(entry, Mapping) and isinstance(entry.get("topic"), str)
                and type(entry.get("partition")) is int and entry["partition"] >= 0
                and isinstance(entry.get("replicas"), list) and all(type(r) is int for r in entry["replicas"])):
            return f"'checked' holds {entry!r}, not a partition with its replicas"
    return None
