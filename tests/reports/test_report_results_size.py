"""``floodmark report`` reads a run's results.json to a bound, as the results browser does.

A results.json of gigabytes (a damaged file, or one growing without end) was read whole and
parsed: 300 MB took a gigabyte of memory before a word was shown, 2 GB exhausted it. Past
:data:`~floodmark.reports.results_file.MAX_RESULTS_BYTES` it is now not read: the run is shown
unchecked with one warning naming the file and its size, and the exit code is 254. A FIFO or
/dev/zero in its place is named at once, never waited on or read without end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_fixtures import make_minimal_run

from floodmark import results as results_file
from floodmark.reports.run_data import load_run

ROOT = Path(__file__).resolve().parents[2]
STAMP = "20260101T000000"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return make_minimal_run(tmp_path / "store", name="big", seed=1, stamp=STAMP, verdict=True)


def _report(run: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``floodmark report`` in a process of its own with bounded memory and time: a reader
    that reads without end fails the test rather than taking the test run down with it."""
    script = ("import resource, sys\n"
              "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
              "from floodmark.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", script, "report", str(run), "--out", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_results_file_past_the_bound_is_not_read(run: Path, tmp_path: Path) -> None:
    results = run / "results.json"
    verdict = results.read_bytes()
    size = results_file.MAX_RESULTS_BYTES + 1
    results.write_bytes(verdict + b" " * (size - len(verdict)))  # a valid verdict, only too large
    done = _report(run, tmp_path / "report.html")
    assert done.returncode == 254, done.stderr[-2000:]
    assert done.stderr == (f"floodmark report: warning: {results}: {size:,} bytes, more than the "
                           f"{results_file.MAX_RESULTS_BYTES:,} a results file may have: the run is shown unchecked\n")
    assert "<title>not checked ·" in (tmp_path / "report.html").read_text()


@pytest.mark.parametrize(("make", "problem"), [
    (lambda p: os.symlink("/dev/zero", p), "is not a regular file"),
    (os.mkfifo, "is a FIFO, not a file"),
])
def test_a_results_file_that_never_ends_is_named_at_once(run: Path, tmp_path: Path, make: object,
                                                         problem: str) -> None:
    (run / "results.json").unlink()
    make(run / "results.json")  # type: ignore[operator]
    done = _report(run, tmp_path / "report.html")
    assert done.returncode == 254, done.stderr[-2000:]
    assert done.stderr == (f"floodmark report: warning: {run / 'results.json'}: {problem}: "
                           "the run is shown unchecked\n")


@pytest.fixture(scope="module")
def verdict_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_minimal_run(tmp_path_factory.mktemp("size") / "store", name="any", seed=1, stamp=STAMP,
                            verdict=False)


SMALL_LIMIT = 2048  # bytes: larger than the run's results.json, small enough to pass often


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(padding=st.integers(0, 2 * SMALL_LIMIT), blank=st.sampled_from([b" ", b"\n", b"\r\n"]))
def test_a_results_file_is_read_exactly_up_to_the_bound(verdict_run: Path, padding: int, blank: bytes) -> None:
    results = verdict_run / "results.json"
    verdict = json.dumps(json.loads(results.read_text())).encode()
    data = verdict + blank * padding
    results.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(results_file, "MAX_RESULTS_BYTES", SMALL_LIMIT)
        loaded = load_run(verdict_run)
    if len(data) <= SMALL_LIMIT:
        assert (loaded.verdict, loaded.warnings) == (False, [])
    else:
        assert loaded.verdict is None and loaded.results is None
        assert loaded.warnings == [f"{results}: {len(data):,} bytes, more than the {SMALL_LIMIT:,} a results file "
                                   "may have: the run is shown unchecked"]


def test_a_huge_anomaly_type_or_explanation_is_shown_cut(tmp_path: Path) -> None:
    """An anomaly type and an explanation of 2 MB each (within the file's bound) made an
    8.7 MB report: each was copied into group headings, tables and charts. Each is now shown
    to a bound, saying how much more results.json holds."""
    run = make_minimal_run(tmp_path / "store", name="big", seed=1, stamp=STAMP, verdict=False,
                           anomaly_type="lost-" + "x" * 2_000_000)
    results = json.loads((run / "results.json").read_text())
    results["checkers"]["durability"]["anomalies"][0]["explanation"] = "why " * 500_000
    (run / "results.json").write_text(json.dumps(results))
    done = _report(run, tmp_path / "report.html")
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "report.html").read_text()
    assert len(page) < 1_000_000
    assert "characters more in results.json" in page
    assert "lost-xxxx" in page  # the type is still named, by its start


def test_thousands_of_anomaly_types_are_detailed_to_a_bound_and_all_listed(tmp_path: Path) -> None:
    """A results file naming 2,000 anomaly types, one anomaly each, made a 35 MB page in 75 s:
    every type's first anomaly was rendered in full (some twenty kilobytes of context tables
    each on a real run). The page now details at most DETAILED_IN_ALL anomalies in all, the
    types shown first taking them, and lists every other one as a compact row."""
    from floodmark.reports.anomaly_groups import DETAILED_IN_ALL

    run = make_minimal_run(tmp_path / "store", name="types", seed=1, stamp=STAMP, verdict=False)
    results = json.loads((run / "results.json").read_text())
    durability = results["checkers"]["durability"]
    durability["anomalies"] = [{"type": f"kind-{i:04}", "explanation": "lost", "topic": "t0", "partition": 0,
                                "offsets": [0], "ops": [1]} for i in range(2000)]
    durability["anomaly_counts"] = {f"kind-{i:04}": 1 for i in range(2000)}
    (run / "results.json").write_text(json.dumps(results))
    done = _report(run, tmp_path / "report.html")
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "report.html").read_text()
    assert page.count('<article class="anomaly"') == DETAILED_IN_ALL
    assert 'id="anomaly-1-1"' in page and f'id="anomaly-{DETAILED_IN_ALL}-1"' in page
    assert f'id="anomaly-{DETAILED_IN_ALL + 1}-1"' not in page
    listed = [row[0] for i in range(DETAILED_IN_ALL + 1, 2001)
              for row in json.loads(page.split(f'id="rest-{i}">', 1)[1].split("</script>", 1)[0])]
    assert listed == [1] * (2000 - DETAILED_IN_ALL)  # each remaining type's one anomaly, as a row
