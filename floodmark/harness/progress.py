"""The live progress line: how the run is going, on one line of stderr.

While the workload runs the harness rewrites one line once a second:

    [ 23s/60s]  412 ops/s  ok 8950  fail 31  info 4  | partition:isolate-one

ops/s is the completion rate over the last second; ok/fail/info count client completions so
far; the last field names the faults in force. On a terminal the line is redrawn in place;
otherwise (CI logs) a line is printed every ``plain_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from floodmark.harness.recorder import Recorder


def progress_line(elapsed: float, time_limit: float, rate: float, counts: dict[str, int], faults: list[str]) -> str:
    fault_text = ", ".join(faults) if faults else "no fault"
    return (
        f"[{elapsed:3.0f}s/{time_limit:.0f}s] {rate:6.0f} ops/s  ok {counts.get('ok', 0)}  "
        f"fail {counts.get('fail', 0)}  info {counts.get('info', 0)}  | {fault_text}"
    )


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
                    dict(self.recorder.counts), self.faults(),
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
