"""The leader epoch journal: one append-only file per log directory for epoch cache changes.

Why. Becoming leader records the new epoch's start offset in the partition's leader epoch
cache, durably, before the broker acts as leader (a leader must answer OffsetsForLeaderEpoch
for its epoch even after a crash). Kept as Kafka keeps it, that is one
``leader-epoch-checkpoint`` file per partition, rewritten atomically: a file creation and a
rename each. A controller failover makes a broker leader of thousands of partitions at once,
and on a slow directory (creating a file costs ~110 us under ``/tmp`` here, 8 us under
``/work``) or a loaded machine those per-partition file operations dominated the failover
(8.2 s for 10,000 partitions). Grouping the fsyncs (``Storage.defer_syncs``) was not enough:
the creations and renames stayed on the path, one per partition.

What. Every change of a cache in this directory appends one line to
``<dir>/leader-epoch-journal``: a *snapshot* of that cache, ``<log dir name> <count>
<epoch> <start offset> ...``. A LeaderAndIsr chunk's lines are written together and synced
once (``defer`` / ``complete``), so leading costs O(1) file operations per log directory.
The per-partition checkpoint files are brought up to date later (``compact``, run by the
broker's periodic checkpoint loop in bounded steps): their files are group-committed, then
the journal is rewritten without them.

Crash safety. The rules that make any crash point recoverable:

* a line is a whole snapshot, so the last line for a log is its cache; nothing is merged;
* a journal line is never older than its log's checkpoint file: the checkpoint file is
  written only by ``compact``, with the snapshot that is also the last line in the journal,
  and the journal forgets a log only after its checkpoint file is durable;
* hence on open a journal snapshot, if any, wins over the checkpoint file; a crash in the
  middle of ``compact`` leaves both saying the same;
* an append is durable on return (``record`` outside a batch) or before the batch's answer
  (``complete``); a power loss drops only unsynced lines, which nothing has relied on. A
  torn last line (no final newline) is such a line: it is ignored, and ``open`` rewrites the
  journal (atomically) so that no later append continues it;
* a deleted log gets an empty snapshot, so a log created again under the same name never
  inherits the old one's epochs.

Anything else that does not parse (a damaged file) is a :class:`MalformedFileError`, naming
the file and line, and takes the directory offline as a malformed checkpoint does.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from floodmark.reference.log.checkpoint import FORMAT_VERSION, MalformedFileError, parse_int
from floodmark.reference.log.epoch_cache import (
    EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    encode_epoch_entries,
    parse_epoch_entries,
)
from floodmark.reference.runtime import AppendFile, Storage

EPOCH_JOURNAL_FILE = "leader-epoch-journal"
Snapshot = tuple[EpochEntry, ...]


def encode_snapshot(name: str, entries: Snapshot) -> bytes:
    """One journal line: ``name count epoch start_offset ...`` and a newline."""
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"journal key {name!r} is empty or contains whitespace")
    fields = [name, str(len(entries))]
    for e in entries:
        fields += (str(e.epoch), str(e.start_offset))
    return (" ".join(fields) + "\n").encode()


def parse_journal(path: str, data: bytes) -> dict[str, Snapshot]:
    """The last snapshot of every log in journal text; a torn (unterminated) last line is
    ignored, anything else malformed raises :class:`MalformedFileError`."""
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise MalformedFileError(path, text_line(data, e.start), f"not UTF-8 text ({e.reason})") from None
    lines = text.split("\n")
    lines.pop()  # after the final newline: empty, or a torn append never synced
    if not lines:
        raise MalformedFileError(path, 1, "empty file (expected the format version)")
    if lines[0] != str(FORMAT_VERSION):
        raise MalformedFileError(path, 1, f"unsupported format version {lines[0]!r} (expected {FORMAT_VERSION})")
    snapshots: dict[str, Snapshot] = {}
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split(" ")
        if len(fields) < 2 or not all(fields):
            raise MalformedFileError(path, number, f"expected a log name and an entry count, found {line!r}")
        count = parse_int(path, number, fields[1], "entry count")
        if count < 0 or len(fields) != 2 + 2 * count:
            raise MalformedFileError(path, number, f"the entry count {fields[1]} does not match "
                                                   f"{len(fields) - 2} fields of epochs and offsets")
        pairs = [(fields[i], fields[i + 1]) for i in range(2, len(fields), 2)]
        snapshots[fields[0]] = tuple(parse_epoch_entries(path, number, pairs, one_line=True))
    return snapshots


def text_line(data: bytes, position: int) -> int:
    """The 1-based line of byte ``position``."""
    return data.count(b"\n", 0, position) + 1


class LeaderEpochJournal:
    """One log directory's journal (``epoch_cache.EpochJournal``); see the module docstring."""

    def __init__(self, storage: Storage, directory: str, pending: dict[str, Snapshot]) -> None:
        self.storage = storage
        self.directory = directory
        self.path = posixpath.join(directory, EPOCH_JOURNAL_FILE)
        self._pending = pending  # newest snapshot of each log whose checkpoint file lags behind
        self._file: AppendFile | None = None
        self._batch: list[bytes] | None = None  # lines of a deferred batch, not yet written

    @classmethod
    def open(cls, storage: Storage, directory: str, exists: Callable[[str], bool]) -> LeaderEpochJournal:
        """Read the directory's journal (if any) and rewrite it, durably, holding only the
        snapshots of logs that ``exists`` (by name) and not a torn line."""
        path = posixpath.join(directory, EPOCH_JOURNAL_FILE)
        found = parse_journal(path, storage.read(path)) if storage.exists(path) else {}
        journal = cls(storage, directory, {name: s for name, s in found.items() if exists(name)})
        journal._rewrite()
        return journal

    # ------------------------------------------------------------------ EpochJournal

    def snapshot(self, name: str) -> Snapshot | None:
        return self._pending.get(name)

    def record(self, name: str, entries: Snapshot) -> None:
        line = encode_snapshot(name, entries)
        self._pending[name] = entries
        if self._batch is not None:
            self._batch.append(line)
            return
        self._append(line)

    def forget(self, name: str) -> None:
        """The log was deleted: an empty snapshot, so that a new log of that name starts empty."""
        self.record(name, ())

    # ------------------------------------------------------------------ batches

    def defer(self) -> None:
        """Start a batch: ``record`` keeps its lines until ``complete``."""
        if self._batch is None:
            self._batch = []

    def complete(self) -> list[OSError]:
        """Write the batch's lines and sync them, once; the failure (naming the journal) if
        that did not work, in which case nothing of the batch may be counted on."""
        batch, self._batch = self._batch or [], None
        if not batch:
            return []
        try:
            self._append(b"".join(batch))
        except OSError as error:
            return [OSError(error.errno, error.strerror or str(error), self.path)]
        return []

    def _append(self, data: bytes) -> None:
        if self._file is None:
            self._file = self.storage.open_append(self.path)
        self._file.write(data)
        self._file.fsync()

    # ------------------------------------------------------------------ compaction

    @property
    def pending(self) -> int:
        """How many logs' checkpoint files lag behind the journal."""
        return len(self._pending)

    def compact(self, limit: int) -> int:
        """Bring up to ``limit`` checkpoint files up to date (one group commit); once none
        lags any more, rewrite the journal empty. Returns how many still lag. Raises the
        first ``OSError`` (the directory has failed)."""
        if self._batch is not None:
            raise RuntimeError("compact during a deferred batch")
        names = sorted(self._pending)[:limit]
        self.storage.defer_syncs()
        try:
            for name in names:
                entries = self._pending[name]
                log_directory = posixpath.join(self.directory, name)
                if not entries and not self.storage.exists(log_directory):
                    continue  # deleted: nothing to bring up to date
                self.storage.write_atomic(posixpath.join(log_directory, EPOCH_CHECKPOINT_FILE),
                                          encode_epoch_entries(entries))
        finally:
            failures = self.storage.complete_syncs()
        if failures:
            raise failures[0]
        for name in names:
            del self._pending[name]  # durable in its checkpoint file (or deleted)
        if not self._pending:
            self._rewrite()
        return len(self._pending)

    def _rewrite(self) -> None:
        """Replace the journal, atomically, with the pending snapshots only."""
        lines = [f"{FORMAT_VERSION}\n".encode()]
        lines += [encode_snapshot(name, entries) for name, entries in sorted(self._pending.items())]
        self.close()
        self.storage.write_atomic(self.path, b"".join(lines))

    def close(self) -> None:
        """Close the append handle (reopened at the next append)."""
        if self._file is not None:
            file, self._file = self._file, None
            file.close()
