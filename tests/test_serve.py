"""The results browser (`floodmark serve`) over a store of many runs, through real HTTP."""

from __future__ import annotations

import http.client
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_fixtures import HOSTILE_SCRIPT, make_minimal_run, make_run

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
    srv = make_server(store, "127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


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
        assert "log-lin-kill" in row and "unclean" in row and "kill, clock" in row and "INVALID" in row
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
