"""An index of a queue history: every send and every record read, per partition.

The durability, queue and hw checkers all ask the same questions of a queue workload's
history: which sends were acknowledged at which offset, which failed for certain, and which
records each poll and the final drain returned. One linear pass pairs every invocation with
its completion and answers them; the checkers then work per partition. The index is built
once per history and shared (:func:`index_for`); it holds history indices rather than ops
and references the records in the history rather than copying them, so it stays a fraction
of the history's size.

Op shapes (see DESIGN.md): ``send`` carries ``{"topic", "partition", "value"}`` and its ``ok``
adds ``"offset"``; ``poll``/``drain`` complete with a list of per-partition batches
``{"topic", "partition", "offset", "records": [[offset, value], ...], "high_watermark"}``;
``assign`` resets a consumer's positions (Jepsen's ``subscribe`` likewise). The ``log-lin``
workload's ``append`` and ``read`` map onto the same index (an append is a send, an ok read
of a value is a one-record read).

An op the index cannot read is *malformed* and listed, so the checkers say unknown rather
than judge the rest as if it were all: a value of the wrong shape (a partition below 0
among them: no log has one), an acknowledged send whose offset is not an integer (``null``,
``true``: JSON's booleans are not offsets), a batch without its records or a record that is not an ``[offset, value]`` pair with an integer
offset, and an op whose ``f`` no queue or log workload has (a renamed ``send`` would
otherwise hide its loss), a client's op (a send, a poll, an assign, ...) recorded under the
nemesis' name, which no checker reads as a client's (an anomaly it shows would pass unseen),
an assign or subscribe that holds records (a poll under another name, likewise unread),
and one whose completion contradicts its invocation or holds an
offset below 0 (a record's, a batch's start, a batch's high watermark: :mod:`.op_agreement`):
an acknowledgement naming another partition or value than was sent, a batch of a partition
the poll did not fetch or from another position, a drain's batch not read from offset 0. The send of such an acknowledgement is
kept as one whose outcome is unknown, in both partitions; such a batch's records are kept
as read, but in no consumer's order (nor as a drain's), and where that consumer stood after
it is unknown, as after an assign (so is it after a malformed poll).
A send the index cannot place in a partition (it names none, or one the run's test.yaml
does not have: :mod:`.run_partitions`) is malformed too, and its value set apart (the one
it was sent with, and the one its completion says it wrote, should the invocation not be
readable): reading it anywhere is no anomaly, since that send may have written it there.
Values sent and read are strings or integers: Python takes ``true`` for ``1`` and ``1.0``
for ``1``, so a history holding booleans, floats, ``null`` or collections as values could
not be compared value for value, and is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from floodmark.checkers.op_agreement import (
    MAX_OFFSET,
    acknowledged_elsewhere,
    acknowledgement_problem,
    batch_problem,
    offset_problem,
    read_problem,
    unfit_high_watermark,
)
from floodmark.checkers.op_shapes import (
    failed_yet_done,
    record_problem,
    shape_problem,
    shown_value,
    value_problem,
)
from floodmark.checkers.partition_index import Partition, PartitionIndex, Read, Send
from floodmark.checkers.run_partitions import set_apart_unknown_partitions
from floodmark.contracts.history import FINAL_READ, NEMESIS, Op

if TYPE_CHECKING:
    from floodmark.contracts.run_config import TestConfig

@dataclass
class QueueIndex:
    partitions: dict[Partition, PartitionIndex]
    # per process, in history order: ("read", Read), ("assign", op index) or ("unplaced",
    # op index): a poll the index could not place in the consumer's order (malformed, or of
    # unknown outcome), after which where the consumer stood is as unknown as after an assign
    consumer_ops: dict[Any, list[tuple[str, Any]]]
    drained: set[Partition]
    malformed: list[tuple[int, str]]
    client_ops: int
    # Values of sends that name no partition the index can place them in (a malformed one,
    # or one the run does not have): listed as malformed, and wherever one is read, it may
    # have been written there, so reading it is no anomaly.
    stray_values: set[Any] = field(default_factory=set)

    def set_apart(self, *said: Any) -> None:
        """Keep the value of a send that cannot be placed among the stray values, if it is one a
        read could return: ``said`` are its invocation's value and its completion's (what the
        acknowledgement says was written counts, even when the invocation is unreadable)."""
        for op_value in said:
            value = op_value.get("value") if type(op_value) is dict else None
            if type(value) is str or type(value) is int:
                self.stray_values.add(value)

    def partition(self, key: Partition) -> PartitionIndex:
        found = self.partitions.get(key)
        if found is None:
            found = self.partitions[key] = PartitionIndex(key)
        return found


# What a partition key of an op must be: a topic, and a number a log can have (no log has -1).
NO_PARTITION = "not a topic and a partition number from 0"
_SENDS = ("send", "append")
_READS = ("poll", "drain")
_POSITIONS = ("assign", "subscribe")  # a consumer's positions are reset
# Every op a client of a queue or log workload makes: none of them is the nemesis'.
_CLIENT_OPS = frozenset((*_SENDS, *_READS, *_POSITIONS, "read", FINAL_READ))


def build_index(history: list[Op]) -> QueueIndex:
    index = QueueIndex({}, {}, set(), [], 0)
    partitions = index.partitions
    consumer_ops = index.consumer_ops
    malformed = index.malformed
    open_ops: dict[Any, Op] = {}
    pop = open_ops.pop
    client_ops = 0
    # The hot loop of every queue checker: ok sends and ok polls, nearly all of a history,
    # are handled inline; everything else goes through _complete.
    for op in history:
        process = op.process
        if op.type == "invoke":
            if process == NEMESIS:
                if op.f in _CLIENT_OPS:
                    _nemesis_client_op(index, op)
                continue
            client_ops += 1
            if process in open_ops:
                _complete(index, pop(process), None)
            open_ops[process] = op
            continue
        invocation = pop(process, None)  # None for nemesis completions too: they are never opened
        if invocation is None:
            if process == NEMESIS and op.f in _CLIENT_OPS:
                _nemesis_client_op(index, op)
            continue
        if op.type == "ok":
            f = invocation.f
            if f == "send":
                value = invocation.value
                acknowledged = op.value
                offset = acknowledged.get("offset") if isinstance(acknowledged, dict) else None
                try:
                    key = (value["topic"], value["partition"])
                    send = Send(value["value"], process, "ok", offset, invocation.index, op.index)
                except (KeyError, TypeError, AttributeError, IndexError) as e:
                    malformed.append((invocation.index, shape_problem("send", invocation.value, acknowledged, e)))
                    index.set_apart(value, acknowledged)
                    continue
                unreadable = type(offset) is not int or not 0 <= offset <= MAX_OFFSET
                if unreadable:
                    _unreadable_acknowledgement(index, send, acknowledged)
                if type(key[0]) is not str or type(key[1]) is not int or key[1] < 0:
                    malformed.append((invocation.index, f"send names partition {_shown(key)}, {NO_PARTITION}"))
                    index.set_apart(value, acknowledged)
                    continue
                if type(send.value) is not str and type(send.value) is not int:
                    malformed.append((invocation.index, value_problem(send.value)))
                    index.set_apart(acknowledged)
                    continue
                echoed = acknowledged.get("value", send.value) if not unreadable else None
                if not unreadable and (acknowledged.get("partition", key[1]) is not key[1]
                                       or acknowledged.get("topic", key[0]) != key[0]
                                       or echoed != send.value or type(echoed) is not type(send.value)):
                    # (what it echoes is not what was sent, or only equal: said exactly, if so)
                    _check_acknowledgement(index, send, value, acknowledged)
                part = partitions.get(key)
                if part is None:
                    part = index.partition(key)
                part.sends.append(send)
                continue
            if f == "poll":
                consumer = consumer_ops.get(process)
                if consumer is None:
                    consumer = consumer_ops[process] = []
                completion = op.index
                fetched = invocation.value  # (each batch's position, as fetched: compared inline)
                try:
                    for batch in op.value:
                        key = (batch["topic"], batch["partition"])
                        if type(key[0]) is not str or type(key[1]) is not int or key[1] < 0:
                            raise TypeError(f"a batch names partition {_shown(key)}, {NO_PARTITION}")
                        records = batch["records"]
                        problem = record_problem(records)
                        if problem is not None:
                            raise ValueError(problem)
                        read = Read(completion, "poll", key, records, batch.get("high_watermark"),
                                    batch.get("offset"))
                        part = partitions.get(key)
                        if part is None:
                            part = index.partition(key)
                        part.reads.append(read)
                        start, agrees = read.start, False
                        if type(start) is int and 0 <= start <= MAX_OFFSET and type(fetched) is list:
                            for position in fetched:  # (where the poll fetched this partition from)
                                if type(position) is dict and position.get("partition") is key[1] \
                                        and position.get("topic") == key[0]:
                                    at = position.get("offset")
                                    agrees = at == start and type(at) is int
                                    break
                        if agrees and not unfit_high_watermark(read.high_watermark):
                            consumer.append(("read", read))
                            continue
                        disagreement = batch_problem("poll", invocation.value, batch)
                        if disagreement is None:
                            consumer.append(("read", read))
                        else:  # what it read was read, but from where in the consumer's order is not told
                            malformed.append((completion, disagreement))
                            consumer.append(("unplaced", completion))
                            read.placed = False
                except ValueError as e:  # the batch's records: said exactly
                    malformed.append((op.index, f"poll op's {e}"))
                    consumer.append(("unplaced", completion))
                except (KeyError, TypeError, AttributeError, IndexError) as e:
                    malformed.append((invocation.index, shape_problem("poll", invocation.value, op.value, e)))
                    consumer.append(("unplaced", completion))
                continue
        _complete(index, invocation, op)
    for invocation in open_ops.values():
        _complete(index, invocation, None)
    index.client_ops = client_ops
    return index


def _holds_records(value: Any) -> bool:
    """Whether an assign's or subscribe's value holds a batch of records, as a poll's does."""
    return type(value) is list and any(type(v) is dict and "records" in v for v in value)


def _nemesis_client_op(index: QueueIndex, op: Op) -> None:
    """A client's op under the nemesis' name: listed as malformed (no checker judges what it
    sent or read, so the verdict cannot be valid), and what it may have sent set apart."""
    index.malformed.append((op.index, f"the nemesis recorded a {op.f!r} op, which is a client's: what it "
                                      "sent or read is judged by no checker"))
    index.set_apart(op.value)


def _unreadable_acknowledgement(index: QueueIndex, send: Send, acknowledged: Any) -> None:
    """An ok send whose acknowledgement holds no integer offset: listed as malformed, and kept
    as a send whose outcome is unknown (it may be in the log, so reading its value is no
    anomaly), never dropped as if it had not been sent."""
    if isinstance(acknowledged, dict):
        problem = (offset_problem(acknowledged.get("offset"), "acknowledged send has offset")
                   or f"acknowledged send has offset {acknowledged.get('offset')!r}, not an integer")
    else:
        problem = f"acknowledged send's completion holds {shown_value(acknowledged)}, not a map with the offset"
    index.malformed.append((send.completion if send.completion is not None else send.invoke, problem))
    send.outcome = "info"
    send.offset = None


def _check_acknowledgement(index: QueueIndex, send: Send, invoked: dict[str, Any], acknowledged: Any) -> None:
    """An ok send whose acknowledgement names another partition or value than was sent
    (:func:`~floodmark.checkers.op_agreement.acknowledgement_problem`): listed as malformed,
    and kept as a send whose outcome is unknown, to the partition it was sent to and to the
    one its acknowledgement names (reading it in either is no anomaly, missing it in either
    no loss)."""
    problem = acknowledgement_problem(invoked, acknowledged)
    if problem is None:
        return
    index.malformed.append((send.completion if send.completion is not None else send.invoke, problem))
    send.outcome = "info"
    send.offset = None
    elsewhere = acknowledged_elsewhere(invoked, acknowledged)
    if elsewhere is not None:
        key, value = elsewhere
        index.partition(key).sends.append(Send(value, send.process, "info", None, send.invoke, send.completion))


def _partition_of(value: Any) -> Partition:
    key = (value["topic"], value["partition"])
    if type(key[0]) is not str or type(key[1]) is not int or key[1] < 0:
        raise TypeError(f"names partition {_shown(key)}, {NO_PARTITION}")
    return key


def _shown(key: tuple[Any, Any]) -> str:
    return shown_value(list(key))


def _complete(index: QueueIndex, invocation: Op, completion: Op | None) -> None:
    f = invocation.f
    outcome = "info" if completion is None else completion.type
    try:
        if f in _SENDS:
            value = invocation.value
            acknowledged = completion.value if completion is not None and outcome == "ok" else None
            offset = acknowledged.get("offset") if isinstance(acknowledged, dict) else None
            send = Send(value["value"], invocation.process, outcome, offset, invocation.index,
                        None if completion is None else completion.index)
            unreadable = outcome == "ok" and (type(offset) is not int or not 0 <= offset <= MAX_OFFSET)
            if unreadable:
                _unreadable_acknowledgement(index, send, acknowledged)
            key = _partition_of(value)
            if type(send.value) is not str and type(send.value) is not int:
                index.malformed.append((invocation.index, value_problem(send.value)))
                index.set_apart(None if completion is None else completion.value)
                return
            if outcome == "ok" and not unreadable:
                _check_acknowledgement(index, send, value, acknowledged)
            elif completion is not None and (problem := failed_yet_done(f, outcome, completion.value)):
                index.malformed.append((completion.index, problem))
                send.outcome = "info"  # failed and acknowledged at once: which is true is not said
            index.partition(key).sends.append(send)
        elif f in _READS:
            if completion is None or outcome != "ok":
                problem = None if completion is None else failed_yet_done(f, outcome, completion.value)
                if completion is not None and problem:  # failed, yet it read: what and how far is not said
                    index.malformed.append((completion.index, problem))
                if outcome != "fail" or problem:  # it may have read, and moved its consumer: where to is unknown
                    index.consumer_ops.setdefault(invocation.process, []).append(("unplaced", invocation.index))
                return
            consumer = index.consumer_ops.setdefault(invocation.process, [])
            batches: dict[Partition, Read] = {}  # this op's batch of each partition
            for batch in completion.value:
                key = _partition_of(batch)
                records = batch["records"]
                problem = record_problem(records)
                if problem is not None:
                    index.malformed.append((completion.index, f"{f} op's {problem}"))
                    consumer.append(("unplaced", completion.index))
                    continue
                read = Read(completion.index, f, key, records, batch.get("high_watermark"),
                            batch.get("offset"), invocation.index)
                index.partition(key).reads.append(read)
                disagreement = batch_problem(f, invocation.value, batch)
                if disagreement is None and f == "drain" and key in batches:
                    # (a drain reads each partition once, to its end: which batch is that read?)
                    disagreement = f"drain returned two batches of {key[0]}/{key[1]}"
                    batches[key].placed = False
                batches[key] = read
                if disagreement is not None:  # read, but not from where the op says: not in any order
                    index.malformed.append((completion.index, disagreement))
                    consumer.append(("unplaced", completion.index))
                    read.placed = False
                    continue
                consumer.append(("read", read))
                if f == "drain":
                    index.drained.add(key)
        elif f == "read":  # log-lin: one offset, one value (None past the end)
            if completion is None or outcome != "ok":
                return
            value = completion.value
            key = _partition_of(invocation.value)
            offset = invocation.value["offset"]
            disagreement = read_problem(invocation.value, value)
            if disagreement is not None:
                index.malformed.append((completion.index, disagreement))
                return
            if "value" not in value:  # (absent is not null: a misspelt field passed as a read of nothing)
                index.malformed.append((completion.index, "read's completion holds no value (null for nothing)"))
                return
            records = [] if value["value"] is None else [(offset, value["value"])]
            problem = record_problem(records)
            if problem is not None:
                index.malformed.append((completion.index, f"read op's {problem}"))
                return
            index.partition(key).reads.append(Read(completion.index, f, key, records, None))
        elif f in _POSITIONS:
            if _holds_records(invocation.value) or (completion is not None and _holds_records(completion.value)):
                # (a renamed poll: what it read would be judged by no checker)
                index.malformed.append((invocation.index, f"{f} op holds records, as a poll does: what it "
                                                          "read is judged by no checker"))
            if outcome != "fail":
                index.consumer_ops.setdefault(invocation.process, []).append(("assign", invocation.index))
        else:
            index.malformed.append((invocation.index, f"op {f!r} is no op of a queue or log workload"))
            # (a renamed send: its value may be in the log)
            index.set_apart(invocation.value, None if completion is None else completion.value)
            # (a renamed poll: what it read is in no consumer's order)
            index.consumer_ops.setdefault(invocation.process, []).append(("unplaced", invocation.index))
    except (KeyError, TypeError, AttributeError, IndexError) as e:
        index.malformed.append((invocation.index, shape_problem(
            f, invocation.value, None if completion is None else completion.value, e)))
        if f in _SENDS:
            index.set_apart(invocation.value, None if completion is None else completion.value)
        elif f in _READS:
            index.consumer_ops.setdefault(invocation.process, []).append(("unplaced", invocation.index))


_cache: list[tuple[list[Op], TestConfig | None, QueueIndex]] = []


def index_for(history: list[Op], config: TestConfig | None = None) -> QueueIndex:
    """The index of ``history`` as a run with ``config`` has it, built once when several
    checkers judge the same run."""
    if _cache and _cache[0][0] is history and _cache[0][1] is config:
        return _cache[0][2]
    index = build_index(history)
    set_apart_unknown_partitions(index, config)  # (what test.yaml says the run has)
    _cache[:] = [(history, config, index)]
    return index
