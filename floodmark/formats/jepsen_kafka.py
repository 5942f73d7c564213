"""Jepsen kafka histories, read as the queue ops floodmark's queue checker judges.

Jepsen's kafka workload (``jepsen.tests.kafka``, behind its Kafka, Redpanda and Bufstream
analyses) records a client op as a vector of *micro-ops*: ``[[:send 3 2]]`` asks to append
2 to key 3 and completes as ``[[:send 3 [12 2]]]`` (acknowledged at offset 12); ``[[:poll]]``
completes as ``[[:poll {3 [[12 2] [13 5]]}]]`` (the records each key returned). Every
integer key is one topic-partition; ``:assign`` and ``:subscribe`` name the keys a consumer
reads next, ``:crash`` ends a client and ``:debug-topic-partitions`` asks for metadata.
Jepsen's checker looks for the anomalies floodmark's queue checker looks for (lost writes,
unseen writes, duplicates, inconsistent offsets, poll skips, nonmonotonic polls and sends,
aborted reads), so this module translates the history rather than judging it: key ``k``
becomes partition ``key/k``, each send micro-op a ``send`` op, each key a poll returned a
``poll`` op's batch. The checker then judges what it judges for floodmark's own runs.

Where the two read a history differently, the translation gives the queue checker what
Jepsen means:

- *Positions.* Jepsen follows each process's position per key: an ``assign`` (or
  ``subscribe``) forgets only the keys it leaves out, and a failed or indefinite poll moves
  nothing. floodmark's consumers forget every position on an assign, so each process's reads
  of one key are made a consumer of their own (named ``"<process> reading key <k>"``),
  renamed when Jepsen would forget it. Sends are named the same way (a process's name,
  renamed after an assign that leaves the key out), since Jepsen compares successive sends
  only until then. A history with any ``subscribe`` lets the group rebalance consumers
  between polls, and Jepsen then tolerates skips and repeats between polls: each poll is a
  consumer of its own there, as is each record of a key an op's ``:rebalance-log`` names.
- *The final polls.* Jepsen ends a test with rounds of ``:crash``, an ``:assign`` of every
  key with ``:seek-to-beginning? true`` and polls until they have read as far as any op had
  seen in each key. A round that got there for a key read that key to its end: it becomes
  a ``drain`` of the key (begun when the assign was invoked), so that acknowledged sends no
  one read are ``unseen`` or ``lost-write`` as Jepsen calls them. A record read before the
  round began that the drain no longer returns, below its first record, is a ``lost-write``
  too (:mod:`floodmark.checkers.drain_edges`: it sought to the beginning, and the history
  states no retention that could move it), where Jepsen, which compares a process's reads
  only with its own earlier ones, reports nothing. A round that fell short stays a sequence
  of polls, and unread sends above them leave the verdict unknown.

What floodmark does not check is said, and never passes for valid (:attr:`KafkaHistory.
unjudged`): a history of transactions (an ``:f :txn`` op or an op of several micro-ops, as
Jepsen's ``:txn?`` tests write) may hold G0, G1c, precommitted reads and a transaction's
own nonmonotonic sends; a failed or indefinite op that still returned records, and an
indefinite send that states its offset, tell Jepsen's version order things the queue
checker does not read. An op whose micro-ops are not what Jepsen writes (a key that is no
integer from 0, a poll result that is no map, a completion whose micro-ops are not its
invocation's) is refused, naming its file and line; what the queue checker itself reads
(offsets, values, records) it judges as it judges its own ops: malformed, verdict unknown.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from floodmark.contracts.history import NEMESIS, HistoryError, Op, Process
from floodmark.formats.edn_values import Keyword
from floodmark.formats.jepsen_edn import shown_edn

TOPIC = "key"  # Jepsen's key k is floodmark's partition key/k
_MICRO = ("send", "poll")
_CALLS = ("send", "poll", "txn")  # the ops whose values are micro-ops
_POSITIONS = ("assign", "subscribe")
_DROPPED = ("crash", "debug-topic-partitions")  # a client's end and a metadata request: no reads, no writes
TRANSACTIONAL = ("G0, G1c and their -process and -realtime forms, precommitted-read, int-send-skip and "
                 "int-nonmonotonic-send")

Micro = tuple[str, int | None, Any]  # ("send", key, value or [offset value]) | ("poll", None, {key: records} or None)


@dataclass(frozen=True)
class KafkaHistory:
    ops: list[Op]  # floodmark queue ops, each with the index of the Jepsen op it comes from
    unjudged: tuple[str, ...]  # what the history holds that no floodmark checker judges


@dataclass
class _Call:
    invoke: Op
    done: Op | None
    at: int  # the invocation's position in the history
    mops: list[Micro]
    result: list[Micro] | None  # the completion's micro-ops (None: it states none)


def is_jepsen_kafka(ops: Sequence[Op]) -> bool:
    """Whether a history is Jepsen kafka's: some client send, poll or txn op holds micro-ops."""
    return any(op.f in _CALLS and op.process != NEMESIS and _looks_micro(op.value) for op in ops)


def _looks_micro(value: Any) -> bool:
    return (type(value) is list and bool(value) and type(value[0]) is list and bool(value[0])
            and type(value[0][0]) is Keyword and value[0][0] in _MICRO)


def translate(ops: Sequence[Op], source: str, lines: Sequence[int]) -> KafkaHistory:
    """The queue ops of a Jepsen kafka history (``lines``: each op's line in ``source``, for
    the message that refuses a malformed one)."""
    calls, passed, ends = _pair(ops, source, lines)
    unjudged = _unjudged(calls)
    order = not any(call.invoke.f == "subscribe" for call in calls)
    out: dict[int, list[Op]] = {}  # history position -> the ops to emit after it
    names = _Names()
    drained = _final_rounds(calls, ends)
    for i, call in enumerate(calls):
        _emit(i, call, ends[i], out, names, order, drained.get(i))
    translated: list[Op] = []
    for position, op in enumerate(ops):
        if position in passed:
            translated.append(op)
        translated.extend(out.get(position, ()))
    return KafkaHistory(translated, unjudged)


def _pair(ops: Sequence[Op], source: str, lines: Sequence[int]) -> tuple[list[_Call], set[int], list[int]]:
    """Each client op as a call (its invocation and completion), in completion order, each
    validated; the positions of the ops passed on as they are (the nemesis's, and client ops
    of no kafka kind, which the queue checker names); and where each call ends."""
    open_calls: dict[Process, tuple[Op, int, list[Micro]]] = {}
    calls: list[_Call] = []
    ends: list[int] = []
    passed: set[int] = set()
    for position, op in enumerate(ops):
        line = lines[position] if position < len(lines) else 0
        if op.process == NEMESIS or op.f not in (*_CALLS, *_POSITIONS, *_DROPPED):
            passed.add(position)
            continue
        if op.type == "invoke":
            open_calls[op.process] = (op, position, _invoked(op, source, line))
            continue
        invoked = open_calls.pop(op.process, None)
        if invoked is None:
            continue  # (a completion nobody invoked: the EDN reader refuses it)
        invoke, at, mops = invoked
        calls.append(_Call(invoke, op, at, mops, _completed(op, mops, source, line)))
        ends.append(position)
    for invoke, at, mops in open_calls.values():  # never completed: indefinite
        calls.append(_Call(invoke, None, at, mops, None))
        ends.append(at)
    return calls, passed, ends


def _invoked(op: Op, source: str, line: int) -> list[Micro]:
    if op.f in _POSITIONS:
        _keys(op.value, f":{op.f}", source, line)
        return []
    if op.f not in _CALLS:
        return []
    return _micro_ops(op, source, line, completion=False)


def _completed(op: Op, mops: list[Micro], source: str, line: int) -> list[Micro] | None:
    if op.f in _POSITIONS and op.type != "fail":
        _keys(op.value, f":{op.f}", source, line)
    if op.f not in _CALLS or (op.type != "ok" and op.value is None):
        return None  # (a failed or indefinite op may state nothing)
    result = _micro_ops(op, source, line, completion=True)
    if [m[0] for m in result] != [m[0] for m in mops]:
        raise HistoryError(source, line, f"the :{op.f} completion's micro-ops ({shown_edn(op.value)}) are not its "
                                         f"invocation's ({', '.join(':' + m[0] for m in mops)})")
    return result


def _micro_ops(op: Op, source: str, line: int, *, completion: bool) -> list[Micro]:
    value = op.value
    if type(value) is not list or not value:
        raise HistoryError(source, line, f"a Jepsen kafka :{op.f}'s value is a vector of micro-ops ([:send key "
                                         f"value], [:poll]), got {shown_edn(value)}")
    found: list[Micro] = []
    for mop in value:
        if type(mop) is not list or not mop or type(mop[0]) is not Keyword or mop[0] not in _MICRO:
            raise HistoryError(source, line, f"micro-op {shown_edn(mop)} of a :{op.f} is neither [:send key value] "
                                             "nor [:poll]")
        kind = str.__str__(mop[0])
        if kind == "send":
            if len(mop) != 3:
                raise HistoryError(source, line, f"micro-op {shown_edn(mop)} is no [:send key value]")
            found.append(("send", _key(mop[1], source, line), mop[2]))
        elif len(mop) == 1:
            found.append(("poll", None, None))
        elif len(mop) == 2 and completion and type(mop[1]) is dict:
            for key in mop[1]:
                _key(key, source, line)
            found.append(("poll", None, mop[1]))
        else:
            what = "[:poll {key [[offset value] ...]}]" if completion else "[:poll]"
            raise HistoryError(source, line, f"micro-op {shown_edn(mop)} is no {what}")
    return found


def _key(key: Any, source: str, line: int) -> int:
    if type(key) is not int or key < 0:
        raise HistoryError(source, line, f"key {shown_edn(key)} is not an integer from 0 (each key is a "
                                         "topic-partition)")
    return key


def _keys(value: Any, what: str, source: str, line: int) -> list[int]:
    if type(value) is not list:
        raise HistoryError(source, line, f"an {what}'s value is a vector of keys, got {shown_edn(value)}")
    return [_key(key, source, line) for key in value]


def _unjudged(calls: list[_Call]) -> tuple[str, ...]:
    """What the history holds that the queue checker does not judge, each said once."""
    said: dict[str, str] = {}
    for call in calls:
        done = call.done
        if "txn" not in said and (call.invoke.f == "txn" or len(call.mops) > 1):
            said["txn"] = (f"op {call.invoke.index} is a transaction ({len(call.mops)} micro-ops"
                           f"{', :txn' if call.invoke.f == 'txn' else ''}), and floodmark does not check the "
                           f"transactional anomalies Jepsen looks for: {TRANSACTIONAL}")
        if done is not None and done.type != "ok" and call.result is not None:
            if "records" not in said and any(kind == "poll" and read for kind, _, read in call.result):
                said["records"] = (f"op {done.index}, a {done.type} :{done.f}, returned records, which Jepsen "
                                   "reads for its version orders and floodmark does not")
            if "offset" not in said and done.type == "info" and any(
                    kind == "send" and _acknowledged(sent)[0] is not None for kind, _, sent in call.result):
                said["offset"] = (f"op {done.index}, an indefinite :{done.f}, states the offset of a send, which "
                                  "Jepsen reads for its version orders and floodmark does not")
    return tuple(said.values())


def _acknowledged(sent: Any) -> tuple[Any, Any]:
    """A completed send micro-op's ``[offset value]`` as (offset, value); (None, value) if it
    states no offset."""
    if type(sent) is list and len(sent) == 2:
        return sent[0], sent[1]
    return None, sent


def _shown(process: Process) -> str:
    """A Jepsen process as the names made of it show it: as EDN writes it (``1``, ``:a``,
    ``"a"``; a string process is named with its quotes already). Process 1 and process
    ``:1`` (named ``"1"`` once read) are two processes, whose reads must not be one consumer's."""
    return f":{process}" if type(process) is str and not process.startswith('"') else str(process)


class _Names:
    """The floodmark process each of a Jepsen process's sends and reads of a key is made by,
    renamed where Jepsen forgets that process's last send or read of the key."""

    def __init__(self) -> None:
        self.send_round: dict[tuple[Process, int], int] = {}
        self.read_round: dict[tuple[Process, int], int] = {}
        self.sent: dict[Process, set[int]] = {}
        self.read: dict[Process, set[int]] = {}

    def sender(self, process: Process, key: int) -> Process:
        self.sent.setdefault(process, set()).add(key)
        round_ = self.send_round.get((process, key), 0)
        return process if round_ == 0 else f"{_shown(process)} after assign {round_}"

    def reader(self, process: Process, key: int) -> str:
        self.read.setdefault(process, set()).add(key)
        round_ = self.read_round.get((process, key), 0)
        return f"{_shown(process)} reading key {key}" + (f" after assign {round_}" if round_ else "")

    def assign(self, process: Process, keys: set[int] | None) -> None:
        """An assign or subscribe of ``keys`` (None: every position forgotten, as by a seek)."""
        for known, rounds in ((self.sent, self.send_round), (self.read, self.read_round)):
            for key in known.get(process, set()) - (keys or set()):
                rounds[(process, key)] = rounds.get((process, key), 0) + 1
            known[process] = known.get(process, set()) & (keys or set())


@dataclass
class _Drain:
    """A final round that read some keys to the end: its assign, those keys, its last call,
    and the records of those keys its polls returned so far."""

    assign: _Call
    keys: set[int]
    last: int  # the call after which the drain is emitted
    records: dict[int, list[Any]] = field(default_factory=dict)


def _final_rounds(calls: list[_Call], ends: list[int]) -> dict[int, _Drain]:
    """Each call of a final round (an ok assign with ``:seek-to-beginning? true`` and the
    polls its process makes next) that read some of its keys at least as far as any op had
    seen them before the assign began, mapped to that round's drain."""
    rounds: dict[int, list[int]] = {}  # assign call -> its calls (itself, then its polls)
    current: dict[Process, int] = {}  # process -> its round's assign call
    for i, call in enumerate(calls):
        process, f = call.invoke.process, call.invoke.f
        if f == "poll" and process in current:
            rounds[current[process]].append(i)
            continue
        current.pop(process, None)
        done = call.done
        if f == "assign" and done is not None and done.type == "ok" and call.invoke.extra.get(
                "seek-to-beginning?") is True:
            current[process] = i
            rounds[i] = [i]
    found: dict[int, _Drain] = {}
    seen: dict[int, int] = {}  # key -> the highest offset acknowledged or read so far
    by_end = sorted(range(len(calls)), key=ends.__getitem__)
    j = 0
    for assign in sorted(rounds, key=lambda a: calls[a].at):
        while j < len(by_end) and ends[by_end[j]] < calls[assign].at:
            _see(calls[by_end[j]], seen)
            j += 1
        read: dict[int, int] = {}
        for poll in rounds[assign]:
            _see(calls[poll], read)
        keys = {key for key in calls[assign].invoke.value if read.get(key, -1) >= seen.get(key, -1)}
        if keys:
            last = max((c for c in rounds[assign] if calls[c].done is not None), key=ends.__getitem__)
            drain = _Drain(calls[assign], keys, last)
            found.update(dict.fromkeys(rounds[assign], drain))
    return found


def _see(call: _Call, seen: dict[int, int]) -> None:
    """Raise ``seen`` (key -> highest offset) by what an ok call acknowledged or read."""
    if call.done is None or call.done.type != "ok" or call.result is None:
        return
    for kind, key, value in call.result:
        if kind == "send":
            offset = _acknowledged(value)[0]
            if type(offset) is int and key is not None:
                seen[key] = max(seen.get(key, -1), offset)
        elif value is not None:
            for read_key, records in value.items():
                for offset in _offsets(records):
                    seen[read_key] = max(seen.get(read_key, -1), offset)


def _offsets(records: Any) -> Iterator[int]:
    if type(records) is list:
        for record in records:
            if type(record) is list and len(record) == 2 and type(record[0]) is int:
                yield record[0]


def _emit(i: int, call: _Call, end: int, out: dict[int, list[Op]], names: _Names, order: bool,
          drain: _Drain | None) -> None:
    """The queue ops of call ``i``, each after the history position it happens at."""
    invoke, done = call.invoke, call.done
    process, f = invoke.process, invoke.f
    emitted = out.setdefault(end, [])
    if f in _POSITIONS:
        if done is not None and done.type != "fail":
            seek = invoke.extra.get("seek-to-beginning?") is True
            names.assign(process, None if seek else set(invoke.value))
    elif f in _CALLS:
        together = len(call.mops) > 1 or done is None  # (a transaction's sends one after another, at its end)
        before = emitted if together else out.setdefault(call.at, [])
        polled: dict[int, list[Any]] = {}
        for n, (kind, key, value) in enumerate(call.mops):
            if kind == "send" and key is not None:
                sender = names.sender(process, key)
                before.append(_op(invoke, "invoke", sender, "send", {"topic": TOPIC, "partition": key, "value": value}))
                if done is not None:
                    emitted.append(_op(done, done.type, sender, "send", _send_completion(key, call, n)))
            elif done is not None and done.type == "ok" and call.result is not None:
                for read_key, records in (call.result[n][2] or {}).items():
                    polled.setdefault(read_key, []).append(records)
        if drain is not None:
            for key in drain.keys:
                drain.records.setdefault(key, []).extend(polled.pop(key, []))
        emitted.extend(_polls(call, polled, names, order))
    if drain is not None and drain.last == i:
        emitted.extend(_drain(drain, call))


def _send_completion(key: int, call: _Call, n: int) -> Any:
    """A send micro-op's completion as a queue send's: the acknowledgement's offset and what
    it echoes, for an ok one; nothing beyond what was sent, for one that failed or is unknown."""
    sent = {"topic": TOPIC, "partition": key, "value": call.mops[n][2]}
    done = call.done
    if done is None or call.result is None:
        return sent
    completed_key, said = call.result[n][1], call.result[n][2]
    offset, value = _acknowledged(said)
    if done.type == "ok":
        return {"topic": TOPIC, "partition": completed_key, "value": value, "offset": offset}
    if done.type == "fail" and offset is not None:  # (a failure that states an offset: the checker names it)
        return {**sent, "offset": offset}
    return sent


def _polls(call: _Call, polled: dict[int, list[Any]], names: _Names, order: bool) -> list[Op]:
    """One poll per key an ok call read, each by that key's reader; a reader of its own
    where Jepsen does not compare the reads with the ones before (a history with subscribes)
    or within (a key the op's ``:rebalance-log`` names: one reader per record)."""
    done = call.done
    if done is None or not polled:
        return []
    process = call.invoke.process
    rebalanced = _rebalanced(done)
    ops: list[Op] = []
    for key, parts in sorted(polled.items()):
        reader = names.reader(process, key)
        records = _joined(parts)
        if key in rebalanced and type(records) is list:
            batches = [(f"{reader} at op {done.index}.{n}", [record]) for n, record in enumerate(records)]
        else:
            batches = [(reader if order else f"{reader} at op {done.index}", records)]
        for name, batch in batches:
            ops.append(_op(call.invoke, "invoke", name, "poll", None))
            ops.append(_op(done, "ok", name, "poll", [{"topic": TOPIC, "partition": key, "records": batch}]))
    return ops


def _drain(drain: _Drain, last: _Call) -> list[Op]:
    """The drain a final round makes of the keys it read to the end: begun as its assign was
    invoked, from offset 0 (it sought to the beginning), ended with its last call."""
    assign = drain.assign.invoke
    done = last.done
    assert done is not None  # (the last call of a round that completed)
    name = f"{_shown(assign.process)} reading from the beginning"
    batches = [{"topic": TOPIC, "partition": key, "offset": 0, "records": _joined(drain.records.get(key, []))}
               for key in sorted(drain.keys)]
    return [_op(assign, "invoke", name, "drain", None), _op(done, "ok", name, "drain", batches)]


def _joined(parts: list[Any]) -> Any:
    """The records of a key over several micro-ops or polls, one list (the first that is no
    list, as it is, for the checker to name)."""
    if len(parts) == 1:
        return parts[0]
    joined: list[Any] = []
    for part in parts:
        if type(part) is not list:
            return part
        joined.extend(part)
    return joined


def _rebalanced(done: Op) -> set[Any]:
    """The keys an op's ``:rebalance-log`` says were reassigned while it ran."""
    log = done.extra.get("rebalance-log")
    keys: set[Any] = set()
    if type(log) is list:
        for event in log:
            if type(event) is dict:
                named = event.get(Keyword("keys"))
                if type(named) is list:
                    keys.update(key for key in named if type(key) is int)
    return keys


def _op(source: Op, type_: str, process: Process, f: str, value: Any) -> Op:
    """A queue op made of a Jepsen op: its index and time, so that anomalies name the op."""
    return Op(index=source.index, time=source.time, type=type_, process=process, f=f,  # type: ignore[arg-type]
              value=value, node=source.node, error=source.error if type_ != "invoke" else None)
