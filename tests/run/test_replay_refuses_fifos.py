"""A file a run wrote (test.yaml, schedule.json, digest.json) that is a FIFO in the run
directory is refused at once by repro, in one line naming it: a run never writes one, and
reading it waited ten seconds for a writer before refusing it."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

from floodmark.cli import main
from floodmark.harness.config import TestConfig
from floodmark.run.runner import Runner


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    outcome = Runner(TestConfig(cluster="sim", seed=4, nemesis=(), time_limit=2), store, out=io.StringIO(),
                     report=False).run()
    return outcome.run_dir.path


@pytest.mark.parametrize("name", ["test.yaml", "schedule.json", "digest.json"])
def test_repro_refuses_a_fifo_in_the_run_directory_at_once(
        finished_run: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "store" / "t" / "run-s4"
    run.mkdir(parents=True)
    for kept in ("test.yaml", "schedule.json", "digest.json", "history.jsonl"):
        (run / kept).write_bytes((finished_run / kept).read_bytes())
    (run / name).unlink()
    os.mkfifo(run / name)
    started = time.monotonic()
    assert main(["repro", str(run)]) == 254
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{run / name}: is a FIFO, not a file" in err[0], err
