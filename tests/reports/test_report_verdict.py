"""The report's overall verdict is one it can trust (audit F08).

``results.json`` is only read by the report, so the report must not take its top line on
faith: a file that contradicts itself (an overall "valid" over an invalid checker) or whose
checkers' entries are not judgements (a checker that is a list, anomalies that are a
string, anomaly entries that are not objects) is shown unchecked, with one warning naming
results.json and what is wrong, and exit 254; malformed anomalies are notes, not a crash.
A history whose last line is cut short is said on the page and on stderr, and its run is
not shown valid unless digest.json shows that results.json judged these very bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_fixtures import make_minimal_run, make_run

from floodmark.cli import main
from floodmark.reports.report import write_report
from floodmark.reports.run_data import load_run
from floodmark.reports.run_index import summarize
from floodmark.run_dirs.run_digests import compute_digest
from floodmark.run_dirs.rundir import RunDir


def _title(html: str) -> str:
    found = re.search(r"<title>([^<·]*)", html)
    assert found is not None
    return found.group(1).strip()


def _report(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[str]]:
    """``floodmark report RUN``: its exit code, the page's verdict and its warning lines."""
    code = main(["report", str(run)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert all(line.startswith("floodmark report: warning: ") for line in lines)
    return code, _title((run / "report.html").read_text()), lines


def _results(run: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run / "results.json").read_text())
    return loaded


def _write(run: Path, results: Any) -> None:
    (run / "results.json").write_text(json.dumps(results))


def test_a_consistent_run_is_still_shown_valid_without_a_warning(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "store", ops=80).path
    assert _report(run, capsys) == (0, "valid", [])


def test_a_run_that_failed_before_it_was_checked_is_shown_unknown_without_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # What the runner writes when the run itself failed: no checker, "unknown" and the error.
    run = make_run(tmp_path / "store", ops=80).path
    _write(run, {**_results(run), "valid": "unknown", "checkers": {}, "error": "RuntimeError: the cluster died"})
    assert _report(run, capsys) == (0, "unknown", [])
    assert summarize(RunDir(run), run.parent).verdict == "unknown"


def test_the_results_browser_lists_a_self_contradicting_run_unchecked_as_the_report_shows_it(tmp_path: Path) -> None:
    run = make_run(tmp_path / "store", ops=80).path
    results = _results(run)
    _write(run, {**results, "checkers": {**results["checkers"], "hw": {"valid": False, "anomalies": []}}})
    summary = summarize(RunDir(run), run.parent)
    assert summary.verdict is None
    assert summary.problem is not None and summary.problem.startswith("results.json: inconsistent: its verdict is valid")


def test_an_overall_valid_over_an_invalid_checker_is_shown_unchecked(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # audit F08, run-inconsistent (well-formed anomalies: the contradiction itself is named)
    run = make_run(tmp_path / "store", ops=80).path
    results = _results(run)
    results["checkers"]["durability"]["valid"] = False
    _write(run, results)
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict) == (254, "not checked")
    assert warnings == [f"floodmark report: warning: {run / 'results.json'}: inconsistent: its verdict is valid, "
                        "but its checkers' is invalid (durability invalid): the run is shown unchecked"]


@pytest.mark.parametrize(("top", "checkers"), [(False, True), ("unknown", True), (False, "unknown"), (True, "unknown")])
def test_any_overall_verdict_its_checkers_do_not_give_is_shown_unchecked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], top: Any, checkers: Any) -> None:
    run = make_run(tmp_path / "store", ops=80).path
    results = _results(run)
    results["valid"] = top
    for entry in results["checkers"].values():
        entry["valid"] = checkers
    _write(run, results)
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict, len(warnings)) == (254, "not checked", 1)
    assert "results.json: inconsistent: " in warnings[0]


def test_the_audit_case_with_malformed_anomalies_renders_them_as_notes(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # audit F08, run-inconsistent as found: an overall valid, an invalid durability checker,
    # and anomalies that are not all objects
    run = make_run(tmp_path / "store", ops=80).path
    results = _results(run)
    results["checkers"]["durability"] = {"valid": False, "anomalies": [
        {"type": "lost-write", "op": {"index": "x"}}, 5, None], "anomaly_counts": {"lost-write": 1}, "stats": {}}
    _write(run, results)
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict) == (254, "not checked")
    assert warnings == [f"floodmark report: warning: {run / 'results.json'}: not a results file (checker "
                        "'durability': an anomaly is not an object): the run is shown unchecked"]
    html = (run / "report.html").read_text()
    assert "results.json: an anomaly is not an object: 5" in html and "an anomaly is not an object: null" in html
    assert "lost-write" in html  # the well-formed one is still listed


@pytest.mark.parametrize("entry", [
    {"valid": True, "anomalies": [{"type": "lost-write", "explanation": "acknowledged, never read"}]},
    {"valid": True, "anomalies": [], "anomaly_counts": {"lost-write": 5}},
])
def test_a_valid_checker_that_reports_anomalies_is_shown_unchecked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    entry: dict[str, Any]) -> None:
    # No checker calls a run valid over an anomaly it found: such an entry contradicts itself,
    # and the page must not say "valid" above the anomalies it lists.
    run = make_run(tmp_path / "store", ops=80).path
    results = _results(run)
    results["checkers"]["durability"] = {**results["checkers"]["durability"], **entry}
    _write(run, results)
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict) == (254, "not checked")
    assert warnings == [f"floodmark report: warning: {run / 'results.json'}: inconsistent: checker 'durability' is "
                        "valid, but it reports anomalies: the run is shown unchecked"]
    assert summarize(RunDir(run), run.parent).verdict is None  # and the results browser lists it so


@pytest.mark.parametrize(("checkers", "problem"), [
    # audit F08, run-garbage-checkers
    ({"durability": [1, 2], "queue": {"valid": True, "anomalies": "x"}}, "checker 'durability': a list, not an object"),
    ({"queue": {"valid": True, "anomalies": "x"}}, "checker 'queue': 'anomalies' is a string, not a list"),
    ({"queue": {"valid": True, "stats": []}}, "checker 'queue': 'stats' is a list, not an object"),
    ({"queue": {"valid": "yes"}}, "checker 'queue': 'valid' is not true, false or \"unknown\""),
    ({"queue": {"valid": True, "anomaly_counts": {"x": "1"}}},
     "checker 'queue': 'anomaly_counts' is not a count per anomaly type"),
    ([1], "'checkers' is [1], not an object"),
])
def test_checker_entries_of_the_wrong_shape_are_shown_unchecked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                checkers: Any, problem: str) -> None:
    run = make_run(tmp_path / "store", ops=80).path
    _write(run, {**_results(run), "valid": True, "checkers": checkers})
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict) == (254, "not checked")
    assert warnings == [f"floodmark report: warning: {run / 'results.json'}: not a results file ({problem}): "
                        "the run is shown unchecked"]


@pytest.mark.parametrize("results", [{"valid": True}, {"valid": True, "checkers": {}},
                                     {"valid": True, "checkers": None}])
def test_a_valid_no_checker_gave_is_shown_unchecked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    results: dict[str, Any]) -> None:
    run = make_run(tmp_path / "store", ops=80).path
    _write(run, results)
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict) == (254, "not checked")
    assert warnings == [f"floodmark report: warning: {run / 'results.json'}: no checker's verdict in it: "
                        "the run is shown unchecked"]


def _cut_last_line(run: Path) -> None:
    history = run / "history.jsonl"
    data = history.read_bytes()
    history.write_bytes(data[:-10])  # the last op cut short, as the audit's r_histtorn


def test_a_torn_history_is_warned_about_and_not_shown_valid(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # audit F08: the last line cut after the run was checked; no digest.json says what was judged
    generated = make_run(tmp_path / "store", ops=80)
    run = generated.path
    _cut_last_line(run)
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict) == (254, "not checked")
    assert len(warnings) == 2
    assert warnings[0].startswith(f"floodmark report: warning: {run / 'history.jsonl'}:{generated.op_count}: "
                                  "not read: the last line is cut short")
    assert warnings[1] == (f"floodmark report: warning: {run / 'results.json'}: its verdict may not be this "
                           f"history's, which is not wholly read ({run / 'digest.json'}: no such file, so nothing "
                           "records which history and node events were judged): the run is shown unchecked")
    html = (run / "report.html").read_text()
    assert 'id="warnings"' in html and "the last line is cut short" in html and "shown unchecked" in html


def test_a_torn_history_cut_after_its_digest_is_not_shown_valid(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "store", ops=80).path
    (run / "digest.json").write_text(json.dumps(compute_digest(RunDir(run))))
    _cut_last_line(run)
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict, len(warnings)) == (254, "not checked", 2)
    assert f"(history.jsonl differs from what {run / 'digest.json'} records)" in warnings[1]


def test_a_torn_history_its_digest_vouches_for_keeps_its_verdict_and_still_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the run itself ended torn, was digested and then judged: the verdict is of these bytes
    run = make_run(tmp_path / "store", ops=80).path
    _cut_last_line(run)
    (run / "digest.json").write_text(json.dumps(compute_digest(RunDir(run))))
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict, len(warnings)) == (254, "valid", 1)
    assert "history.jsonl:80: not read: the last line is cut short" in warnings[0]


def test_results_json_own_record_of_what_it_judged_decides_before_any_digest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A real cluster's run has no digest.json; its results.json records the files it judged.
    run = make_run(tmp_path / "store", ops=80).path
    _cut_last_line(run)
    results = _results(run)
    _write(run, {**results, "judged_files": compute_digest(RunDir(run))})  # judged torn, as it is now
    assert _report(run, capsys)[:2] == (254, "valid")
    _cut_last_line(run)  # cut again after it was judged
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict) == (254, "not checked")
    assert f"(history.jsonl changed since {run / 'results.json'} judged it)" in warnings[1]


def test_node_events_cut_at_a_line_end_after_the_check_are_not_shown_under_its_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # audit F09's files: whole lines, so nothing reads as torn; results.json says what it judged
    run = make_run(tmp_path / "store", ops=80).path
    _write(run, {**_results(run), "judged_files": compute_digest(RunDir(run))})
    assert _report(run, capsys)[:2] == (0, "valid")
    events = sorted((run / "events").glob("*.jsonl"))[0]
    events.write_text("".join(events.read_text().splitlines(keepends=True)[:2]))
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict) == (254, "not checked")
    assert warnings == [f"floodmark report: warning: {run / 'results.json'}: its verdict is not of the files shown "
                        f"(events/{events.name} changed since {run / 'results.json'} judged it): the run is shown "
                        "unchecked"]


def _checker_verdicts(html: str) -> list[str]:
    """The verdict of each row of the page's checker table, as shown."""
    table = html[html.index('id="checker-summary"'):]
    return re.findall(r'<span class="verdict [^"]*">([^<]*)</span>', table[:table.index("</table>")])


def test_checkers_of_a_verdict_not_shown_are_not_shown_valid_either(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # Found by hunting with a history edited after its check: the top line said "not checked",
    # yet the checker table beneath it said every checker "valid" and "No anomalies: N checkers
    # found nothing wrong", of files that are no longer the run's.
    run = make_run(tmp_path / "store", ops=80).path
    _write(run, {**_results(run), "judged_files": compute_digest(RunDir(run))})
    assert _report(run, capsys)[:2] == (0, "valid")
    assert set(_checker_verdicts((run / "report.html").read_text())) == {"valid"}
    history = run / "history.jsonl"
    history.write_text("".join(history.read_text().splitlines(keepends=True)[:-2]))
    code, verdict, _ = _report(run, capsys)
    html = (run / "report.html").read_text()
    assert (code, verdict) == (254, "not checked")
    shown = _checker_verdicts(html)
    assert shown and set(shown) == {"not checked"}
    assert "found nothing wrong" not in html
    assert "are not this run&#39;s" in html or "are not this run's" in html


@pytest.mark.parametrize("digest", [False, True])
def test_a_results_file_of_another_run_is_not_shown_as_this_run_s_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], digest: bool) -> None:
    # A results.json that records no judged_files (one written before them) is taken at
    # digest.json's word, or with no digest (a real cluster's run) at its own; one copied in
    # from another run of the same test was shown as this run's verdict, "valid" beside a
    # history it never judged. Its copy of the configuration names its run.
    run = make_run(tmp_path / "store", ops=80).path  # (a run from before run ids: it states none)
    if digest:
        (run / "digest.json").write_text(json.dumps(compute_digest(RunDir(run))))
    assert _report(run, capsys) == (0, "valid", [])  # its own
    results = _results(run)
    _write(run, {**results, "config": {**results["config"], "run_id": "0123456789abcdef"}})
    code, verdict, warnings = _report(run, capsys)
    assert (code, verdict) == (254, "not checked")
    assert warnings == [f"floodmark report: warning: {run / 'results.json'}: its verdict is not "
                        f"{'of the files shown' if digest else 'this run' + chr(39) + 's'} ({run / 'results.json'} "
                        f"names run id '0123456789abcdef', but {run / 'test.yaml'} states none: it is another "
                        "run's): the run is shown unchecked"]
    summary = summarize(RunDir(run), run.parent)  # and the results browser lists it so too
    assert summary.verdict is None and summary.problem is not None and "it is another run's" in summary.problem


def test_the_torn_history_warning_goes_to_warn_like_the_others(tmp_path: Path) -> None:
    run = make_run(tmp_path / "store", ops=80).path
    _cut_last_line(run)
    told: list[str] = []
    write_report(run, warn=told.append)
    assert told == load_run(run).warnings and len(told) == 2
    assert "not read: the last line is cut short" in told[0]


# -- arbitrary JSON in results.json -------------------------------------------------------------

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | \
    st.text(max_size=8) | st.sampled_from(["unknown", "valid", "true"])
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) |
                     st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=12)
_VERDICTS = st.sampled_from([True, False, "unknown"]) | _SCALARS
_ANOMALY = st.fixed_dictionaries({"type": st.sampled_from(["lost-write", "unseen"])},
                                 optional={"ops": st.lists(st.integers(-2, 5), max_size=2), "offsets": _JSON})
_CHECKER = st.fixed_dictionaries({}, optional={
    "valid": _VERDICTS, "anomalies": st.lists(_ANOMALY | _JSON, max_size=2) | _JSON,
    "anomaly_counts": st.dictionaries(st.text(max_size=6), st.integers(0, 3) | _JSON, max_size=2) | _JSON,
    "stats": st.dictionaries(st.text(max_size=6), _JSON, max_size=2) | _JSON}) | _JSON
_RESULTS = st.fixed_dictionaries({"valid": _VERDICTS}, optional={
    "checkers": st.dictionaries(st.sampled_from(["durability", "queue", "hw", "stats"]), _CHECKER, max_size=3) | _JSON,
    "config": _JSON, "seed": _JSON, "variant": _JSON, "notes": _JSON}) | _JSON
# and ones that are all but a trusted valid verdict, so the property also meets the ones that are
_VALID_CHECKER = st.fixed_dictionaries({"valid": st.just(True)}, optional={
    "anomalies": st.lists(st.dictionaries(st.text(max_size=4), _JSON, max_size=2), max_size=2),
    "anomaly_counts": st.dictionaries(st.text(max_size=6), st.integers(0, 3), max_size=2),
    "stats": st.dictionaries(st.text(max_size=6), _JSON, max_size=2)})
_NEARLY_VALID = st.fixed_dictionaries({"valid": st.just(True) | _VERDICTS, "checkers": st.dictionaries(
    st.sampled_from(["durability", "queue", "hw", "stats"]), _VALID_CHECKER | _CHECKER, min_size=1, max_size=3)})


def _trusted(results: Any) -> bool:
    """Whether ``results`` is a valid verdict the report may show: every checker a
    well-formed valid judgement, at least one, and the top line agreeing."""
    if not isinstance(results, dict) or results.get("valid") is not True:
        return False
    checkers = results.get("checkers")
    if not isinstance(checkers, dict) or not checkers:
        return False
    for entry in checkers.values():
        if not isinstance(entry, dict) or entry.get("valid") is not True:
            return False
        if not isinstance(entry.get("anomalies", []), list) or not isinstance(entry.get("stats", {}), dict):
            return False
        if not all(isinstance(a, dict) for a in entry.get("anomalies", [])):
            return False
        counts = entry.get("anomaly_counts", {})
        if not isinstance(counts, dict) or not all(type(v) is int for v in counts.values()):
            return False
        if entry.get("anomalies") or any(v > 0 for v in counts.values()):  # valid, yet something found
            return False
    return True


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = make_minimal_run(tmp_path_factory.mktemp("verdict") / "store", name="t", seed=1,
                           stamp="20260101T000000", verdict=True)
    (run / "test.yaml").unlink()  # so the configuration shown is results.json's copy, whatever it is
    return run


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(results=_RESULTS | _NEARLY_VALID)
def test_arbitrary_results_json_never_shows_valid_unless_it_is_a_consistent_valid_verdict(
        small_run: Path, capsys: pytest.CaptureFixture[str], results: Any) -> None:
    _write(small_run, results)
    code, verdict, warnings = _report(small_run, capsys)
    assert code in (0, 254)
    if verdict == "valid":
        assert _trusted(results), results
    if _trusted(results):  # and a verdict it can trust is shown as it is
        assert verdict == "valid"
    if code == 0:
        assert not warnings


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(["durability", "queue", "hw", "stats"]), min_size=1, max_size=4, unique=True),
       verdicts=st.lists(st.sampled_from([True, False, "unknown"]), min_size=4, max_size=4),
       top=st.sampled_from([True, False, "unknown"]))
def test_well_formed_results_show_their_verdict_exactly_when_it_is_their_checkers(
        small_run: Path, names: list[str], verdicts: list[Any], top: Any) -> None:
    from floodmark.contracts.results import merge_validity, verdict_word

    checkers = {name: {"valid": v, "anomalies": [], "anomaly_counts": {}, "stats": {}}
                for name, v in zip(names, verdicts, strict=False)}
    _write(small_run, {"valid": top, "checkers": checkers})
    data = load_run(small_run)  # (the verdict the page shows: the page itself is drawn above)
    if merge_validity(c["valid"] for c in checkers.values()) == top:
        assert (data.verdict, data.warnings) == (top, [])
    else:
        assert data.verdict is None and verdict_word(data.verdict) == "unchecked"
        assert data.warnings == [f"{small_run / 'results.json'}: inconsistent: its verdict is {verdict_word(top)}, "
                                 f"but its checkers' is {verdict_word(merge_validity(checkers_valid(checkers)))} "
                                 f"({', '.join(disagreeing(checkers))}): the run is shown unchecked"]


def checkers_valid(checkers: dict[str, Any]) -> list[Any]:
    return [c["valid"] for c in checkers.values()]


def disagreeing(checkers: dict[str, Any]) -> list[str]:
    """The checkers whose verdicts make the merged one (the first four), as the warning names them."""
    from floodmark.contracts.results import merge_validity, verdict_word

    merged = merge_validity(checkers_valid(checkers))
    return [f"{name} {verdict_word(c['valid'])}" for name, c in checkers.items() if c["valid"] == merged][:4]
