"""The partitions a run has: an op naming any other is damage, not an event to judge.

A run's ``test.yaml`` states its topics and partitions (``t0``.. and 0..``partitions``-1);
no client can send to or read from a partition the cluster never had. So a send naming
partition 7 of a topic of 3 says nothing about where its record went, and a read of its
value in partition 0 is no record from nowhere: the op is malformed (the verdict unknown,
naming it), and its value is set apart as one that may be anywhere
(:attr:`~floodmark.checkers.queue_index.QueueIndex.stray_values`). A read of a value in a
partition the run has, other than the one it was sent to, stays an anomaly. A history
that states no configuration (a foreign one) is held to none.

Node events may name more partitions than ``test.yaml`` states, but only those an admin
fault added (``add-partitions``: its nemesis op names the topic and the partition count it
asked for). :class:`PartitionBounds` reads those ops, one at a time (the Spark pipeline
streams the history), and bounds each topic's partitions for the node event readers: an
event naming a partition beyond them is damage (the file and line named, exit 254), never a
partition to judge (it was judged one the cluster never listed, and the run invalid). An
``add-partitions`` whose outcome is unknown leaves the partitions unbounded, as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from floodmark.contracts.history import NEMESIS, Op

if TYPE_CHECKING:
    from floodmark.contracts.run_config import TestConfig

ADD_PARTITIONS = "add-partitions"  # the admin fault's shape that adds partitions to a topic


class PartitionBounds:
    """How many partitions each topic of a run may have had: ``test.yaml``'s count, or more
    where an admin fault added some (see the module docstring)."""

    def __init__(self, config: TestConfig | None) -> None:
        self._config = config
        self._added: dict[str, int] = {}  # topic -> the largest count an add-partitions asked for
        self._unsure = 0  # add-partitions invoked, less those whose completion says what they asked

    def see(self, op: Op) -> None:
        if op.process != NEMESIS or type(op.value) is not dict or op.value.get("shape") != ADD_PARTITIONS:
            return
        if op.type == "invoke":
            self._unsure += 1
            return
        topic, count = op.value.get("topic"), op.value.get("count")
        if op.type == "ok" and type(topic) is str and type(count) is int:
            self._added[topic] = max(self._added.get(topic, 0), count)
            self._unsure -= 1

    def merge(self, other: PartitionBounds) -> None:
        """Add what ``other`` saw of another part of the same history (the pipeline reads a
        large one in chunks): what a history's ops add up to does not depend on their order."""
        for topic, count in other._added.items():
            self._added[topic] = max(self._added.get(topic, 0), count)
        self._unsure += other._unsure

    def bounds(self) -> dict[str, int] | None:
        """Topic -> how many partitions it may have; None when that is not known (no
        configuration, or an add-partitions that did not say what it asked for)."""
        config = self._config
        if config is None or self._unsure > 0:
            return None
        return {topic: max(config.partitions, self._added.get(topic, 0)) for topic in config.topic_names}


def partition_bounds(config: TestConfig | None, ops: Iterable[Op]) -> dict[str, int] | None:
    """:meth:`PartitionBounds.bounds` of a whole history (or of its nemesis's ops)."""
    if config is None:
        return None  # (nothing to bound: the history need not be looked at)
    bounds = PartitionBounds(config)
    for op in ops:
        if op.process == NEMESIS:
            bounds.see(op)
    return bounds.bounds()


class QueueIndex(Protocol):
    """What is changed of a :class:`floodmark.checkers.queue_index.QueueIndex` (named so
    that the index, which calls this, need not be imported by it)."""

    partitions: dict[tuple[str, int], Any]
    consumer_ops: dict[Any, list[tuple[str, Any]]]
    drained: set[tuple[str, int]]
    malformed: list[tuple[int, str]]
    stray_values: set[Any]


def set_apart_unknown_partitions(index: QueueIndex, config: TestConfig | None) -> None:
    """List as malformed every op of a partition ``config`` does not have, take those
    partitions out of ``index`` (and out of every consumer's order and the drained ones), and
    set their sends' values apart."""
    if config is None:
        return
    known = set(config.topic_partitions)
    unknown = {key for key in index.partitions if key not in known}
    if not unknown:
        return
    has = (f"test.yaml states {config.topics} topic{'s' if config.topics != 1 else ''} of "
           f"{config.partitions} partition{'s' if config.partitions != 1 else ''}")
    listed = {op for op, _ in index.malformed}
    for key in sorted(unknown):
        part = index.partitions.pop(key)
        where = f"{key[0]}/{key[1]}, which the run does not have ({has})"
        for send in part.sends:
            index.stray_values.add(send.value)
            if send.invoke not in listed and send.completion not in listed:
                index.malformed.append((send.invoke, f"send names partition {where}"))
        for read in part.reads:
            if read.op not in listed:
                listed.add(read.op)
                index.malformed.append((read.op, f"{read.f} op reads partition {where}"))
    index.drained -= unknown
    for ops in index.consumer_ops.values():
        ops[:] = [(kind, read) for kind, read in ops if kind != "read" or read.partition not in unknown]
    index.malformed.sort(key=lambda entry: entry[0])  # (the verdict line names the first)
