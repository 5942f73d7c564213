"""The live progress line: how the run is going, on one line of stderr.

While the workload runs the harness rewrites one line once a second:

    [ 23s/60s]  412 ops/s  ok 8950  fail 31  info 4  | partition:isolate-one

ops/s is the completion rate over the last second; ok/fail/info count client completions so
far; the last field names the faults in force. On a terminal the line is redrawn in place;
otherwise (CI logs) a line is printed every ``plain_interval`` seconds.

The line fits a width: the terminal's, less its last column (a line reaching it wraps, and
the redraw, erasing only the last row, left a copy of the rest behind every second), or
:data:`PLAIN_WIDTH` in a log. Many faults in force at once (32 message faults name a
thousand characters) are cut with "...", after how many there are; the counts before them
are never cut (a terminal narrower than them wraps them).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import TextIO

from floodmark.harness.recorder import Recorder

PLAIN_WIDTH = 160  # characters of a line where no terminal says how wide it is (CI logs)
TERMINAL_WIDTH = 80  # a terminal's, when it cannot be asked
ELLIPSIS = "..."


def progress_line(elapsed: float, time_limit: float, rate: float, counts: dict[str, int], faults: list[str],
                  width: int | None = None) -> str:
    """The line; at most ``width`` characters, if given, unless the counts alone are wider."""
    state = (f"[{elapsed:3.0f}s/{time_limit:.0f}s] {rate:6.0f} ops/s  ok {counts.get('ok', 0)}  "
             f"fail {counts.get('fail', 0)}  info {counts.get('info', 0)}  | ")
    fault_text = ", ".join(faults) if faults else "no fault"
    if width is None or len(state) + len(fault_text) <= width:
        return state + fault_text
    state += f"{len(faults)} in force: "
    return state + fault_text[:max(width - len(state) - len(ELLIPSIS), 0)] + ELLIPSIS


def line_width(stream: TextIO, tty: bool) -> int:
    """How wide a progress line on ``stream`` may be (see the module)."""
    if not tty:
        return PLAIN_WIDTH
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):  # (not a real terminal's descriptor)
        columns = 0
    return (columns or TERMINAL_WIDTH) - 1


class Progress:
    def __init__(
        self,
        recorder: Recorder,
        time_limit: float,
        faults: Callable[[], list[str]],
        stream: TextIO | None = None,
        plain_interval: float = 10.0,
    ) -> None:
        self.recorder = recorder
        self.time_limit = time_limit
        self.faults = faults
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.plain_interval = plain_interval
        self.last_line = ""  # the workload's state at the last tick
        self.shown = ""  # the last line the stream shows (a newer tick may not be printed yet)

    async def run(self, started_at: float) -> None:
        """Redraw until cancelled; ``started_at`` is the recorder's seconds at workload start."""
        previous = sum(self.recorder.counts.values())
        since_print = 0.0
        try:
            while True:
                await asyncio.sleep(1.0)
                total = sum(self.recorder.counts.values())
                self.last_line = progress_line(
                    self.recorder.seconds() - started_at, self.time_limit, float(total - previous),
                    dict(self.recorder.counts), self.faults(), line_width(self.stream, self.tty),
                )
                previous = total
                since_print += 1.0
                if self.tty:
                    self.stream.write("\r\x1b[K" + self.last_line)
                    self.stream.flush()
                    self.shown = self.last_line
                elif since_print >= self.plain_interval:
                    since_print = 0.0
                    print(self.last_line, file=self.stream, flush=True)
                    self.shown = self.last_line
        finally:
            if self.tty and self.last_line:
                self.stream.write("\n")
                self.stream.flush()
