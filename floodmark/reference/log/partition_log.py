"""A partition's log: an append-only sequence of records, in segments, with recovery.

Offsets are dense and start at ``log_start``; ``log_end`` is the offset the next record gets.
A leader appends values with its leader epoch (``append_as_leader``); a follower appends
the leader's records unchanged (``append_as_follower``), which must continue its log
exactly: the next offset, and epochs that never go backwards. Anything else is refused with
:class:`LogAppendError`, because a follower that accepted it would silently diverge.

Durability is explicit: appends reach the storage but are durable only after ``flush``
(Kafka's model, where durability comes from replication, not from fsync). A crash may
therefore cut the active segment anywhere, even mid-record. ``PartitionLog.open`` recovers:
it scans every segment, checks each record's CRC, offset and epoch, and truncates the log at
the first bad byte, deleting any later segments. ``recovery`` says what was cut and why.

A batch of appended records always goes into one segment: the log rolls before a batch
that would not fit, never in the middle of one.

Truncation (``truncate_to``) removes a suffix, across segment boundaries if needed, and is
made durable at once so a crash cannot bring the removed records back. The leader epoch
cache beside the log (``epoch_cache``) is kept consistent with every append and truncation.

All storage errors propagate as ``OSError``: the broker treats them as a failure of the log
directory (KIP-112).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import posixpath
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from floodmark.reference.log.epoch_cache import EpochJournal, LeaderEpochCache
from floodmark.reference.log.segment import (
    MAX_VALUE_BYTES,
    Segment,
    decode_records,
    encode_record,
    parse_segment_name,
    scan,
    segment_name,
)
from floodmark.reference.protocol.messages import Record
from floodmark.reference.runtime import Storage

DEFAULT_SEGMENT_RECORDS = 100_000
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024


class LogAppendError(ValueError):
    """An append that would break the log: a gap, an overlap, or an epoch going backwards."""


class OffsetOutOfRangeError(ValueError):
    """A read outside ``[log_start, log_end]``."""

    def __init__(self, offset: int, log_start: int, log_end: int) -> None:
        super().__init__(f"offset {offset} is outside the log [{log_start}, {log_end}]")
        self.offset = offset
        self.log_start = log_start
        self.log_end = log_end


@dataclass(frozen=True)
class Recovery:
    """What ``open`` removed from a log: records from ``truncated_at`` on, and why."""

    truncated_at: int
    bytes_removed: int
    segments_removed: int
    reason: str


class PartitionLog:
    """The log of one partition replica in one directory (see the module docstring)."""

    def __init__(self, storage: Storage, directory: str, segments: list[Segment],
                 epoch_cache: LeaderEpochCache, last_epoch: int, segment_records: int,
                 segment_bytes: int, recovery: Recovery | None) -> None:
        self.storage = storage
        self.directory = directory
        self.epoch_cache = epoch_cache
        self.recovery = recovery
        self.segment_records = segment_records
        self.segment_bytes = segment_bytes
        self._segments = segments
        self._bases = [s.base_offset for s in segments]  # for bisect
        # The offsets of the first record and of the next one, kept as the segments change:
        # plain attributes, not properties (read-only for everyone else), as they are read
        # many times on every fetch and an attribute costs a fraction of a property's call.
        self.log_start = segments[0].base_offset
        self.log_end = segments[-1].end_offset
        self._last_epoch = last_epoch
        self._closed = False

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, storage: Storage, directory: str, *, segment_records: int = DEFAULT_SEGMENT_RECORDS,
             segment_bytes: int = DEFAULT_SEGMENT_BYTES, journal: EpochJournal | None = None) -> PartitionLog:
        """Open (creating if needed) the log in ``directory`` and recover its tail; its epoch
        cache persists through ``journal`` if given (its log directory's), else to its own
        checkpoint file."""
        if segment_records < 1 or segment_bytes < 1:
            raise ValueError("segment_records and segment_bytes must be positive")
        storage.make_dirs(directory)
        segments, epoch_starts, last_epoch, recovery = cls._recover_segments(storage, directory)
        active = segments[-1]
        active.file = storage.open_append(active.path)
        try:
            if recovery is not None:
                active.file.fsync()  # make the recovery's truncation durable
            epoch_cache = LeaderEpochCache.load(storage, directory, journal)
            epoch_cache.truncate_from_end(active.end_offset)
            epoch_cache.truncate_from_start(segments[0].base_offset)
            for epoch, start in epoch_starts:  # rebuild what a lost or older checkpoint lacks
                if epoch > epoch_cache.latest_epoch:
                    epoch_cache.assign(epoch, start)
        except OSError:
            active.close()
            raise
        return cls(storage, directory, segments, epoch_cache, last_epoch, segment_records,
                   segment_bytes, recovery)

    @classmethod
    def _recover_segments(cls, storage: Storage, directory: str
                          ) -> tuple[list[Segment], list[tuple[int, int]], int, Recovery | None]:
        """Scan every segment in order and cut the log at the first invalid byte.

        Returns the segments kept, the (epoch, start offset) transitions seen in them, the
        last record's epoch, and what was removed (None if the log was intact).
        """
        bases = sorted(b for b in (parse_segment_name(n) for n in storage.list_dir(directory)) if b is not None)
        segments: list[Segment] = []
        epoch_starts: list[tuple[int, int]] = []
        last_epoch = -1
        for index, base in enumerate(bases):
            if segments and base != segments[-1].end_offset:
                reason = f"segment {base} does not follow on from offset {segments[-1].end_offset}"
                return segments, epoch_starts, last_epoch, cls._drop_segments(
                    storage, directory, bases[index:], segments[-1].end_offset, reason)
            segment = Segment(directory, base, array("Q"), 0)
            data = storage.read(segment.path)
            result = scan(data, base, last_epoch)
            segment.positions, segment.size = result.positions, result.valid_bytes
            segments.append(segment)
            epoch_starts.extend(result.epoch_starts)
            last_epoch = result.last_epoch
            if result.problem is not None:
                storage.truncate(segment.path, result.valid_bytes)
                later = cls._drop_segments(storage, directory, bases[index + 1:], segment.end_offset, "")
                return segments, epoch_starts, last_epoch, Recovery(
                    segment.end_offset, len(data) - result.valid_bytes + later.bytes_removed,
                    later.segments_removed, f"{segment.path}: {result.problem}")
        if not segments:
            segments.append(Segment(directory, 0, array("Q"), 0))  # a new log
        return segments, epoch_starts, last_epoch, None

    @staticmethod
    def _drop_segments(storage: Storage, directory: str, bases: Sequence[int], at: int, reason: str) -> Recovery:
        removed = 0
        for base in bases:
            path = posixpath.join(directory, segment_name(base))
            removed += storage.size(path)
            storage.remove(path)
        return Recovery(at, removed, len(bases), reason)

    # ------------------------------------------------------------------ state

    @property
    def last_epoch(self) -> int:
        """Leader epoch of the last record, -1 if the log is empty."""
        return self._last_epoch

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    # ------------------------------------------------------------------ appends

    def append_as_leader(self, values: Sequence[str], leader_epoch: int) -> int:
        """Append ``values`` in ``leader_epoch``; returns the offset of the first one."""
        self._check_open()
        if leader_epoch < max(self._last_epoch, self.epoch_cache.latest_epoch, 0):
            raise LogAppendError(
                f"{self.directory}: leader epoch {leader_epoch} is older than the log's latest "
                f"epoch {max(self._last_epoch, self.epoch_cache.latest_epoch)}")
        base = self.log_end
        if not values:
            return base
        if leader_epoch > self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(leader_epoch, base)
        self._write([(base + i, leader_epoch, v) for i, v in enumerate(values)])
        return base

    def append_as_follower(self, records: Sequence[Record]) -> None:
        """Append the leader's ``records``, which must continue this log exactly."""
        self._check_open()
        if not records:
            return
        expected, epoch = self.log_end, max(self._last_epoch, 0)
        for record in records:
            if record.offset != expected:
                raise LogAppendError(
                    f"{self.directory}: record offset {record.offset} does not continue the log "
                    f"(expected {expected}; the log ends at {self.log_end})")
            if record.leader_epoch < epoch:
                raise LogAppendError(
                    f"{self.directory}: record {record.offset} has leader epoch {record.leader_epoch}, "
                    f"older than {epoch} before it")
            expected, epoch = expected + 1, record.leader_epoch
        # Epochs this replica started but wrote nothing in (it led briefly) do not describe
        # these records; forget them before recording the leader's epochs.
        self.epoch_cache.truncate_from_end(self.log_end)
        previous = self._last_epoch
        for record in records:
            if record.leader_epoch != previous and record.leader_epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(record.leader_epoch, record.offset)
            previous = record.leader_epoch
        self._write([(r.offset, r.leader_epoch, r.value) for r in records])

    def _write(self, records: list[tuple[int, int, str]]) -> None:
        encoded: list[bytes] = []
        for offset, epoch, value in records:
            data = value.encode()
            if len(data) > MAX_VALUE_BYTES:
                raise LogAppendError(f"value at offset {offset} is {len(data)} bytes, over {MAX_VALUE_BYTES}")
            encoded.append(encode_record(offset, epoch, data))
        batch = b"".join(encoded)
        active = self._segments[-1]
        if active.record_count and (active.record_count + len(records) > self.segment_records
                                    or active.size + len(batch) > self.segment_bytes):
            active = self._roll()
        assert active.file is not None
        try:
            active.file.write(batch)
        except OSError:
            # Part of the batch may be on disk now, out of step with our positions: this log
            # must not be used again (recovery on the next open cuts the partial batch).
            self.close()
            raise
        position = active.size
        for frame in encoded:
            active.positions.append(position)
            position += len(frame)
        active.size = position
        self.log_end = active.end_offset
        self._last_epoch = records[-1][1]

    def _roll(self) -> Segment:
        old = self._segments[-1]
        assert old.file is not None
        old.file.fsync()  # a finished segment is durable: recovery only needs the active one's tail
        segment = Segment(self.directory, old.end_offset, array("Q"), 0)
        segment.file = self.storage.open_append(segment.path)
        old.close()
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        return segment

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, max_records: int, max_offset: int | None = None) -> list[Record]:
        """Up to ``max_records`` records from ``offset``, stopping before ``max_offset``
        (e.g. the high watermark for a consumer). ``offset == log_end`` gives []."""
        self._check_open()
        if not self.log_start <= offset <= self.log_end:
            raise OffsetOutOfRangeError(offset, self.log_start, self.log_end)
        end = min(self.log_end, offset + max(max_records, 0))
        if max_offset is not None:
            end = min(end, max_offset)
        records: list[Record] = []
        index = bisect.bisect_right(self._bases, offset) - 1
        while offset < end:
            segment = self._segments[index]
            stop = min(end, segment.end_offset)
            if stop > offset:
                start_position = segment.position_of(offset)
                length = segment.position_of(stop) - start_position
                data = self.storage.read(segment.path, start_position, length)
                records.extend(decode_records(data, segment.path))
                offset = stop
            index += 1
        return records

    def epoch_of(self, offset: int) -> int:
        """Leader epoch of the record at ``offset`` (a read of one record)."""
        records = self.read(offset, 1)
        if not records:
            raise OffsetOutOfRangeError(offset, self.log_start, self.log_end - 1)
        return records[0].leader_epoch

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> None:
        """Remove every record at ``offset`` and after.

        With no record to remove (``offset >= log_end``) the epochs that start at the log
        end still go, as in Kafka's ``Log.truncateTo``: they hold no record (this replica led
        them and appended nothing), and a follower that kept one would ask its leader where
        an epoch the leader never had ends, and be told the end of an older one, for ever.
        Below ``log_start`` the whole log is replaced by an empty one starting at ``offset``,
        as Kafka does.
        """
        self._check_open()
        if offset >= self.log_end:
            self.epoch_cache.truncate_from_end(self.log_end)
            return
        if offset < self.log_start:
            self.truncate_fully_and_start_at(offset)
            return
        try:
            self._remove_suffix(offset)
        except OSError:
            self.close()  # part of the suffix may be gone: the in-memory view is no longer true
            raise
        self.epoch_cache.truncate_from_end(offset)
        self._last_epoch = self.epoch_of(offset - 1) if offset > self.log_start else -1

    def _remove_suffix(self, offset: int) -> None:
        # Segments that start at or after the new end go, except the first one.
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            doomed = self._segments.pop()
            self._bases.pop()
            doomed.close()
            self.storage.remove(doomed.path)
        active = self._segments[-1]
        if active.file is None:
            active.file = self.storage.open_append(active.path)
        new_size = active.position_of(offset)
        self.storage.truncate(active.path, new_size)
        del active.positions[offset - active.base_offset:]
        active.size = new_size
        self.log_end = active.end_offset
        active.file.fsync()  # commits the truncation and removals: a crash must not undo them

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every record and restart the log, empty, at ``offset``."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot start a log at offset {offset}")
        try:
            for segment in self._segments:
                segment.close()
                self.storage.remove(segment.path)
            segment = Segment(self.directory, offset, array("Q"), 0)
            segment.file = self.storage.open_append(segment.path)
            segment.file.fsync()
        except OSError:
            self.close()
            raise
        self._segments, self._bases = [segment], [offset]
        self.log_start = self.log_end = offset
        self._last_epoch = -1
        self.epoch_cache.clear()

    # ------------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        """Make every appended record durable."""
        self._check_open()
        active = self._segments[-1]
        assert active.file is not None
        active.file.fsync()

    def close(self) -> None:
        """Close the open file; the log object is unusable afterwards (no flush: call
        ``flush`` first for a clean shutdown). Never raises."""
        if self._closed:
            return
        self._closed = True
        for segment in self._segments:
            with contextlib.suppress(OSError):  # after a disk failure there is nothing to save
                segment.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise OSError(errno.EBADF, f"the log in {self.directory} is closed", self.directory)
