"""`floodmark analyze` on a local Spark session over a store holding hostile runs among good
ones: each unusable run is named in one line and left out, none is counted valid, and the
analysis ends (no traceback, no hang) with exit 254. And bad arguments are refused before
Spark starts."""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import pytest
from pipeline_fixtures import write_synthetic_run
from spark_fixtures import spark  # noqa: F401

from floodmark.checkers import synthetic
from floodmark.cli import main


def _detection(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "tables" / "detection_by_variant.csv") as f:
        return {row["variant"]: row for row in csv.DictReader(f)}


def _with_variant(run: synthetic.SyntheticRun, variant: str) -> synthetic.SyntheticRun:
    assert run.config is not None
    run.config = run.config.replace(variant=variant)
    return run


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_hostile_runs_are_named_and_never_counted_valid(spark, tmp_path: Path, capsys) -> None:  # noqa: F811
    store = tmp_path / "store"
    write_synthetic_run(store, "clean", synthetic.queue_run(1, ops=200), 1)

    # Audit P7: a history emptied after its check: no op to re-check, and the results.json
    # verdict it kept (valid) was taken as the run's; floodmark check calls it unknown.
    emptied = write_synthetic_run(store, "emptied", _with_variant(synthetic.queue_run(2, ops=100), "no-kip-279"), 2)
    (emptied / "results.json").write_text(json.dumps({"valid": True, "checkers": {"durability": {"valid": True}}}))
    (emptied / "history.jsonl").write_text("")

    # Audit P5: an acknowledged offset past 64 bits; the re-check's anomaly naming it ended the
    # whole analysis in an OverflowError.
    huge = write_synthetic_run(store, "huge", _with_variant(synthetic.queue_run(3, ops=100), "unfenced-fetch"), 3)
    lines = (huge / "history.jsonl").read_text().splitlines()
    for number, line in enumerate(lines):
        op = json.loads(line)
        if op["f"] == "send" and op["type"] == "ok":
            op["value"]["offset"] += 2**64
            lines[number] = json.dumps(op)
            break
    (huge / "history.jsonl").write_text("\n".join(lines) + "\n")

    # Audit P1: a history that is a FIFO hung the analysis for ever.
    fifo = write_synthetic_run(store, "fifo", synthetic.queue_run(4, ops=50), 4)
    (fifo / "history.jsonl").unlink()
    os.mkfifo(fifo / "history.jsonl")

    # Audit P4: results.json says valid, its checker says invalid.
    lying = write_synthetic_run(store, "lying", synthetic.queue_run(5, ops=50), 5)
    (lying / "results.json").write_text(json.dumps({"valid": True, "checkers": {"durability": {"valid": False}}}))

    # Audit P6: two run directories whose names differ only in bytes that are not UTF-8.
    for seed, byte in ((6, b"\xfe"), (7, b"\xff")):
        run = write_synthetic_run(store, f"bytes{seed}", synthetic.queue_run(seed, ops=50), seed)
        os.rename(run.parent, os.path.join(os.fsencode(store), b"bytes" + byte))

    started = time.monotonic()
    assert main(["analyze", str(store), "--quiet"]) == 254
    assert time.monotonic() - started < 600
    out = capsys.readouterr()
    assert "ingested 3 run(s)" in out.out and "rejected 4" in out.out
    rejected = sorted(line for line in out.err.splitlines() if line.startswith("floodmark analyze: error: rejected "))
    assert len(rejected) == 4, out.err
    assert any("fifo" in line and "history.jsonl: is a FIFO, not a file" in line for line in rejected)
    assert any("lying" in line and "results.json: inconsistent: its verdict is valid, but its checkers' is invalid"
               in line for line in rejected)
    assert sum("its name is not UTF-8 text" in line and ("bytes\\xfe" in line or "bytes\\xff" in line)
               for line in rejected) == 2
    assert "Traceback" not in out.err
    detection = _detection(store / "_analysis")
    assert detection["no-kip-279"]["runs"] == "1" and detection["no-kip-279"]["unknown_runs"] == "1"
    # judged, not a crash: an offset past what Kafka's offsets hold is a malformed op (unknown,
    # as floodmark check says), never an anomaly made up from it
    assert detection["unfenced-fetch"]["unknown_runs"] == "1" and detection["unfenced-fetch"]["invalid_runs"] == "0"
    page = (store / "_analysis" / "summary.html").read_text()
    assert "have no verdict" in page

    # Without the re-check the recorded verdicts stand, but none from a file that is no verdict.
    assert main(["analyze", str(store), "--quiet", "--no-check"]) == 254
    assert "ingested 0 run(s), skipped 3" in capsys.readouterr().out


@pytest.mark.parametrize(("option", "make", "problem"), [
    ("--out", "file", "is a file, not a directory"),
    ("--parquet", "file", "is a file, not a directory"),
    ("--out", "under-file", "cannot use it as a directory: not a directory"),
])
def test_an_output_that_cannot_be_a_directory_is_refused_before_spark(tmp_path: Path, capsys, option: str,
                                                                      make: str, problem: str) -> None:
    """Audit C7: an --out or --parquet that was a file (or under one) ended in a traceback
    from mkdir, after Spark had started."""
    (tmp_path / "store").mkdir()
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" if make == "file" else tmp_path / "afile" / "sub"
    started = time.monotonic()
    assert main(["analyze", str(tmp_path / "store"), option, str(target)]) == 254
    assert capsys.readouterr().err == f"floodmark analyze: error: {option} {target}: {problem}\n"
    assert time.monotonic() - started < 30


def test_a_bad_master_changes_nothing(tmp_path: Path, capsys) -> None:
    """Refused before the output directories are made."""
    (tmp_path / "store").mkdir()
    assert main(["analyze", str(tmp_path / "store"), "--master", "bogus://x"]) == 254
    assert "not a Spark master URL" in capsys.readouterr().err
    assert not (tmp_path / "store" / "_analysis").exists()
