"""Tests for floodmark.harness.progress: the line's content and its redraws."""

from __future__ import annotations

import asyncio
import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from floodmark.harness.progress import PLAIN_WIDTH, Progress, progress_line
from floodmark.harness.recorder import Recorder


def test_progress_line_content() -> None:
    line = progress_line(12.4, 60, 1834, {"ok": 10, "fail": 2, "info": 1}, ["partition:isolate-one"])
    assert line == "[ 12s/60s]   1834 ops/s  ok 10  fail 2  info 1  | partition:isolate-one"
    assert progress_line(0, 60, 0, {}, []).endswith("| no fault")


def test_progress_counts_completions_per_second(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "h.jsonl")
    out = io.StringIO()
    progress = Progress(recorder, 60, lambda: ["kill:leader"], out, plain_interval=1.0)

    async def go() -> None:
        task = asyncio.create_task(progress.run(recorder.seconds()))
        await asyncio.sleep(0)  # let it take its starting count
        for i in range(30):
            recorder.record("invoke", i, "send", {})
            recorder.record("ok" if i % 10 else "info", i, "send", {})
        recorder.record("ok", "nemesis", "start-kill", {})  # nemesis ops are not client ops
        await asyncio.sleep(1.2)
        task.cancel()

    asyncio.run(go())
    recorder.close()
    assert "30 ops/s  ok 27  fail 0  info 3  | kill:leader" in out.getvalue()


def test_the_runner_repeats_the_final_state_only_when_it_was_not_shown() -> None:
    # `floodmark run` says the workload's final state after it ends; when the progress line
    # just printed that very state, saying it again would print the same line twice.
    from floodmark.harness.config import make_config
    from floodmark.run.runner import Runner

    def said(time_limit: float) -> list[str]:
        out = io.StringIO()
        config = make_config({"cluster": "sim", "nemesis": "none", "time_limit": time_limit, "seed": 1})
        with tempfile.TemporaryDirectory() as store:
            Runner(config, store, out=out, check=False, report=False).run()
        return [line for line in out.getvalue().splitlines() if "ops/s" in line]

    printed_last = said(10.0)  # the tenth tick is printed (every 10 s) and is the last
    assert len(printed_last) == 1 and not printed_last[0].startswith("floodmark:")
    not_printed = said(5.0)  # no tick printed: the final state is said once
    assert len(not_printed) == 1 and not_printed[0].startswith("floodmark: [  5s/5s]")


MESSAGE_FAULTS = [f"message:{how}-{what}" for how in ("drop", "delay", "duplicate", "reorder")
                  for what in ("fetch-request", "fetch-response", "leader-and-isr", "update-metadata",
                               "epoch-response", "produce-response", "heartbeat", "zookeeper-reply")]
COUNTS = "[ 12s/60s]   1834 ops/s  ok 10  fail 2  info 1  | "


def test_many_faults_in_force_are_cut_to_the_width_after_the_counts() -> None:
    line = progress_line(12.4, 60, 1834, {"ok": 10, "fail": 2, "info": 1}, MESSAGE_FAULTS, 79)
    assert len(line) == 79 and line.startswith(COUNTS + "32 in force: message:drop-"), line
    assert line.endswith("..."), line
    fits = progress_line(12.4, 60, 1834, {"ok": 10, "fail": 2, "info": 1}, ["kill:leader"], 79)
    assert fits == COUNTS + "kill:leader"  # (a line that fits is as it was)
    narrow = progress_line(12.4, 60, 1834, {"ok": 10, "fail": 2, "info": 1}, MESSAGE_FAULTS, 20)
    assert narrow == COUNTS + "32 in force: ..."  # the counts are never cut


@given(st.lists(st.text(min_size=1, max_size=120), max_size=40), st.integers(len(COUNTS) + 20, 400))
def test_the_line_never_exceeds_its_width(faults: list[str], width: int) -> None:
    line = progress_line(12.4, 60, 1834, {"ok": 10, "fail": 2, "info": 1}, faults, width)
    assert len(line) <= width and line.startswith(COUNTS), line
    assert line == COUNTS + (", ".join(faults) or "no fault") or line.endswith("...")


class Terminal(io.StringIO):
    """A terminal whose width cannot be asked (no descriptor): taken for 80 columns."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("stream", "width"), [(io.StringIO(), PLAIN_WIDTH), (Terminal(), 79)])
def test_the_line_printed_fits_the_stream_with_many_faults_in_force(
        tmp_path: Path, stream: io.StringIO, width: int) -> None:
    recorder = Recorder(tmp_path / "h.jsonl")
    progress = Progress(recorder, 60, lambda: MESSAGE_FAULTS, stream, plain_interval=1.0)

    async def go() -> None:
        task = asyncio.create_task(progress.run(recorder.seconds()))
        await asyncio.sleep(1.2)
        task.cancel()

    asyncio.run(go())
    recorder.close()
    shown = stream.getvalue().replace("\r\x1b[K", "").strip()
    assert len(shown) == width and "ops/s  ok 0  fail 0  info 0  | 32 in force: " in shown, shown
