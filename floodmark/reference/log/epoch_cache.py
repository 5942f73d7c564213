"""The leader epoch cache: which leader epoch wrote which stretch of a log (KIP-101).

Every record carries the leader epoch of the leader that appended it. The cache keeps, per
log, the sequence of ``(epoch, start_offset)`` pairs: the first offset each epoch wrote.
Epochs and start offsets both strictly increase. It is persisted beside the log as
``leader-epoch-checkpoint`` (Kafka's checkpoint text format, written atomically).

Its purpose is truncation by epoch instead of by high watermark. A follower that becomes a
follower again (or restarts) asks the leader "where does my latest epoch end in your
log?" (``OffsetsForLeaderEpoch``) and truncates to that offset, which removes exactly the
records the new leader does not share, and never a committed one.

How the leader answers (``end_offset_for``):

* **KIP-279** (Kafka 2.0, the default): the answer is the *largest epoch the leader has
  that is <= the requested one*, with the end offset of that epoch: the start offset of
  the next larger epoch in the leader's cache, or the log end if it is the leader's latest.
  The follower then truncates to the smaller of that offset and the end of that epoch in
  its *own* log, and asks again with the returned epoch if needed. This converges even
  when both logs have several epoch gaps (fast successive leader fail-overs).
* **KIP-101 before KIP-279** (Kafka 0.11 to 1.1, the ``no-kip-279`` variant): the answer
  is an offset only, computed from the *requested* epoch: the log end if it is the
  leader's latest epoch, otherwise the start offset of the first epoch *greater* than the
  requested one, and "undefined" (-1) if the requested epoch is older than every epoch the
  leader knows or newer than all of them. If the leader never had the requested epoch the
  offset belongs to a different epoch lineage, and a follower that truncates to it can keep
  records the leader does not have at the same offsets: the logs diverge (KAFKA-6361). We
  return the requested epoch beside that offset, as the old response carried no epoch.

**Where it is persisted.** On its own (tests, tools) a cache rewrites its
``leader-epoch-checkpoint`` atomically on every change. A log opened by the broker's log
directories is given that directory's :class:`EpochJournal` instead
(``epoch_journal.LeaderEpochJournal``): every change is appended there, as a snapshot of the
whole cache, and the checkpoint file is rewritten later, off the path to leading. On load, a
journal snapshot, being newer, wins over the checkpoint file.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from floodmark.reference.log.checkpoint import (
    MalformedFileError,
    encode_entries,
    parse_entries,
    parse_int,
)
from floodmark.reference.runtime import Storage

EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int


def parse_epoch_entries(path: str, line: int, pairs: Sequence[tuple[str, str]], *,
                        one_line: bool = False) -> list[EpochEntry]:
    """Epoch entries from their text fields, or a MalformedFileError naming ``path`` and the
    line: they must be integers, not negative, epochs increasing and start offsets not
    decreasing. The first pair is on ``line``, each further pair on the next line (a
    checkpoint) or on the same one (``one_line``: a journal's snapshot)."""
    entries: list[EpochEntry] = []
    for index, (epoch_text, offset_text) in enumerate(pairs):
        at = line if one_line else line + index
        entry = EpochEntry(parse_int(path, at, epoch_text, "epoch"), parse_int(path, at, offset_text, "start offset"))
        if entry.epoch < 0 or entry.start_offset < 0:
            raise MalformedFileError(path, at, "epoch and start offset must not be negative")
        if entries and not (entry.epoch > entries[-1].epoch and entry.start_offset >= entries[-1].start_offset):
            raise MalformedFileError(path, at, "epochs must increase and start offsets must not decrease")
        entries.append(entry)
    return entries


class EpochJournal(Protocol):
    """Where the caches of one log directory persist their changes (see the module
    docstring); ``name`` is the log's directory name (``t-0``)."""

    def snapshot(self, name: str) -> tuple[EpochEntry, ...] | None:
        """The newest entries recorded for ``name``, None if the checkpoint file is current."""
        ...

    def record(self, name: str, entries: tuple[EpochEntry, ...]) -> None:
        """Make ``entries`` the cache of ``name``, durably (or at the batch's end, if deferred)."""
        ...


class LeaderEpochCache:
    """The ``(epoch, start_offset)`` sequence of one log, persisted on every change."""

    def __init__(self, storage: Storage, path: str, entries: list[EpochEntry] | None = None,
                 journal: EpochJournal | None = None) -> None:
        self.storage = storage
        self.path = path
        self.journal = journal
        self._name = posixpath.basename(posixpath.dirname(path))  # the log's directory: its journal key
        self._entries: list[EpochEntry] = list(entries or [])
        # The latest epoch in the cache, or -1 if it is empty: kept by _replace, and a plain
        # attribute, not a property, as every follower fetch asks (read-only for others).
        self.latest_epoch = self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @classmethod
    def load(cls, storage: Storage, directory: str, journal: EpochJournal | None = None) -> LeaderEpochCache:
        """The cache of the log in ``directory``: the journal's snapshot if it has one, else
        the checkpoint file; empty if neither exists yet."""
        path = posixpath.join(directory, EPOCH_CHECKPOINT_FILE)
        snapshot = journal.snapshot(posixpath.basename(directory)) if journal is not None else None
        if snapshot is not None:
            return cls(storage, path, list(snapshot), journal)
        if not storage.exists(path):
            return cls(storage, path, None, journal)
        pairs = [(fields[0], fields[1]) for fields in parse_entries(path, storage.read(path), 2)]
        return cls(storage, path, parse_epoch_entries(path, 3, pairs), journal)

    # ------------------------------------------------------------------ queries

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    def start_offset(self, epoch: int) -> int:
        """The first offset ``epoch`` wrote, or -1 if the cache does not have ``epoch``."""
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry.start_offset
        return UNDEFINED_OFFSET

    def end_offset_for(self, epoch: int, log_end: int, *, kip279: bool = True) -> tuple[int, int]:
        """Answer OffsetsForLeaderEpoch for ``epoch``: ``(epoch, end_offset)``, (-1, -1) if unknown.

        See the module docstring for the two behaviours (``kip279=False`` is ``no-kip-279``).
        """
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest_epoch:
            return epoch, log_end
        later = [e for e in self._entries if e.epoch > epoch]
        if not kip279:
            if not later or epoch < self._entries[0].epoch:
                return UNDEFINED_EPOCH, UNDEFINED_OFFSET
            return epoch, later[0].start_offset
        if not later:  # newer than anything we know (we are not the leader it thinks)
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        earlier = [e for e in self._entries if e.epoch <= epoch]
        if not earlier:  # older than everything we know: it ends where our history starts
            return epoch, later[0].start_offset
        return earlier[-1].epoch, later[0].start_offset

    # ------------------------------------------------------------------ changes

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (a leader's first append, or the
        first record of a new epoch a follower appends).

        Re-assigning the latest epoch at a later offset changes nothing. Entries the new
        one contradicts (an epoch not older, or a start offset not smaller) are removed
        first, as in current Kafka, so the cache always describes the log as it now is.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"cannot assign epoch {epoch} at offset {start_offset}")
        if self._entries and self._entries[-1].epoch == epoch and self._entries[-1].start_offset <= start_offset:
            return
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        self._replace([*kept, EpochEntry(epoch, start_offset)])

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: forget epochs starting at or after it."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._replace(kept)

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly before it and move the
        start of the epoch covering it up to it."""
        before = [e for e in self._entries if e.start_offset <= start_offset]
        if not before or (len(before) == 1 and before[0].start_offset == start_offset):
            return
        covering = EpochEntry(before[-1].epoch, start_offset)
        self._replace([covering, *self._entries[len(before):]])

    def clear(self) -> None:
        if self._entries:
            self._replace([])

    def _replace(self, entries: list[EpochEntry]) -> None:
        """The cache holds ``entries`` now: its latest epoch follows, then it is persisted."""
        self._entries = entries
        self.latest_epoch = entries[-1].epoch if entries else UNDEFINED_EPOCH
        self._persist()

    def _persist(self) -> None:
        if self.journal is not None:
            self.journal.record(self._name, tuple(self._entries))
            return
        self.storage.write_atomic(self.path, encode_epoch_entries(self._entries))


def encode_epoch_entries(entries: Sequence[EpochEntry]) -> bytes:
    """The ``leader-epoch-checkpoint`` text for ``entries``."""
    return encode_entries([(str(e.epoch), str(e.start_offset)) for e in entries])
