"""Every reference history in shared/data/histories gets the verdict its origin asserts."""

from __future__ import annotations

import csv
import os
import random
from pathlib import Path

import pytest

from floodmark.checkers.api import CheckInput
from floodmark.checkers.linearizability.checker import (
    LinearizableChecker,
    format_conventions,
    infer_model,
)
from floodmark.formats.detect import load_history

_REPO = Path(__file__).resolve().parents[3]
_CANDIDATES = [Path(p) for p in [os.environ.get("FLOODMARK_HISTORIES", "")] if p] + [
    _REPO / "data/histories", _REPO.parent / "shared/data/histories", Path("/work/shared/data/histories")]
HISTORIES = next((p for p in _CANDIDATES if (p / "EXPECTED.tsv").is_file()), _CANDIDATES[0])
EXPECTED = HISTORIES / "EXPECTED.tsv"

pytestmark = pytest.mark.skipif(not EXPECTED.is_file(), reason=f"reference histories not found at {HISTORIES}")


def _rows() -> list[dict[str, str]]:
    if not EXPECTED.is_file():
        return []
    with open(EXPECTED, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_expected_lists_every_history() -> None:
    rows = _rows()
    assert len(rows) >= 100
    assert all((HISTORIES / r["path"]).is_file() for r in rows)


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["path"])
def test_verdict_matches_expected(row: dict[str, str]) -> None:
    loaded = load_history(HISTORIES / row["path"])
    model = infer_model(loaded.ops)
    checker = LinearizableChecker(model=model, **format_conventions(loaded.format, model))
    result = checker.check(CheckInput(loaded.ops, time_limit=60))
    expected = row["expected"].split()[0]
    assert expected in ("linearizable", "not_linearizable")
    assert result.valid is (expected == "linearizable"), result.anomalies[:1]
    if result.valid is False:
        anomaly = result.anomalies[0]
        assert anomaly.type == "nonlinearizable"
        assert anomaly.details["unlinearizable_ops"], "an invalid verdict names the op it could not place"


def test_models_inferred_as_their_folders_say() -> None:
    expectations = {"porcupine/kv": "kv", "knossos/mutex": "mutex", "knossos/multi-register": "multi-register",
                    "knossos/cas-register": "cas-register", "porcupine/jepsen-etcd": "cas-register"}
    for row in _rows():
        folder = next(k for k in expectations if row["path"].startswith(k))
        assert infer_model(load_history(HISTORIES / row["path"]).ops) == expectations[folder], row["path"]


@pytest.mark.parametrize("row", [r for r in _rows() if r["path"].endswith(".log")], ids=lambda r: r["path"])
def test_a_text_log_spaced_otherwise_keeps_its_verdict(row: dict[str, str], tmp_path: Path) -> None:
    # Every op line re-spaced as other Jepsen versions, terminals and editors do (the readers
    # audit dropped two lines of etcd_000 that way and its verdict became linearizable).
    rng = random.Random(row["path"])
    lines = (HISTORIES / row["path"]).read_text(encoding="utf-8").splitlines()
    respaced = []
    for line in lines:
        head, dash, rest = line.partition(" - ")
        fields = rest.split("\t")
        respaced.append(head.replace("  ", rng.choice(["  ", "\t", " "])) + rng.choice([" -\t", "  - ", " -", dash])
                        + "".join(f + rng.choice(["\t", "  ", " \t"]) for f in fields[:-1]) + fields[-1])
    path = tmp_path / "respaced.log"
    path.write_text("\n".join(respaced) + "\n", encoding="utf-8")
    loaded = load_history(path)
    assert len(loaded.ops) == len(lines)
    model = infer_model(loaded.ops)
    result = LinearizableChecker(model=model, **format_conventions(loaded.format, model)).check(
        CheckInput(loaded.ops, time_limit=60))
    assert result.valid is (row["expected"].split()[0] == "linearizable")
