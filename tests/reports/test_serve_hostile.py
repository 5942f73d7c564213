"""The results browser against hostile requests and a store that changes under it.

Each test here is an input the audit of ``floodmark serve`` found mishandled: a name that is
not UTF-8, a run removed mid-scan, a file growing while it is sent, methods other than GET,
a request target that is not ASCII, a FIFO, an idle client, SIGTERM, a results.json too large
or endless to read. The Hypothesis properties hold :func:`resolve_in_store` to never naming a
path outside the store, and the index to reading any bytes as a verdict or a problem.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_fixtures import make_minimal_run, serving

from floodmark.contracts import results as results_file
from floodmark.reports.run_index import summarize
from floodmark.reports.server import OutsideStore, StoreServer, resolve_in_store
from floodmark.reports.store_paths import UnusablePath
from floodmark.run_dirs.rundir import RunDir

STAMP = "20260101T000000"
BAD_NAME = b"bad\xffname"  # a test folder whose name is not UTF-8


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    make_minimal_run(root, name="good", seed=1, stamp=STAMP, verdict=True)
    make_minimal_run(root, name="other", seed=2, stamp=STAMP, verdict=False)
    (root / "good" / f"{STAMP}-s1" / "logs").mkdir()
    return root


@pytest.fixture
def server(store: Path) -> Iterator[StoreServer]:
    with serving(store) as srv:
        yield srv


def raw(server: StoreServer, request: bytes, timeout: float = 60) -> bytes:
    """Send ``request`` as it is and read the whole answer (the server closes after one)."""
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=timeout) as s:
        s.sendall(request)
        answer = b""
        while chunk := s.recv(1 << 16):
            answer += chunk
    return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def get(server: StoreServer, path: str) -> tuple[int, str]:
    answer = raw(server, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return status_of(answer), answer.split(b"\r\n\r\n", 1)[1].decode("utf-8", "replace")


def test_a_name_that_is_not_utf8_is_listed_escaped_and_served(server: StoreServer, store: Path) -> None:
    """Audit S1: one test folder named in bytes that are not UTF-8 took the index and the
    store's listing down (400 for every page that named it)."""
    os.rename(store / "other", os.path.join(os.fsencode(store), BAD_NAME))
    status, body = get(server, "/")
    assert status == 200, body
    assert "bad\\xffname" in body and "2 runs" in body
    link = re.search(r'href="(/store/bad%FFname/[^"]+/)"', body)
    assert link, body
    status, listing = get(server, link[1])
    assert status == 200 and 'href="history.jsonl"' in listing
    status, history = get(server, link[1] + "history.jsonl")
    assert status == 200 and '"index": 0' in history
    status, listing = get(server, "/store/")
    assert status == 200 and 'href="bad%FFname/"' in listing and "bad\\xffname/" in listing


def test_a_run_removed_while_the_index_is_read_is_left_out(server: StoreServer, store: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit S2: a run deleted between listing the store and listing its test folder made the
    index answer 400 (about 1 request in 140 while runs came and went)."""
    make_minimal_run(store, name="vanishing", seed=3, stamp=STAMP, verdict=True)
    real_iterdir = Path.iterdir

    def iterdir(self: Path) -> Iterator[Path]:
        if self.name == "vanishing":
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    status, body = get(server, "/")
    assert status == 200 and "2 runs" in body, body[:300]
    status, _ = get(server, "/store/vanishing/")  # the folder itself, gone mid-listing
    assert status == 404


def test_a_growing_file_is_sent_as_long_as_its_header_says(server: StoreServer, store: Path) -> None:
    """Audit S3: a history or log appended to while it was sent went out longer than its
    Content-Length (20 MiB promised, 25 MiB sent), and one appended for ever was sent for ever."""
    log = store / "good" / f"{STAMP}-s1" / "logs" / "grow.log"
    log.write_bytes(b"x" * (32 << 20))
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=60) as s:
        s.sendall(f"GET /store/good/{STAMP}-s1/logs/grow.log HTTP/1.1\r\n\r\n".encode())
        answer = s.recv(1 << 12)
        with open(log, "ab") as f:  # the server is still sending: the file grows by 4 MiB
            f.write(b"y" * (4 << 20))
        while chunk := s.recv(1 << 20):
            answer += chunk
    head, body = answer.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"Content-Length: (\d+)", head)[1])  # type: ignore[index]
    assert length == 32 << 20 and len(body) == length and b"y" not in body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "BREW"])
def test_a_method_other_than_get_and_head_is_405_with_allow(server: StoreServer, method: str) -> None:
    """Audit S5: http.server answered 501 (a server error) with its own page."""
    answer = raw(server, f"{method} / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello".encode())
    assert status_of(answer) == 405, answer[:200]
    assert b"\r\nAllow: GET, HEAD\r\n" in answer and b"read-only" in answer


def test_a_request_target_that_is_not_ascii_is_400(server: StoreServer) -> None:
    """Audit S7: raw bytes in the request line were taken as Latin-1 and looked up (404)."""
    assert status_of(raw(server, b"GET /store/\xff\xfe HTTP/1.1\r\n\r\n")) == 400


def test_a_fifo_in_the_store_is_refused_at_once(server: StoreServer, store: Path) -> None:
    """Audit S8: a FIFO was '404 No such file'; opened, it would wait for a writer."""
    os.mkfifo(store / "good" / f"{STAMP}-s1" / "logs" / "pipe.log")
    started = time.monotonic()
    status, body = get(server, f"/store/good/{STAMP}-s1/logs/pipe.log")
    assert status == 403 and "FIFO" in body and time.monotonic() - started < 10


def test_an_idle_connection_is_closed(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit S6: a client that connected and said nothing held its thread for ever."""
    from floodmark.reports import server as server_module

    assert 0 < server_module.StoreHandler.timeout <= 120
    monkeypatch.setattr(server_module.StoreHandler, "timeout", 0.5)
    with serving(store) as srv, socket.create_connection(srv.server_address[:2], timeout=30) as s:
        assert s.recv(10) == b""  # closed by the server, not by our own timeout


def _serve_process(store: Path, *, ignore_sigint: bool = False) -> tuple[subprocess.Popen[str], int]:
    def setup() -> None:
        if ignore_sigint:  # as a background job starts
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen([sys.executable, "-m", "floodmark", "serve", "--store", str(store), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=setup,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r":(\d+)/$", line.strip())
    assert match, (line, proc.poll())
    return proc, int(match[1])


@pytest.mark.parametrize("ignore_sigint", [False, True])
def test_sigterm_stops_the_server_cleanly(store: Path, ignore_sigint: bool) -> None:
    """Audit S4: SIGTERM killed the server (exit -15) without closing it; now it stops as
    Ctrl-C does, also in a background job where SIGINT is ignored."""
    proc, port = _serve_process(store, ignore_sigint=ignore_sigint)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/")
        assert conn.getresponse().status == 200
        conn.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and err == "", err
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_empty_host_is_refused(store: Path) -> None:
    """Audit S9: --host '' bound every interface, unasked (and served until stopped)."""
    done = subprocess.run([sys.executable, "-m", "floodmark", "serve", "--store", str(store), "--host", "",
                           "--port", "0"], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 254
    assert done.stderr == "floodmark serve: error: --host: empty; give an address (0.0.0.0 for every interface)\n"


# --- results.json: read within a bound, never waited on ---------------------------------------

def problem_of(body: str, test: str) -> str | None:
    """The problem the index shows for the run of ``test`` (None if it shows none)."""
    row = next(r for r in re.findall(r'<tr class="run [a-z]+">.*?</tr>', body, re.S) if f'href="/store/{test}/' in r)
    shown = re.search(r'<span class="problem">(.*?)</span>', row, re.S)
    return shown[1] if shown else None


def test_a_results_file_larger_than_the_limit_is_that_runs_problem(server: StoreServer, store: Path) -> None:
    """results.json was read whole on every change of the store, however large: one of many GB
    stalled every index page and filled the server's memory. A verdict padded past the limit
    (with the blanks JSON allows) is now noted on its run, not read, and the others still listed."""
    run = make_minimal_run(store, name="huge", seed=3, stamp=STAMP, verdict=True)
    results = run / "results.json"
    verdict = results.read_bytes()
    with open(results, "ab") as f:
        f.write(b" " * (results_file.MAX_RESULTS_BYTES + 1 - len(verdict)))
    try:
        status, body = get(server, "/")
        assert status == 200 and "3 runs" in body
        assert problem_of(body, "huge") == (f"results.json unreadable: more than the {results_file.MAX_RESULTS_BYTES:,} "
                                            "bytes a results file may have")
        assert problem_of(body, "good") is None and problem_of(body, "other") is None
        status, body = get(server, "/?verdict=unchecked")  # no verdict is taken from it
        assert status == 200 and 'href="/store/huge/' in body
    finally:
        results.unlink()  # pytest keeps its last temporary directories: not this file in them


@pytest.mark.parametrize(("make", "problem"), [
    (lambda p: os.symlink("/dev/zero", p), "a link leading outside the store"),  # endless
    (os.mkfifo, "is a FIFO, not a file"),  # no writer: opening it to read would wait for ever
    (lambda p: os.symlink(p.name, p), "too many levels of symbolic links"),
    (lambda p: os.symlink("gone", p), "a symbolic link to nothing"),
    (os.mkdir, "is a directory, not a file"),
])
def test_a_results_file_that_is_no_regular_file_is_that_runs_problem_at_once(
        server: StoreServer, store: Path, make: Any, problem: str) -> None:
    results = store / "good" / f"{STAMP}-s1" / "results.json"
    results.unlink()
    make(results)
    started = time.monotonic()
    status, body = get(server, "/")
    assert status == 200 and "2 runs" in body and time.monotonic() - started < 10
    assert problem_of(body, "good") == f"results.json unreadable: {problem}"


@pytest.mark.parametrize(("make", "problem"), [
    (os.mkfifo, "is a FIFO, not a file"),  # no writer: reading it waited ten seconds, index locked
    (lambda p: os.symlink("/dev/zero", p), "is not a regular file"),
    (os.mkdir, "is a directory, not a file"),
])
def test_an_unchecked_runs_test_yaml_that_is_no_regular_file_is_its_problem_at_once(
        tmp_path: Path, make: Any, problem: str) -> None:
    """A run never checked is summarized from its test.yaml; one that is a FIFO is said to be
    one at once, not waited on for a writer with the whole index locked."""
    store = tmp_path / "store"
    run = RunDir(make_minimal_run(store, name="unchecked", seed=1, stamp=STAMP, verdict=None))
    run.config.unlink()
    make(run.config)
    started = time.monotonic()
    summary = summarize(run, store)
    assert time.monotonic() - started < 5
    assert (summary.verdict, summary.problem) == (None, f"test.yaml unreadable: {problem}")


def test_the_index_reads_nothing_through_a_link_leading_out_of_the_store(tmp_path: Path) -> None:
    """A run directory, test.yaml or interrupted.json that is a link out of the store: the
    server refuses to serve what it leads to, so the index must not show it either (it showed
    an outside test.yaml's variant and seed, and an outside interrupted.json's reason)."""
    outside = RunDir(make_minimal_run(tmp_path / "elsewhere", name="secret", seed=7, stamp=STAMP, verdict=None,
                                      variant="secret-variant"))
    outside.interrupted.write_text('{"reason": "secret reason"}')
    store = tmp_path / "store"
    make_minimal_run(store, name="good", seed=1, stamp=STAMP, verdict=True)
    (store / "linked").mkdir()
    (store / "linked" / f"{STAMP}-s7").symlink_to(outside.path)  # the whole run
    run = RunDir(make_minimal_run(store, name="unchecked", seed=2, stamp=STAMP, verdict=None))
    run.config.unlink()
    run.config.symlink_to(outside.config)
    summary = summarize(run, store)
    assert (summary.variant, summary.seed) == ("not stated", None)
    assert summary.problem == "test.yaml unreadable: a link leading outside the store"
    checked = RunDir(store / "good" / f"{STAMP}-s1")
    checked.interrupted.symlink_to(outside.interrupted)
    summary = summarize(checked, store)
    assert summary.verdict == "unknown"  # (it is there: marked interrupted all the same)
    assert summary.problem == ("interrupted.json is a link leading outside the store: the run is marked "
                               "interrupted, so it cannot be judged valid")
    with serving(store) as server:
        status, page = get(server, "/")
    assert status == 200 and "secret" not in page and "linked" not in page
    assert page.count('<tr class="run') == 2


@pytest.fixture(scope="module")
def results_run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    store = tmp_path_factory.mktemp("results") / "store"
    return RunDir(make_minimal_run(store, name="any", seed=1, stamp=STAMP, verdict=False))


SMALL_LIMIT = 256  # bytes: large enough for a verdict, small enough to pass often
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.sampled_from(["unknown", "lost-write"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["valid", "checkers", "durability", "anomalies", "anomaly_counts", "type", "config", "seed",
                         "variant", "error"]) | st.text(max_size=4), inner, max_size=4),
    max_leaves=16)
_VERDICTS: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [{"valid": v, "checkers": {"durability": {"valid": v, "anomalies": []}}} for v in (True, False, "unknown")])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=2 * SMALL_LIMIT) | (_JSON | _VERDICTS).map(lambda v: json.dumps(v).encode()),
       padding=st.integers(0, 2 * SMALL_LIMIT))
def test_any_bytes_as_results_index_as_a_verdict_or_a_problem(results_run: RunDir, content: bytes,
                                                              padding: int) -> None:
    """Whatever results.json holds, the run is listed with a verdict or with a problem that
    says why not, never an exception; past the limit, always as too large."""
    data = content + b" " * padding
    results_run.results.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(results_file, "MAX_RESULTS_BYTES", SMALL_LIMIT)
        summary = summarize(results_run, results_run.path.parents[1])
    assert summary.problem is not None or summary.verdict in (True, False, "unknown"), (data, summary)
    if len(data) > SMALL_LIMIT:
        assert summary.problem == f"results.json unreadable: more than the {SMALL_LIMIT:,} bytes a results file may have"
        assert summary.verdict is None


def test_a_path_longer_than_any_file_name_is_refused_before_it_is_resolved(server: StoreServer, store: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolving a path costs time quadratic in its length: a request line of 30,000 short
    segments (64 KiB, what http.server takes) held its thread for seconds before the 400."""
    root = store.resolve()
    resolved: list[Path] = []
    original = Path.resolve
    monkeypatch.setattr(Path, "resolve", lambda self, strict=False: resolved.append(self) or original(self, strict))
    with pytest.raises(UnusablePath):
        resolve_in_store(root, "a/" * 30_000)
    assert resolved == []
    assert resolve_in_store(root, "a/" * 1_000) == root.joinpath(*["a"] * 1_000)  # (a long one it can name)
    monkeypatch.undo()
    status, _ = get(server, "/store/" + "a/" * 30_000)
    assert status == 400


# --- the property: no URL names a path outside the store ----------------------------------

_SEGMENTS = st.sampled_from(["..", ".", "", "good", "escape", "loop", "%2e%2e", "%2E%2e", "%2f", "%5c", "%00",
                             "%ff", "..%2f..", "/", "\\", "~", "%252e%252e", "a" * 300, "%c0%ae%c0%ae"])


@pytest.fixture(scope="module")
def linked_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("property")
    root = base / "store"
    make_minimal_run(root, name="good", seed=1, stamp=STAMP, verdict=True)
    (base / "outside").mkdir()
    (base / "outside" / "secret").write_text("secret")
    os.symlink(base / "outside", root / "escape")
    os.symlink("loop", root / "loop")
    os.symlink("../../..", root / "good" / "up")
    return root.resolve()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_SEGMENTS | st.text(max_size=6), max_size=8).map("/".join))
def test_no_url_resolves_outside_the_store(linked_store: Path, url: str) -> None:
    try:
        target = resolve_in_store(linked_store, url)
    except OutsideStore:
        return
    except Exception as e:  # the only other refusal: a path the file system cannot follow
        assert type(e).__name__ == "UnusablePath", repr(e)
        return
    assert target == linked_store or linked_store in target.parents, (url, target)
