"""The results browser (`floodmark serve`) over a store of many runs, through real HTTP."""

from __future__ import annotations

import html
import http.client
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_fixtures import (
    HOSTILE_SCRIPT,
    get_from,
    make_minimal_run,
    make_run,
    serving,
    stop_process,
)

from floodmark.reports.server import OutsideStore, StoreServer, make_server, resolve_in_store

RUNS = 1200


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve") / "store"
    verdicts = [True, False, "unknown", None]
    for k in range(RUNS):
        day, second = divmod(k, 3600)
        stamp = f"202601{1 + day:02d}T{second // 3600 % 24:02d}{second // 60 % 60:02d}{second % 60:02d}"
        make_minimal_run(root, name=("queue-partition", "log-lin-kill")[k % 2], seed=k, stamp=stamp,
                         verdict=verdicts[k % 4], variant=("default", "no-kip-101", "unclean")[k % 3],
                         nemesis=(("partition",), ("kill", "clock"))[k % 2])
    full = make_run(root, name="hostile", seed=99999, stamp="20270101T000000", anomalies=True, hostile=True, ops=60)
    from floodmark.reports.report import write_report

    write_report(full.path)
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("top secret")
    os.symlink(outside, root / "escape")  # a symlinked directory leading out of the store
    os.symlink(outside / "secret.txt", full.path / "logs" / "leak.txt")
    return root


@pytest.fixture(scope="module")
def server(store: Path) -> Iterator[StoreServer]:
    with serving(store) as srv:
        yield srv


def get(server: StoreServer, path: str) -> tuple[int, dict[str, str], str]:
    """A raw GET: http.client sends the path exactly as given (no dot-segment cleanup)."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=120)  # generous: CI machines are shared
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read().decode("utf-8", "replace")
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body
    finally:
        conn.close()


def rows(body: str) -> list[str]:
    return re.findall(r'<tr class="run [a-z]+">.*?</tr>', body, re.S)


def test_binds_loopback_by_default(store: Path) -> None:
    srv = make_server(store, port=0)
    try:
        assert srv.server_address[0] == "127.0.0.1"
    finally:
        srv.server_close()


def test_index_lists_newest_first_colour_coded(server: StoreServer) -> None:
    status, headers, body = get(server, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert f"{RUNS + 1} runs" in body
    page = rows(body)
    assert len(page) == 50
    assert "hostile" in page[0]  # the 2027 run is the newest
    starts = re.findall(r'<td class="mono">(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)</td>', body)
    assert starts == sorted(starts, reverse=True) and len(starts) == 50
    for row in page[1:]:
        verdict = re.search(r'<tr class="run ([a-z]+)">', row)[1]  # type: ignore[index]
        assert f'<span class="badge {verdict}">' in row
    assert {re.search(r'<tr class="run ([a-z]+)">', r)[1] for r in page} == {"valid", "invalid", "unknown", "unchecked"}  # type: ignore[index]


def test_paging_walks_every_run_once(server: StoreServer) -> None:
    seen: list[str] = []
    page = 1
    while True:
        status, _, body = get(server, f"/?per=500&page={page}")
        assert status == 200
        seen += re.findall(r'href="(/store/[^"]+/)">files', body)
        if 'rel="next"' not in body:
            break
        page += 1
    assert page == 3 and len(seen) == RUNS + 1 == len(set(seen))
    status, _, body = get(server, "/?page=9999")  # past the end: clamped to the last page
    assert status == 200 and "page 25 of 25" in body


def test_filters_by_test_variant_nemesis_and_verdict(server: StoreServer) -> None:
    _, _, body = get(server, "/?test=log-lin&variant=unclean&nemesis=clock&verdict=invalid&per=500")
    found = rows(body)
    # k odd (log-lin, kill+clock), k%3==2 (unclean), k%4==1 (invalid): k = 5 mod 12
    assert len(found) == RUNS // 12
    for row in found:
        # the faults in the order every configuration lists them, whatever order the file had
        assert "log-lin-kill" in row and "unclean" in row and "clock, kill" in row and "INVALID" in row
    assert f"of {RUNS // 12} matching" in body
    _, _, body = get(server, "/?nemesis=partition&per=10&page=2")
    assert 'href="/?nemesis=partition&amp;per=10&amp;page=3"' in body  # paging keeps the filter


def test_report_and_run_files_are_served(server: StoreServer) -> None:
    status, headers, body = get(server, "/store/hostile/20270101T000000-s99999/report.html")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "x-content-type-options" in headers and "content-security-policy" in headers
    assert 'href="history.jsonl"' in body
    status, headers, body = get(server, "/store/hostile/20270101T000000-s99999/history.jsonl")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    # served verbatim but as plain text that the browser may not sniff into HTML
    assert headers["x-content-type-options"] == "nosniff" and HOSTILE_SCRIPT in body
    status, headers, body = get(server, "/store/hostile/20270101T000000-s99999/logs/n1/broker.log")
    assert status == 200 and headers["content-type"].startswith("text/plain") and headers["content-security-policy"] == "sandbox"
    status, _, body = get(server, "/store/hostile/20270101T000000-s99999/")
    assert status == 200 and 'href="history.jsonl"' in body and 'href="events/"' in body
    status, headers, _ = get(server, "/store/hostile/20270101T000000-s99999")
    assert status == 301 and headers["location"] == "/store/hostile/20270101T000000-s99999/"


def test_index_escapes_hostile_test_names(server: StoreServer) -> None:
    _, _, body = get(server, "/?test=hostile")
    assert len(rows(body)) == 1
    _, _, body = get(server, "/?test=" + "%3Cscript%3Ealert(1)%3C/script%3E")
    assert "<script>alert(1)" not in body and "&lt;script&gt;alert(1)" in body


@pytest.mark.parametrize("path", [
    "/store/../../../etc/passwd",
    "/store/%2e%2e/%2e%2e/etc/passwd",
    "/store/hostile/..%2f..%2f..%2fetc%2fpasswd",
    "/store/%2fetc%2fpasswd",
    "/store/escape/secret.txt",
    "/store/hostile/20270101T000000-s99999/logs/leak.txt",
    "/store/hostile/%00",
])
def test_paths_outside_the_store_are_refused(server: StoreServer, path: str) -> None:
    status, _, body = get(server, path)
    assert status in (400, 403), (path, status)
    assert "top secret" not in body and "root:" not in body


def test_symlinks_out_of_the_store_are_not_listed(server: StoreServer) -> None:
    _, _, body = get(server, "/store/")
    assert "escape" not in body and "hostile/" in body
    _, _, body = get(server, "/store/hostile/20270101T000000-s99999/logs/")
    assert "leak.txt" not in body and "n1/" in body


def test_resolve_in_store_rules(store: Path) -> None:
    root = store.resolve()
    assert resolve_in_store(root, "hostile") == root / "hostile"
    assert resolve_in_store(root, "") == root
    for bad in ("..", "a/../../x", "escape", "%2e%2e/x", "x\\..\\y"):
        with pytest.raises(OutsideStore):
            resolve_in_store(root, bad)


def test_unknown_pages_are_404(server: StoreServer) -> None:
    assert get(server, "/nope")[0] == 404
    assert get(server, "/store/hostile/missing.txt")[0] == 404


def test_serve_command_rejects_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from floodmark.cli import main

    assert main(["serve", "--store", str(tmp_path / "missing")]) == 254
    assert "no such directory" in capsys.readouterr().err
    assert main(["serve", "--store", str(tmp_path), "--port", "70000"]) == 254


# --- a store with damaged runs: each one noted, none breaks the index or the server -----------

DAMAGED = {  # test name -> (what to write, over which file, words its problem note must carry)
    "deep-results": ("results.json", "[" * 100_000 + "]" * 100_000, "results.json unreadable: nested more than 100 levels deep"),
    # as the report reads it: deeper than the checkers ever write is no results file
    "deep-results-object": ("results.json", '{"valid": true, "variant": ' + "[" * 500 + "]" * 500 + "}",
                            "results.json unreadable: nested more than 100 levels deep"),
    "odd-results-object": ("results.json", '{"valid": true, "checkers": {"stats": {"valid": true}}, "variant": '
                           + "[" * 50 + "]" * 50 + "}", None),
    "list-results": ("results.json", "[1, 2]", "results.json unreadable: expected a JSON object, got a list"),
    "truncated-results": ("results.json", '{"valid": false, "seed": 3, "checkers": {"durability": {"va', "results.json unreadable: "),
    "garbage-results": ("results.json", bytes(range(256)) * 8, "results.json unreadable: "),
    "deep-yaml-flow": ("test.yaml", "nemesis: " + "[" * 100_000 + "]" * 100_000, "test.yaml unreadable: not valid YAML (line 1, column "),
    "deep-yaml-block": ("test.yaml", "- " * 100_000 + "x\n", "test.yaml unreadable: not valid YAML (line 1, column "),
    "garbage-yaml": ("test.yaml", bytes(range(255, -1, -1)) * 8, "test.yaml unreadable: "),
    "control-yaml": ("test.yaml", "seed: \x00\x07\n", "test.yaml unreadable: "),
    "list-yaml": ("test.yaml", "- partition\n- kill\n", "test.yaml unreadable: expected a mapping, got a list"),
}


@pytest.fixture(scope="module")
def damaged_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("damaged") / "store"
    for k in range(3):
        make_minimal_run(root, name="good", seed=k, stamp=f"2026010{k + 1}T000000", verdict=(True, False, None)[k])
    for k, (name, (file, content, _)) in enumerate(DAMAGED.items()):
        unchecked = file == "test.yaml"  # test.yaml is read only when there is no results.json
        run = make_minimal_run(root, name=name, seed=100 + k, stamp=f"202602{k + 1:02d}T000000",
                               verdict=None if unchecked else True)
        target = run / file
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return root


@pytest.fixture(scope="module")
def damaged_server(damaged_store: Path) -> Iterator[tuple[subprocess.Popen[str], str, int]]:
    """`floodmark serve` in its own process: a crash there must show as a dead process, not kill pytest."""
    script = ("import sys; from pathlib import Path; from floodmark.reports.server import serve; "
              "serve(Path(sys.argv[1]), '127.0.0.1', 0, announce=lambda url: print(url, flush=True))")
    proc = subprocess.Popen([sys.executable, "-c", script, str(damaged_store)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        match = re.fullmatch(r"http://([\d.]+):(\d+)/", url)
        assert match, (url, proc.poll())
        yield proc, match[1], int(match[2])
    finally:
        stop_process(proc, signal.SIGINT)  # serve() stops cleanly on an interrupt


def test_damaged_runs_are_noted_and_the_index_still_answers(
        damaged_server: tuple[subprocess.Popen[str], str, int]) -> None:
    proc, host, port = damaged_server
    for _ in range(2):  # the second request is answered from the index's cache: still no failure
        status, body = get_from(host, port, "/?per=500")
        assert status == 200, body[:500]
        assert f"{3 + len(DAMAGED)} runs" in body
        by_test = {re.search(r'href="/store/([^/"]+)/', row)[1]: row for row in rows(body)}  # type: ignore[index]
        assert set(by_test) == {"good", *DAMAGED}
        good = [row for row in rows(body) if 'href="/store/good/' in row]
        assert len(good) == 3 and not any('class="problem"' in row for row in good)
        for name, (_, _, note) in DAMAGED.items():
            row = by_test[name]
            if note is None:  # readable, only odd: listed without a problem and without its nested value
                assert 'class="problem"' not in row and "[[[" not in row
                continue
            shown = re.search(r'<span class="problem">(.*?)</span>', row, re.S)
            assert shown and html.unescape(shown[1]).startswith(note), (name, row)
            if name.startswith("deep-yaml"):
                assert "nested more than 100 levels deep" in shown[1]
        assert proc.poll() is None  # the server process is alive
    status, body = get_from(host, port, "/?verdict=unchecked&per=500")
    # one good run never checked, the five with a damaged test.yaml, and the five whose results.json is no results
    assert status == 200 and len(rows(body)) == 11
    status, body = get_from(host, port, "/store/deep-results/20260201T000000-s100/")  # its files are still browsable
    assert status == 200 and 'href="results.json"' in body
    assert proc.poll() is None
