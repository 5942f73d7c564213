"""Where ``floodmark serve`` listens: an IPv6 address as well as an IPv4 one, and a host that is
no address refused in one line.

``--host ::1`` was refused ("Address family for hostname not supported"): the server's socket
was always IPv4. Now an IPv6 literal is bound as IPv6 and its URL is bracketed. These tests
need IPv6 on the loopback; without it they skip here and fail in CI (``FLOODMARK_REQUIRE_ALL``).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_fixtures import get_from, make_minimal_run, serving, stop_process

ROOT = Path(__file__).resolve().parents[2]
STAMP = "20260101T000000"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    make_minimal_run(root, name="good", seed=1, stamp=STAMP, verdict=True)
    make_minimal_run(root, name="other", seed=2, stamp=STAMP, verdict=False)
    return root


@pytest.fixture
def ipv6_loopback() -> str:
    """``::1``, once a socket could be bound there; a skip (a failure in CI) where it cannot."""
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as e:
        pytest.skip(f"no IPv6 on the loopback (::1): {e}")
    return "::1"


def test_an_ipv6_loopback_is_served_over_ipv6(store: Path, ipv6_loopback: str) -> None:
    with serving(store, host=ipv6_loopback) as srv:
        port = srv.server_address[1]
        assert srv.socket.family == socket.AF_INET6
        assert srv.url == f"http://[::1]:{port}/"
        status, body = get_from("::1", port, "/")
        assert status == 200 and "2 runs" in body
        status, history = get_from("::1", port, f"/store/good/{STAMP}-s1/history.jsonl")
        assert status == 200 and '"index": 0' in history


def test_an_ipv4_address_is_still_served_over_ipv4(store: Path) -> None:
    with serving(store) as srv:
        assert srv.socket.family == socket.AF_INET
        assert srv.url == f"http://127.0.0.1:{srv.server_address[1]}/"


@pytest.fixture(params=["::1", "[::1]"])
def serve_process(store: Path, ipv6_loopback: str,
                  request: pytest.FixtureRequest) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``floodmark serve --host ::1`` in its own process, and the line it printed first; and
    ``--host [::1]``, the address as copied from a URL (it was refused: "cannot listen on
    [[::1]]:0: Name or service not known")."""
    host = request.param.replace("::1", ipv6_loopback)
    proc = subprocess.Popen([sys.executable, "-m", "floodmark", "serve", "--store", str(store), "--host", host,
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        yield proc, proc.stdout.readline()
    finally:
        stop_process(proc)


def test_serve_host_ipv6_prints_a_bracketed_url_and_answers(
        serve_process: tuple[subprocess.Popen[str], str], store: Path) -> None:
    proc, line = serve_process
    match = re.fullmatch(r"serving (.+) at http://\[::1\]:(\d+)/\n", line)
    assert match and match[1] == str(store), (line, proc.poll())
    status, body = get_from("::1", int(match[2]), "/")
    assert status == 200 and "2 runs" in body
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == "", err


@pytest.mark.parametrize(("host", "error"), [
    ("nonsense host", "cannot listen on nonsense host:0: "),  # a name no resolver knows
    ("1::2::3", "cannot listen on [1::2::3]:0: "),  # an IPv6 address that is none
    ("\udcff", "error: --host \\xff: not an address or a host name"),  # a byte that is not UTF-8
    ("ü" * 64, "error: --host " + "ü" * 64 + ": not an address or a host name"),  # a label past 63 characters
    # brackets are a URL's way of writing an IPv6 address, and nothing else's
    ("[127.0.0.1]", "error: --host [127.0.0.1]: brackets enclose an IPv6 address only, as in [::1]"),
    ("[localhost]", "error: --host [localhost]: brackets enclose an IPv6 address only, as in [::1]"),
    ("[::1", "error: --host [::1: brackets enclose an IPv6 address only, as in [::1]"),
    ("::1]", "error: --host ::1]: brackets enclose an IPv6 address only, as in [::1]"),
    ("[]", "error: --host []: brackets enclose an IPv6 address only, as in [::1]"),
])
def test_a_host_that_is_no_address_is_refused_in_one_line(store: Path, host: str, error: str) -> None:
    done = subprocess.run([sys.executable, "-m", "floodmark", "serve", "--store", str(store), "--host",
                           os.fsencode(host), "--port", "0"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 254, done.stderr
    assert done.stderr.startswith(f"floodmark serve: {error}") and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize(("given", "bound"), [
    ("[::1]", "::1"), ("[fe80::1%eth0]", "fe80::1%eth0"), ("::1", "::1"), ("127.0.0.1", "127.0.0.1"),
    ("localhost", "localhost"),
])
def test_an_ipv6_address_in_brackets_is_bound_without_them(given: str, bound: str) -> None:
    from floodmark.reports.server import host_problem, unbracketed

    assert host_problem(given) is None
    assert unbracketed(given) == bound
