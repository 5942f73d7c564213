"""Segment format: names, record framing, and the scan that finds a segment's valid prefix."""

from __future__ import annotations

import struct

import pytest

from floodmark.reference.log.segment import (
    CorruptRecordError,
    decode_records,
    encode_record,
    parse_segment_name,
    scan,
    segment_name,
)
from floodmark.reference.protocol.messages import Record


def frames(*records: tuple[int, int, str]) -> bytes:
    return b"".join(encode_record(o, e, v.encode()) for o, e, v in records)


def test_segment_names_are_twenty_digits() -> None:
    assert segment_name(0) == "00000000000000000000.log"
    assert segment_name(1234) == "00000000000000001234.log"
    assert parse_segment_name(segment_name(987654321)) == 987654321
    for other in ["leader-epoch-checkpoint", "0000.log", "0000000000000000000a.log",
                  "00000000000000000000.log.tmp", "00000000000000000000.index"]:
        assert parse_segment_name(other) is None


def test_record_layout() -> None:
    frame = encode_record(7, 3, b"hi")
    length, _crc, offset, epoch = struct.unpack(">IIqi", frame[:20])
    assert (length, offset, epoch, frame[20:]) == (14, 7, 3, b"hi")


def test_scan_accepts_a_valid_segment() -> None:
    data = frames((10, 1, "a"), (11, 1, "bb"), (12, 3, "ccc"))
    result = scan(data, 10, -1)
    assert result.problem is None and result.valid_bytes == len(data)
    assert list(result.positions) == [0, 21, 43]
    assert result.last_epoch == 3
    assert result.epoch_starts == [(1, 10), (3, 12)]
    assert decode_records(data, "seg") == [Record(10, 1, "a"), Record(11, 1, "bb"), Record(12, 3, "ccc")]


def test_scan_of_an_empty_segment() -> None:
    result = scan(b"", 5, 2)
    assert (result.valid_bytes, result.last_epoch, result.problem) == (0, 2, None)


@pytest.mark.parametrize("cut", [1, 7, 8, 19, 20, 22])
def test_scan_stops_at_a_torn_record(cut: int) -> None:
    good = frames((0, 0, "first"))
    torn = frames((1, 0, "second"))[:cut]
    result = scan(good + torn, 0, -1)
    assert result.valid_bytes == len(good) and len(result.positions) == 1
    assert result.problem is not None and "torn" in result.problem


def test_scan_stops_at_a_crc_mismatch() -> None:
    data = bytearray(frames((0, 0, "first"), (1, 0, "second"), (2, 0, "third")))
    data[data.index(b"second")] ^= 0x01
    result = scan(bytes(data), 0, -1)
    assert len(result.positions) == 1
    assert result.problem is not None and "CRC" in result.problem


def test_scan_stops_at_an_impossible_length() -> None:
    data = frames((0, 0, "x")) + struct.pack(">II", 3, 0) + b"\x00" * 30
    result = scan(data, 0, -1)
    assert len(result.positions) == 1
    assert result.problem is not None and "impossible record length 3" in result.problem


def test_scan_checks_offsets_and_epochs() -> None:
    gap = scan(frames((0, 0, "a"), (2, 0, "b")), 0, -1)
    assert gap.problem is not None and "expected 1" in gap.problem and len(gap.positions) == 1
    wrong_base = scan(frames((5, 0, "a")), 4, -1)
    assert wrong_base.problem is not None and wrong_base.valid_bytes == 0
    backwards = scan(frames((0, 3, "a"), (1, 2, "b")), 0, -1)
    assert backwards.problem is not None and "below the previous 3" in backwards.problem
    below_previous_segment = scan(frames((9, 1, "a")), 9, 2)
    assert below_previous_segment.problem is not None


def test_decode_detects_damage_after_recovery() -> None:
    data = bytearray(frames((0, 0, "abc")))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="seg: record at byte 0"):
        decode_records(bytes(data), "seg")
