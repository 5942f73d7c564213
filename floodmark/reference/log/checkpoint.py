"""Checkpoint files: small text files a broker rewrites whole, atomically.

Kafka keeps several per log directory or per partition, all in one text format::

    0            <- format version
    2            <- number of entries
    t0 0 41      <- one entry per line, fields separated by single spaces
    t0 1 17

The high-watermark checkpoint, ``replication-offset-checkpoint`` (one per log directory,
entries ``topic partition offset``), is :class:`OffsetCheckpoint`. The leader epoch cache
(``leader-epoch-checkpoint`` beside each log, entries ``epoch start_offset``) reuses
:func:`encode_entries` and :func:`parse_entries`.

A checkpoint is written with ``Storage.write_atomic``, so a crash leaves either the old or
the new file, never a mix. A file that does not parse anyway (damaged by hand or by a
failing disk) raises :class:`MalformedFileError`, which names the file and the line. It is
an ``OSError``, so the broker handles it as it handles any other failure of that log
directory (Kafka does the same: a corrupt checkpoint is a ``KafkaStorageException``).
"""

from __future__ import annotations

from collections.abc import Sequence

from floodmark.reference.runtime import Storage

FORMAT_VERSION = 0
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"


class MalformedFileError(OSError):
    """A checkpoint file that does not parse; says which file, which line and why."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}: line {line}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


def encode_entries(entries: Sequence[Sequence[str]]) -> bytes:
    """The checkpoint text for ``entries`` (each a tuple of space-free fields)."""
    lines = [str(FORMAT_VERSION), str(len(entries))]
    for fields in entries:
        for value in fields:
            if not value or any(c.isspace() for c in value):
                raise ValueError(f"checkpoint field {value!r} is empty or contains whitespace")
        lines.append(" ".join(fields))
    return ("\n".join(lines) + "\n").encode()


def parse_entries(path: str, data: bytes, field_count: int) -> list[list[str]]:
    """Parse checkpoint text; every entry must have ``field_count`` fields."""
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise MalformedFileError(path, 1, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    if not lines:
        raise MalformedFileError(path, 1, "empty file (expected the format version)")
    if lines[0] != str(FORMAT_VERSION):
        raise MalformedFileError(path, 1, f"unsupported format version {lines[0]!r} (expected {FORMAT_VERSION})")
    if len(lines) < 2 or not lines[1].isdigit():
        found = lines[1] if len(lines) > 1 else "end of file"
        raise MalformedFileError(path, 2, f"expected the entry count, found {found!r}")
    count = int(lines[1])
    entries = lines[2:]
    if len(entries) != count:
        raise MalformedFileError(
            path, 2 + min(len(entries), count) + 1,
            f"the header promises {count} entries but the file has {len(entries)}",
        )
    parsed: list[list[str]] = []
    for number, line in enumerate(entries, start=3):
        fields = line.split(" ")
        if len(fields) != field_count or not all(fields):
            raise MalformedFileError(
                path, number, f"expected {field_count} space-separated fields, found {line!r}"
            )
        parsed.append(fields)
    return parsed


def parse_int(path: str, line: int, text: str, what: str) -> int:
    """An integer field, or a MalformedFileError saying which field is wrong."""
    try:
        return int(text)
    except ValueError:
        raise MalformedFileError(path, line, f"{what} {text!r} is not an integer") from None


class OffsetCheckpoint:
    """A ``topic partition offset`` checkpoint file (the HW checkpoint of a log directory)."""

    def __init__(self, storage: Storage, path: str) -> None:
        self.storage = storage
        self.path = path

    def read(self) -> dict[tuple[str, int], int]:
        """The offsets in the file; empty if the file does not exist yet."""
        if not self.storage.exists(self.path):
            return {}
        entries = parse_entries(self.path, self.storage.read(self.path), 3)
        offsets: dict[tuple[str, int], int] = {}
        for line, (topic, partition_text, offset_text) in enumerate(entries, start=3):
            partition = parse_int(self.path, line, partition_text, "partition")
            offset = parse_int(self.path, line, offset_text, "offset")
            if partition < 0 or offset < 0:
                raise MalformedFileError(self.path, line, "partition and offset must not be negative")
            if (topic, partition) in offsets:
                raise MalformedFileError(self.path, line, f"{topic}-{partition} appears twice")
            offsets[(topic, partition)] = offset
        return offsets

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        """Replace the file with ``offsets`` (sorted, so equal maps give equal files)."""
        entries = [(topic, str(partition), str(offset)) for (topic, partition), offset in sorted(offsets.items())]
        self.storage.write_atomic(self.path, encode_entries(entries))
