"""Checkpoint files: Kafka's text format, atomic rewrites, clear errors on damage."""

from __future__ import annotations

import pytest
from storage_fixtures import StorageRoot

from floodmark.reference.log.checkpoint import (
    HIGH_WATERMARK_FILE,
    MalformedFileError,
    OffsetCheckpoint,
    encode_entries,
    parse_entries,
)
from floodmark.reference.sim.disk import SimDisk


def checkpoint(sr: StorageRoot) -> OffsetCheckpoint:
    return OffsetCheckpoint(sr.storage, sr.path(HIGH_WATERMARK_FILE))


def test_missing_file_reads_as_empty(storage_root: StorageRoot) -> None:
    assert checkpoint(storage_root).read() == {}


def test_round_trip(storage_root: StorageRoot) -> None:
    offsets = {("t1", 0): 5, ("t0", 2): 41, ("my-topic", 10): 0}
    checkpoint(storage_root).write(offsets)
    assert checkpoint(storage_root).read() == offsets
    checkpoint(storage_root).write({})
    assert checkpoint(storage_root).read() == {}


def test_file_format_is_kafkas(storage_root: StorageRoot) -> None:
    checkpoint(storage_root).write({("t1", 0): 5, ("t0", 2): 41})
    text = storage_root.storage.read(storage_root.path(HIGH_WATERMARK_FILE)).decode()
    assert text == "0\n2\nt0 2 41\nt1 0 5\n"


def test_write_is_durable_on_the_simulated_disk() -> None:
    disk = SimDisk()
    disk.make_dirs("/data")
    OffsetCheckpoint(disk, "/data/cp").write({("t0", 0): 9})
    disk.crash()
    assert OffsetCheckpoint(disk, "/data/cp").read() == {("t0", 0): 9}


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        (b"", 1, "empty file"),
        (b"7\n0\n", 1, "unsupported format version '7'"),
        (b"0\n", 2, "expected the entry count"),
        (b"0\nabc\n", 2, "expected the entry count, found 'abc'"),
        (b"0\n1\nt0 0\n", 3, "expected 3 space-separated fields, found 't0 0'"),
        (b"0\n1\nt0  0 1\n", 3, "expected 3 space-separated fields"),
        (b"0\n2\nt0 0 1\nt0 x 2\n", 4, "partition 'x' is not an integer"),
        (b"0\n1\nt0 0 1.5\n", 3, "offset '1.5' is not an integer"),
        (b"0\n1\nt0 0 -4\n", 3, "must not be negative"),
        (b"0\n2\nt0 0 1\nt0 0 2\n", 4, "t0-0 appears twice"),
        (b"0\n1\nt0 0 1\nt0 1 1\n", 4, "promises 1 entries but the file has 2"),
        (b"0\n1\n\xff 0 1\n", 1, "not UTF-8"),
    ],
)
def test_malformed_file_names_file_and_line(storage_root: StorageRoot, content: bytes, line: int,
                                            problem: str) -> None:
    path = storage_root.path(HIGH_WATERMARK_FILE)
    storage_root.storage.write_atomic(path, content)
    with pytest.raises(MalformedFileError, match=problem) as info:
        checkpoint(storage_root).read()
    assert (info.value.path, info.value.line) == (path, line)
    assert str(info.value).startswith(f"{path}: line {line}: ")
    assert isinstance(info.value, OSError)  # the broker treats it as a failing log directory


def test_fields_with_whitespace_are_refused() -> None:
    with pytest.raises(ValueError, match="whitespace"):
        encode_entries([("bad topic", "0", "1")])


def test_parse_entries_accepts_a_missing_final_newline() -> None:
    assert parse_entries("cp", b"0\n1\na 1", 2) == [["a", "1"]]
