"""Tests for floodmark.harness.progress: the line's content and its redraws."""

from __future__ import annotations

import asyncio
import io
import tempfile
from pathlib import Path

from floodmark.harness.progress import Progress, progress_line
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
