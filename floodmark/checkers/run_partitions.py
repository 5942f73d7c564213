"""The partitions a run has: an op naming any other is damage, not an event to judge.

A run's ``test.yaml`` states its topics and partitions (``t0``.. and 0..``partitions``-1);
no client can send to or read from a partition the cluster never had. So a send naming
partition 7 of a topic of 3 says nothing about where its record went, and a read of its
value in partition 0 is no record from nowhere: the op is malformed (the verdict unknown,
naming it), and its value is set apart as one that may be anywhere
(:attr:`~floodmark.checkers.queue_index.QueueIndex.stray_values`). A read of a value in a
partition the run has, other than the one it was sent to, stays an anomaly. A history
that states no configuration (a foreign one) is held to none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from floodmark.contracts.run_config import TestConfig


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
