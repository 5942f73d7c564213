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

from floodmark.contracts import results as results_file
from floodmark.reports.report import write_report
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


def _with_anomalies(run: Path, checkers: dict[str, list[dict[str, object]]]) -> None:
    results = json.loads((run / "results.json").read_text())
    for name, anomalies in checkers.items():
        counts: dict[str, int] = {}
        for a in anomalies:
            counts[str(a["type"])] = counts.get(str(a["type"]), 0) + 1
        results["checkers"][name] = {"valid": False, "anomalies": anomalies, "anomaly_counts": counts}
    (run / "results.json").write_text(json.dumps(results))


def _anomaly(kind: str, explanation: str = "lost", **more: object) -> dict[str, object]:
    return {"type": kind, "explanation": explanation, "topic": "t0", "partition": 0, "offsets": [0], "ops": [1]} | more


def test_thousands_of_anomaly_types_are_shown_to_a_bound_and_the_rest_counted(tmp_path: Path) -> None:
    """A results file naming 2,000 anomaly types, one anomaly each, made a 35 MB page in 75 s;
    detailing 200 anomalies in all, a 9 MB page (5 MB and 4.9 s on a synthetic run of 2,000
    ops), every type with a heading and a table of its own. A checker now shows its 50 most
    frequent types (the page 100 in all) and names the next 100 with their counts; the page
    says how many more there are and that results.json lists them all."""
    from floodmark.reports.anomaly_groups import TYPES_NAMED, TYPES_PER_CHECKER

    run = make_minimal_run(tmp_path / "store", name="types", seed=1, stamp=STAMP, verdict=False)
    _with_anomalies(run, {"durability": [_anomaly(f"kind-{i:04}") for i in range(2000)]})
    done = _report(run, tmp_path / "report.html")
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "report.html").read_text()
    assert len(page) < 1_000_000
    assert page.count('<article class="anomaly"') == TYPES_PER_CHECKER == 50
    assert 'id="group-50"' in page and 'id="group-51"' not in page
    assert 'Anomalies <span class="count">(2,000)</span>' in page  # every anomaly still counted
    assert '<a class="chip" href="#types-not-shown-1">1,950 more types</a>' in page
    omitted = page.split('id="types-not-shown-1">', 1)[1].split("</div>", 1)[0]
    assert ("1,950 more anomaly types of durability are not shown here: this page shows 50 types of a "
            "checker at most, 100 in all, the most frequent first. results.json lists them all") in omitted
    named = [f"kind-{i:04} × 1" for i in range(50, 50 + TYPES_NAMED)]
    assert [n for n in named if n not in omitted] == [] and "kind-0150" not in omitted
    assert "and 1,850 more types (1,850 anomalies), named only in results.json" in omitted


def test_the_page_details_and_lists_to_bounds_for_the_whole_page(tmp_path: Path) -> None:
    """Two checkers of 100 types, three anomalies each: the page details DETAILED_IN_ALL of
    them, shows TYPES_IN_ALL types, and every anomaly of a type it shows is on the page."""
    from floodmark.reports.anomaly_groups import DETAILED_IN_ALL, TYPES_IN_ALL

    run = make_minimal_run(tmp_path / "store", name="types", seed=1, stamp=STAMP, verdict=False)
    _with_anomalies(run, {name: [_anomaly(f"{name}-{i:03}") for i in range(100) for _ in range(3)]
                          for name in ("durability", "queue")})
    write_report(run, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert page.count('<article class="anomaly"') == DETAILED_IN_ALL
    assert f'id="group-{TYPES_IN_ALL}"' in page and f'id="group-{TYPES_IN_ALL + 1}"' not in page
    rows = [json.loads(page.split(f'id="rest-{i}">', 1)[1].split("</script>", 1)[0])
            for i in range(1, TYPES_IN_ALL + 1) if f'id="rest-{i}">' in page]
    assert sum(map(len, rows)) + DETAILED_IN_ALL == 3 * TYPES_IN_ALL
    assert page.count("50 more types</a>") == 2


def test_anomalies_of_a_type_past_the_row_bounds_are_counted_not_listed(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from floodmark.reports import anomaly_groups

    monkeypatch.setattr(anomaly_groups, "ROWS_PER_TYPE", 100)
    monkeypatch.setattr(anomaly_groups, "ROWS_IN_ALL", 150)
    run = make_minimal_run(tmp_path / "store", name="rows", seed=1, stamp=STAMP, verdict=False)
    _with_anomalies(run, {"durability": [_anomaly("unseen") for _ in range(250)] + [_anomaly("dup") for _ in range(90)]})
    write_report(run, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    unseen, dup = (json.loads(page.split(f'id="rest-{i}">', 1)[1].split("</script>", 1)[0]) for i in (1, 2))
    assert [r[0] for r in unseen] == list(range(9, 101))  # 8 in detail, 92 rows: 100 a type
    assert [r[0] for r in dup] == list(range(9, 9 + 150 - 92))  # what is left of the 150 rows in all
    assert ("Anomalies #101–#250 of this type (150 of 250) are not listed here: this page lists 100 anomalies "
            "of a type at most, 150 in all. results.json lists them all.") in page
    assert "Anomalies #67–#90 of this type (24 of 90) are not listed here" in page
    assert "first 8 in detail, 92 more in the table below, 150 not listed here (results.json lists them all)" in page


def test_checkers_past_the_bound_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from floodmark.reports import anomaly_groups

    monkeypatch.setattr(anomaly_groups, "CHECKERS_SHOWN", 2)
    run = make_minimal_run(tmp_path / "store", name="checkers", seed=1, stamp=STAMP, verdict=False)
    _with_anomalies(run, {f"c{i}": [_anomaly("lost")] * (i + 1) for i in range(4)})
    write_report(run, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert ("3 more checkers (3 invalid, 0 unknown, 9 anomalies in all) are not shown: this page shows 2 "
            "checkers at most, those with anomalies first. results.json lists them all.") in page
    assert 'Anomalies <span class="count">(11)</span>' in page  # durability's 1 and c0..c3's 10, shown or not


def test_a_hostile_results_file_makes_a_page_of_bounded_size(tmp_path: Path) -> None:
    """Within the 64 MB a results file may have: thousands of types, tens of thousands of
    anomalies of one type with long explanations, anomalies of thousands of fields, hundreds
    of checkers. A 28 MB page before the page-wide bounds; 1.9 MB now, under 6 MB whatever the file."""
    run = make_minimal_run(tmp_path / "store", name="hostile", seed=1, stamp=STAMP, verdict=False)
    fields = {f"field-{i}": "v" * 300 for i in range(2000)}
    _with_anomalies(run, {
        "types": [_anomaly(f"kind-{i:04}-" + "k" * 100, "e" * 1000) for i in range(3000)],
        "rows": [_anomaly("unseen", "x" * 1000) for _ in range(20_000)],
        "fields": [_anomaly("wide", **fields) for _ in range(10)],
    } | {f"checker-{i}": [_anomaly("lost")] for i in range(300)})
    done = _report(run, tmp_path / "report.html")
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "report.html").read_text()
    assert len(page) < 6_000_000
    assert "more checkers (" in page and "1,970 more fields in results.json" in page
