"""The results browser shows a verdict only on the files it judged, as ``report`` does.

The index took results.json's verdict on faith: a run whose history or node events were
edited, cut or replaced after ``check`` judged them was listed as a green "valid" while its
own report said "not checked". It now asks what ``check`` and ``report`` ask (results.json's
``judged_files``, else digest.json) and lists such a run unchecked, saying which files changed.
The digests are cached by the files' identity, so a page load hashes only what changed.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_fixtures import get_from, make_minimal_run, serving

from floodmark.reports import judged_files
from floodmark.reports.run_index import RunIndex, summarize
from floodmark.run_dirs.run_digests import compute_digest
from floodmark.run_dirs.rundir import RunDir

STAMP = "20260101T000000"


def _judged_run(store: Path, seed: int = 1, *, record: str = "judged_files") -> Path:
    """A valid run whose results.json (``record="judged_files"``) or digest.json (``"digest"``)
    records the files it judged."""
    run = make_minimal_run(store, name="judged", seed=seed, stamp=STAMP, verdict=True)
    digests = compute_digest(RunDir(run))
    if record == "digest":
        (run / "digest.json").write_text(json.dumps(digests))
    else:
        results = json.loads((run / "results.json").read_text())
        (run / "results.json").write_text(json.dumps({**results, "judged_files": digests}))
    return run


def test_a_run_still_holding_the_files_it_judged_keeps_its_verdict(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for record in ("judged_files", "digest"):
        run = _judged_run(store, seed=1 if record == "digest" else 2, record=record)
        summary = summarize(RunDir(run), store)
        assert (summary.verdict, summary.problem) == (True, None)


def test_a_history_changed_since_it_was_judged_is_listed_unchecked(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = _judged_run(store)
    with open(run / "history.jsonl", "a") as f:
        f.write(json.dumps({"index": 2, "time": 3000, "type": "invoke", "process": 0, "f": "send",
                            "value": {"topic": "t0", "partition": 0, "value": "x"}}) + "\n")
    summary = summarize(RunDir(run), store)
    assert summary.verdict is None
    assert summary.problem == (f"results.json: its verdict (valid) is not of the files the run holds now "
                               f"(history.jsonl changed since {run / 'results.json'} judged it): shown unchecked "
                               "until checked again")


def test_node_events_differing_from_the_digest_are_listed_unchecked(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = _judged_run(store, record="digest")
    (run / "events").mkdir()
    (run / "events" / "n1.jsonl").write_text('{"seq": 0}\n')  # events the digest never saw
    summary = summarize(RunDir(run), store)
    assert summary.verdict is None and summary.problem is not None
    assert f"events/n1.jsonl differs from what {run / 'digest.json'} records" in summary.problem


def test_a_torn_history_nothing_vouches_for_is_listed_unchecked(tmp_path: Path) -> None:
    """As the report shows it: a history whose last line is cut short, with no record of what
    was judged, may not be the history the verdict was of. One whose last line is whole is not."""
    store = tmp_path / "store"
    run = make_minimal_run(store, name="torn", seed=1, stamp=STAMP, verdict=True)
    assert summarize(RunDir(run), store).verdict is True
    history = run / "history.jsonl"
    history.write_bytes(history.read_bytes() + b'{"index": 2, "time": 30')
    summary = summarize(RunDir(run), store)
    assert summary.verdict is None
    assert summary.problem == ("results.json: its verdict (valid) is not of the files the run holds now "
                               "(history.jsonl's last line is cut short, and nothing records which history was "
                               "judged): shown unchecked until checked again")
    history.write_bytes(history.read_bytes() + b'0, "type": "invoke", "process": 0, "f": "send", "value": 1}')
    assert summarize(RunDir(run), store).verdict is True  # whole, though it lacks its newline


def _judged_later(run: Path) -> None:
    """results.json written again a clock tick after the run's files, as a check writes it
    after reading them (the index then trusts it without hashing)."""
    time.sleep(0.02)  # past the kernel's tick, which file change times have as their grain
    results = run / "results.json"
    results.write_text(results.read_text() + "\n")


def test_the_index_hashes_only_runs_whose_files_changed_after_they_were_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judged_files, "RACY_NS", 0)  # files written a moment ago are trusted here
    store = tmp_path / "store"
    runs = [_judged_run(store, seed=seed) for seed in range(20)]
    for run in runs:
        _judged_later(run)
    index = RunIndex(store)
    assert {r.verdict for r in index.runs()} == {True}
    assert index.judged.hashed == 0  # every results.json newer than its files: a stat each
    # a history edited and its modification time set back: seen, and only that run hashed
    history = runs[5] / "history.jsonl"
    before = history.stat()
    history.write_bytes(history.read_bytes().replace(b'"time": 2000', b'"time": 2001'))
    os.utime(history, ns=(before.st_atime_ns, before.st_mtime_ns))
    listed = {r.name: r for r in index.runs()}
    assert listed[runs[5].name].verdict is None and index.judged.hashed == 1
    assert [name for name, r in listed.items() if r.verdict is not True] == [runs[5].name]
    index.runs()
    assert index.judged.hashed == 1  # then cached by the files' identity
    # the judged bytes put back: hashed once more, and valid again
    history.write_bytes(history.read_bytes().replace(b'"time": 2001', b'"time": 2000'))
    assert {r.verdict for r in index.runs()} == {True} and index.judged.hashed == 2


def test_an_event_file_removed_or_added_after_the_check_is_seen_without_hashing_the_rest(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = make_minimal_run(store, name="judged", seed=1, stamp=STAMP, verdict=True)
    (run / "events").mkdir()
    (run / "events" / "n1.jsonl").write_text('{"seq": 0}\n')
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").write_text(json.dumps({**results, "judged_files": compute_digest(RunDir(run))}))
    _judged_later(run)
    assert summarize(RunDir(run), store).verdict is True
    (run / "events" / "n1.jsonl").rename(run / "n1.jsonl.kept")  # its change time stays old
    summary = summarize(RunDir(run), store)
    assert summary.verdict is None and "events/n1.jsonl" in (summary.problem or "")
    (run / "n1.jsonl.kept").rename(run / "events" / "n1.jsonl")
    (run / "events" / "n2.jsonl").write_text("")
    assert summarize(RunDir(run), store).verdict is None


def test_a_link_put_in_place_of_a_judged_history_is_seen(tmp_path: Path) -> None:
    """A link to another run's older history: the target's change time is old, the link's is not."""
    store = tmp_path / "store"
    other = _judged_run(store, seed=2)
    (other / "history.jsonl").write_bytes((other / "history.jsonl").read_bytes() + b"\n")
    run = _judged_run(store, seed=1)
    _judged_later(run)
    history = run / "history.jsonl"
    history.unlink()
    history.symlink_to(other / "history.jsonl")
    summary = summarize(RunDir(run), store)
    assert summary.verdict is None and "history.jsonl changed since" in (summary.problem or "")


def test_files_changed_a_moment_ago_are_hashed_on_each_look(tmp_path: Path) -> None:
    """Two writes of one size within a tick of the clock can leave a file's times as they were:
    a run whose files changed within RACY_NS is hashed again, not taken from the cache."""
    store = tmp_path / "store"
    run = _judged_run(store)
    time.sleep(0.02)
    history = run / "history.jsonl"
    history.write_bytes(history.read_bytes())  # the same bytes, written after results.json
    index = RunIndex(store)
    assert index.runs()[0].verdict is True
    index.runs()
    assert index.judged.hashed == 2


def test_the_served_index_says_a_changed_run_is_not_checked(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = _judged_run(store)
    (run / "history.jsonl").write_text("")
    with serving(store) as srv:
        status, body = get_from("127.0.0.1", srv.server_address[1], "/")
    assert status == 200
    assert "history.jsonl changed since" in body and "shown unchecked until checked again" in body
    assert 'class="badge valid"' not in body
    with serving(store) as srv:
        status, body = get_from("127.0.0.1", srv.server_address[1], "/?verdict=unchecked")
    assert "judged" in body and "history.jsonl changed since" in body


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.integers(0, 10_000), st.binary(min_size=0, max_size=3), st.booleans()),
                      min_size=1, max_size=6))
def test_the_index_shows_the_verdict_exactly_when_the_bytes_are_those_judged(
        edits: list[tuple[int, bytes, bool]]) -> None:
    """Whatever sequence of edits (some putting the judged bytes back, some setting the
    modification time back), one long-lived index lists the run valid exactly when its
    history is, byte for byte, the one judged."""
    with tempfile.TemporaryDirectory() as tmp:  # a fresh store per example
        store = Path(tmp) / "store"
        run = _judged_run(store)
        history = run / "history.jsonl"
        judged = history.read_bytes()
        index = RunIndex(store)
        assert index.runs()[0].verdict is True
        for at, insert, restore in edits:
            before = history.stat()
            now = history.read_bytes()
            data = judged if restore else now[:at % (len(now) + 1)] + insert + now[at % (len(now) + 1):]
            history.write_bytes(data)
            os.utime(history, ns=(before.st_atime_ns, before.st_mtime_ns))  # as a copy keeping times does
            [summary] = index.runs()
            assert (summary.verdict is True) == (data == judged), (data, summary.problem)
