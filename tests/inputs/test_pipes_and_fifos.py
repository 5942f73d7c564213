"""Pipes and FIFOs as inputs: a pipe is read as its writer writes; a named FIFO no process has
open for writing is said to be waited on at once, not waited on in silence for ten seconds."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from floodmark.errors import SourceError
from floodmark.inputs.sources import read_source

REPO = Path(__file__).resolve().parents[2]
SCHEDULE = json.dumps({"time_limit": 1, "faults": []})


def floodmark(*args: str) -> list[str]:
    return [sys.executable, "-m", "floodmark", *args]


def test_a_named_fifo_with_no_writer_is_said_to_be_waited_on_then_read_when_one_comes(tmp_path: Path) -> None:
    fifo = tmp_path / "schedule.json"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.Popen(floodmark("run", "--cluster", "sim", "--schedule", str(fifo), "--store",
                                     str(tmp_path / "store")), stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert run.stderr is not None
        # (before, it said nothing and gave up after 10 s: its first line was that error; the
        # bound is the interpreter's start on a loaded machine, not the wait)
        ready, _, _ = select.select([run.stderr], [], [], 60.0)
        assert ready
        said = run.stderr.readline()
        assert said == (f"floodmark: {fifo}: a FIFO no process has open for writing yet; waiting up to 10 s "
                        "for one\n"), said
        fifo.write_text(SCHEDULE)  # a writer after the reader: what a named FIFO is for
        assert run.wait(timeout=120) == 0, run.stderr.read()
    finally:
        run.kill()
        run.wait()


def test_a_named_fifo_no_writer_opens_is_refused_after_the_wait_it_stated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(SourceError, match=r"^.*/f: a FIFO no process opened for writing within 0.2 s \(no writer\)$"):
        read_source(fifo, writer_wait=0.2)
    assert capsys.readouterr().err == (f"floodmark: {fifo}: a FIFO no process has open for writing yet; "
                                       "waiting up to 0.2 s for one\n")


def test_a_pipe_is_read_as_its_writer_writes_and_its_end_is_not_waited_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    read, write = os.pipe()
    try:
        with pytest.raises(SourceError, match="its writer wrote nothing within 0.2 s"):
            read_source(f"/dev/fd/{read}", writer_wait=0.2)
        os.write(write, b"abc")
        os.close(write)
        assert read_source(f"/dev/fd/{read}", writer_wait=10) == b"abc"
        started = time.monotonic()
        assert read_source(f"/dev/fd/{read}", writer_wait=10) == b""  # its writer gone: nothing more
        assert time.monotonic() - started < 5
    finally:
        os.close(read)
    assert capsys.readouterr().err == ""


def test_process_substitution_is_read_as_it_is_written(tmp_path: Path) -> None:
    schedule = tmp_path / "s.json"
    schedule.write_text(SCHEDULE)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for writer in (f"cat {schedule}", f"sleep 1; cat {schedule}"):
        done = subprocess.run(["bash", "-c", f'"$@" --schedule <({writer})', "bash",
                               *floodmark("run", "--cluster", "sim", "--store", str(tmp_path / "store"))],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0 and "FIFO" not in done.stderr, done.stderr


def test_a_kernel_file_that_would_wait_for_data_is_refused_not_waited_on() -> None:
    # (the third hunt, 2026-11-28: ``check /proc/kmsg`` as root waited for ever: a regular
    # file of size 0 whose read blocks until the kernel logs something)
    kmsg = Path("/proc/kmsg")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(floodmark("check", str(kmsg)), capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 254 and done.stderr.count("\n") == 1, done.stderr
    if os.access(kmsg, os.R_OK):  # as root, where it would have waited
        assert ("floodmark check: error: /proc/kmsg: cannot read: it has no data now and would wait for some "
                "(a kernel file such as /proc/kmsg), not a history") in done.stderr
    else:
        assert "floodmark check: error: /proc/kmsg: cannot read" in done.stderr
