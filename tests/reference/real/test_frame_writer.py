"""FrameWriter: frames queued in one turn of the event loop leave in one write, in order."""

from __future__ import annotations

import asyncio
from typing import Any

from floodmark.reference.real.transport import FrameWriter


class RecordingWriter:
    """Stands in for an asyncio.StreamWriter: keeps every write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False
        self.transport: Any = self

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0


def test_frames_of_one_turn_are_joined_and_later_ones_sent_apart() -> None:
    async def go() -> list[bytes]:
        writer = RecordingWriter()
        frames = FrameWriter(writer)  # type: ignore[arg-type]
        for frame in (b"a", b"bb", b"ccc"):
            frames.write(frame)
        assert writer.writes == []  # nothing leaves before the turn ends
        await asyncio.sleep(0)
        frames.write(b"dddd")
        await asyncio.sleep(0)
        return writer.writes

    assert asyncio.run(go()) == [b"abbccc", b"dddd"]


def test_frames_queued_on_a_closing_connection_are_dropped() -> None:
    async def go() -> list[bytes]:
        writer = RecordingWriter()
        frames = FrameWriter(writer)  # type: ignore[arg-type]
        frames.write(b"lost")
        writer.closing = True
        await asyncio.sleep(0)
        return writer.writes

    assert asyncio.run(go()) == []
