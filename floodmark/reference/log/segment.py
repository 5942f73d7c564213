"""Log segments: the on-disk record format and one file of a partition's log.

A partition's log is a sequence of segment files, each named after the offset of its first
record in 20 decimal digits (``00000000000000000042.log``), as in Kafka, so that a
directory listing sorts them in log order. Only the last segment (the *active* one) is
appended to; when it holds ``segment_records`` records or ``segment_bytes`` bytes the log
rolls to a new one.

Every record is framed on its own, so that a crash in the middle of a write can be told
apart from good data::

    length   u32   bytes that follow the crc field (12 + value bytes)
    crc      u32   CRC-32 of the payload below
    offset   i64   payload: the record's offset,
    epoch    i32            the leader epoch of the leader that appended it,
    value    ...            and the value, UTF-8

:func:`scan` walks a segment's bytes and stops at the first frame that is cut short
(*torn*: the crash came mid-write), fails its CRC (*corrupt*), has an impossible length,
or breaks the log's invariants (an offset that is not the next one, an epoch that goes
backwards). Everything from there on is the segment's invalid tail; recovery truncates it,
so it is never served.

In memory a segment keeps the byte position of each of its records (``positions``), so
reading from an offset seeks straight to it instead of scanning the file.
"""

from __future__ import annotations

import posixpath
import struct
import zlib
from array import array
from dataclasses import dataclass, field

from floodmark.reference.protocol.messages import Record
from floodmark.reference.runtime import AppendFile

SUFFIX = ".log"
_PREFIX = struct.Struct(">II")  # length, crc
_PAYLOAD_HEADER = struct.Struct(">qi")  # offset, epoch
PREFIX_BYTES = _PREFIX.size
MIN_LENGTH = _PAYLOAD_HEADER.size
MAX_VALUE_BYTES = 1 << 20  # larger values are refused on append, and mean corruption on scan


class CorruptRecordError(OSError):
    """Bytes of a segment that was already recovered no longer check out (disk damage)."""


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """The base offset a segment file name encodes, or None if it is not a segment file."""
    stem = name[: -len(SUFFIX)]
    if name.endswith(SUFFIX) and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


def encode_record(offset: int, epoch: int, value: bytes) -> bytes:
    payload = _PAYLOAD_HEADER.pack(offset, epoch) + value
    return _PREFIX.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass
class ScanResult:
    """What :func:`scan` found in a segment's bytes."""

    positions: array  # byte position of each valid record
    valid_bytes: int  # length of the valid prefix
    last_epoch: int  # epoch of the last valid record, or the ``previous_epoch`` passed in
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)  # (epoch, first offset)
    problem: str | None = None  # why the scan stopped before the end, None if it did not


def scan(data: bytes, base_offset: int, previous_epoch: int) -> ScanResult:
    """Validate records from the start of ``data``; stop at the first invalid one."""
    positions = array("Q")
    epoch_starts: list[tuple[int, int]] = []
    position, expected_offset, last_epoch = 0, base_offset, previous_epoch
    problem = None
    while position < len(data):
        if len(data) - position < PREFIX_BYTES:
            problem = f"torn record header at byte {position}"
            break
        length, crc = _PREFIX.unpack_from(data, position)
        if not MIN_LENGTH <= length <= MIN_LENGTH + MAX_VALUE_BYTES:
            problem = f"impossible record length {length} at byte {position}"
            break
        end = position + PREFIX_BYTES + length
        if end > len(data):
            problem = f"torn record at byte {position} ({end - len(data)} bytes missing)"
            break
        payload = memoryview(data)[position + PREFIX_BYTES : end]
        if zlib.crc32(payload) != crc:
            problem = f"CRC mismatch in the record at byte {position}"
            break
        offset, epoch = _PAYLOAD_HEADER.unpack_from(payload)
        if offset != expected_offset:
            problem = f"record at byte {position} has offset {offset}, expected {expected_offset}"
            break
        if epoch < max(last_epoch, 0):
            problem = f"record {offset} has leader epoch {epoch}, below the previous {last_epoch}"
            break
        if epoch != last_epoch:
            epoch_starts.append((epoch, offset))
        positions.append(position)
        position, expected_offset, last_epoch = end, expected_offset + 1, epoch
    return ScanResult(positions, position, last_epoch, epoch_starts, problem)


def decode_records(data: bytes, path: str) -> list[Record]:
    """Decode whole records from bytes that recovery already validated (CRCs re-checked)."""
    records: list[Record] = []
    position = 0
    view = memoryview(data)
    while position < len(data):
        length, crc = _PREFIX.unpack_from(data, position)
        payload = view[position + PREFIX_BYTES : position + PREFIX_BYTES + length]
        if len(payload) != length or zlib.crc32(payload) != crc:
            raise CorruptRecordError(f"{path}: record at byte {position} is damaged")
        offset, epoch = _PAYLOAD_HEADER.unpack_from(payload)
        records.append(Record(offset, epoch, bytes(payload[MIN_LENGTH:]).decode()))
        position += PREFIX_BYTES + length
    return records


class Segment:
    """One segment file and the in-memory positions of its records."""

    def __init__(self, directory: str, base_offset: int, positions: array, size: int) -> None:
        self.base_offset = base_offset
        self.path = posixpath.join(directory, segment_name(base_offset))
        self.positions = positions
        self.size = size
        self.file: AppendFile | None = None  # open only while this is the active segment

    @property
    def record_count(self) -> int:
        return len(self.positions)

    @property
    def end_offset(self) -> int:
        """The offset after this segment's last record."""
        return self.base_offset + len(self.positions)

    def position_of(self, offset: int) -> int:
        """Byte position of ``offset``'s record (the segment size for ``end_offset``)."""
        index = offset - self.base_offset
        return self.positions[index] if index < len(self.positions) else self.size

    def close(self) -> None:
        if self.file is not None:
            file, self.file = self.file, None
            file.close()
