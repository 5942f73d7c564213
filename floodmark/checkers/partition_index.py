"""What a queue history says about one partition: its sends, its reads, and what they observed.

:mod:`.queue_index` splits a history by partition in one pass; each partition's part is a
:class:`PartitionIndex`: the sends that named it (with their outcome and acknowledged
offset) and every batch a poll, a drain or a log-lin read returned of it. The checkers then
ask each partition the same questions (which value sits at which offset, which values were
read at several offsets, the highest offset read): :meth:`PartitionIndex.observations`
answers them all in one pass over the records, computed once when first asked, since it is
the hot loop of checking a long history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Partition = tuple[str, int]


@dataclass(slots=True)
class Send:
    value: Any
    process: Any
    outcome: str  # "ok" | "fail" | "info" (info also when it never completed)
    offset: int | None
    invoke: int  # history index of the invocation
    completion: int | None  # history index of the completion (None: it never completed)


@dataclass(slots=True)
class Read:
    """One partition's batch of one poll (or drain, or log-lin read)."""

    op: int  # history index of the completion
    f: str
    partition: Partition
    records: list[Any]  # [offset, value] pairs, as the history holds them
    high_watermark: int | None
    start: Any = None  # the offset the read fetched from (a poll's batch "offset"), if stated
    invoke: int = -1  # history index of the invocation (drains only: -1 for the others)
    # False when the batch disagrees with where its op fetched (listed as malformed): what it
    # returned was read, but neither its start nor its place (a drain's, a consumer's) is known
    placed: bool = True

    @property
    def is_drain(self) -> bool:
        """A drain's batch that is the drain's read of its partition (placed)."""
        return self.f == "drain" and self.placed


@dataclass
class Observations:
    """What reads and acknowledgements say about one partition, gathered in one pass."""

    value_at: dict[int, Any]  # offset -> the first value observed there
    witness_at: dict[int, int]  # offset -> the op that first observed it
    conflicts: dict[int, dict[Any, int]]  # offset -> {value: first op observing it}, if several
    offset_of: dict[Any, int]  # value -> the first offset it was observed at
    more_offsets: dict[Any, set[int]]  # value -> every offset it was observed at, if several
    read_values: set[Any]  # values any read returned
    highest_read: int  # the highest offset any read returned (-1: none)
    duplicate_witness: dict[Any, int]  # value -> the read that first saw it at a second offset

    def offsets(self, value: Any) -> set[int]:
        """Every offset ``value`` was observed at (read or acknowledged)."""
        more = self.more_offsets.get(value)
        if more is not None:
            return set(more)
        first = self.offset_of.get(value)
        return set() if first is None else {first}


@dataclass
class PartitionIndex:
    partition: Partition
    sends: list[Send] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    _observed: Observations | None = None

    def observations(self) -> Observations:
        if self._observed is None:
            self._observed = _observe(self)
        return self._observed

    def first_values(self) -> dict[int, Any]:
        """Offset -> the first value clients saw there (acknowledged sends, then reads in
        order): ``observations().value_at``, without the rest of the observations when no
        other checker has asked for them yet."""
        if self._observed is not None:
            return self._observed.value_at
        try:
            # First wins: later reads are applied first and overwritten by earlier ones, and
            # acknowledgements last of all. dict.update does the per-record work in C.
            value_at: dict[int, Any] = {}
            for read in reversed(self.reads):
                value_at.update(read.records)
            for send in reversed(self.sends):
                if send.offset is not None and send.outcome == "ok":
                    value_at[send.offset] = send.value
            return value_at
        except (TypeError, ValueError):  # a malformed record: the full pass reports it
            return self.observations().value_at


_NOTHING = object()


def _observe(part: PartitionIndex) -> Observations:
    # Hot loop (every record every read returned): plain dicts keyed by offset and value,
    # a second offset of a value kept apart since it is rare, and a record read again at an
    # offset (the common case: the final drain re-reads everything) skipped after one lookup.
    value_at: dict[int, Any] = {}
    witness_at: dict[int, int] = {}
    conflicts: dict[int, dict[Any, int]] = {}
    offset_of: dict[Any, int] = {}
    more_offsets: dict[Any, set[int]] = {}
    duplicate_witness: dict[Any, int] = {}
    for send in part.sends:
        offset = send.offset
        if offset is None or send.outcome != "ok":
            continue
        value = send.value
        op = send.completion if send.completion is not None else send.invoke
        first = value_at.setdefault(offset, value)
        if first is value or first == value:
            if offset not in witness_at:
                witness_at[offset] = op
        else:
            conflicts.setdefault(offset, {first: witness_at[offset]}).setdefault(value, op)
        first_offset = offset_of.setdefault(value, offset)
        if first_offset != offset:
            more_offsets.setdefault(value, {first_offset}).add(offset)
    read_values: set[Any] = set()
    add_read_value = read_values.add
    highest = -1
    read_at: dict[int, Any] = {}  # offset -> the first value a read returned there
    seen_again: set[tuple[int, Any]] = set()  # other (offset, value)s reads returned
    for read in part.reads:
        op = read.op
        for offset, value in read.records:
            earlier = read_at.get(offset, _NOTHING)
            if earlier is value or earlier == value:
                continue  # this record was read before: nothing new to learn
            if earlier is _NOTHING:
                read_at[offset] = value
            else:
                pair = (offset, value)
                if pair in seen_again:
                    continue
                seen_again.add(pair)
            first = value_at.setdefault(offset, value)
            if first is value or first == value:
                if offset not in witness_at:
                    witness_at[offset] = op
            else:
                conflicts.setdefault(offset, {first: witness_at[offset]}).setdefault(value, op)
            add_read_value(value)
            first_offset = offset_of.setdefault(value, offset)
            if first_offset != offset:
                more = more_offsets.get(value)
                if more is None:
                    more_offsets[value] = {first_offset, offset}
                    duplicate_witness.setdefault(value, op)
                elif offset not in more:
                    more.add(offset)
                    duplicate_witness.setdefault(value, op)
            if offset > highest:
                highest = offset
    return Observations(value_at, witness_at, conflicts, offset_of, more_offsets, read_values, highest,
                        duplicate_witness)
