"""The results browser: ``floodmark serve``, a small web server over a store of runs.

Two kinds of page: the *index* (``/``), every run newest first, colour-coded by verdict,
filtered by test name, variant, nemesis and verdict, paged; and the *store itself* under
``/store/...``: each run's report, its raw files and directory listings, so the report's
relative links work unchanged.

It is built on the standard library's ``http.server`` (one thread per request) and binds to
127.0.0.1 unless told otherwise, because a store holds node logs; an IPv6 literal (``::1``,
``::``) is bound as IPv6 and its URL bracketed (``http://[::1]:8080/``). Every path is resolved
(symlinks included) and must stay inside the store: ``..`` segments, absolute paths and
symlinks that lead out are refused (:mod:`floodmark.reports.store_paths`). Files other than
reports are served as plain text with ``nosniff``, so a log line that looks like HTML is
shown, never run.

A store is live: runs are written, grow and are removed while it is browsed. A file is served
as long as it was when its response began (a growing history is not streamed for ever, and
never past the length its header promised); a run or entry gone mid-scan is left out. Every
request gets an answer: a bad one a 4xx (``..`` 403, a method other than GET and HEAD 405, a
target that is not ASCII 400), and anything unforeseen a 500 and one line on stderr, never a
traceback. A connection idle for :data:`IDLE_TIMEOUT` seconds is closed. Ctrl-C and SIGTERM
stop the server and close its socket.
"""

from __future__ import annotations

import dataclasses
import html
import ipaddress
import math
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from floodmark.reports.run_index import RunFilter, RunIndex, RunSummary
from floodmark.reports.store_paths import (
    NotAFile,
    OutsideStore,
    UnusablePath,
    href,
    href_path,
    http_status_of,
    inside,
    open_in_store,
    resolve_in_store,
    shown,
)
from floodmark.reports.templating import environment, static_text
from floodmark.run_dirs.rundir import REPORT

__all__ = ["OutsideStore", "StoreServer", "host_problem", "make_server", "resolve_in_store", "serve", "url_host"]

DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 500
STORE_PREFIX = "/store/"
_TEXT_SUFFIXES = {".json": "application/json", ".jsonl": "text/plain", ".yaml": "text/plain",
                  ".yml": "text/plain", ".log": "text/plain", ".txt": "text/plain", ".edn": "text/plain"}
_INDEX_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'"
_REPORT_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
               "base-uri 'none'; form-action 'none'")
IDLE_TIMEOUT = 60.0  # seconds a connection may stay silent (a request line, headers) or not read
_COPY_BLOCK = 1 << 20
_ALLOWED = "GET, HEAD"


class StoreServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, store: Path, address: tuple[str, int]) -> None:
        self.store_root = store.resolve()
        self.index = RunIndex(self.store_root)
        # an instance's family, set before the base class makes the socket: AF_INET refuses "::1"
        self.address_family = socket.AF_INET6 if _is_ipv6(address[0]) else socket.AF_INET
        super().__init__(address, StoreHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{url_host(str(host)).replace('%', '%25')}:{port}/"  # a zone's % in a URL (RFC 6874)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """What escaped a request's handler: one line on stderr, not a traceback; the server goes on."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError | TimeoutError):  # the client went away or went quiet
            return
        print(f"floodmark serve: a request from {client_address[0]} failed: "
              f"{type(error).__name__}: {_one_line(error)}", file=sys.stderr, flush=True)


class StoreHandler(BaseHTTPRequestHandler):
    server: StoreServer
    server_version = "floodmark-serve"
    timeout = IDLE_TIMEOUT
    _responded = False  # whether this request's status line has gone out

    def log_message(self, format: str, *args: object) -> None:  # quieter than the default
        pass

    def send_response(self, code: int, message: str | None = None) -> None:
        self._responded = True
        super().send_response(code, message)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def __getattr__(self, name: str) -> Callable[[], None]:
        """``do_POST``, ``do_PUT``, ``do_BREW`` ...: every method but GET and HEAD is refused with
        405 and what is allowed, not the 501 http.server gives (the store is read-only)."""
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self._drain_body()
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", _ALLOWED)
        body = self._error_page(HTTPStatus.METHOD_NOT_ALLOWED, f"The store is read-only: only {_ALLOWED}.")
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self._safety_headers(_INDEX_CSP)
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def _drain_body(self, limit: int = 1 << 16) -> None:
        """Read (a bounded part of) a refused request's body, so that closing the connection
        does not reset it before the client has read the answer."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return
        if 0 < length <= limit:
            with suppress(OSError):
                self.rfile.read(length)

    def _dispatch(self, head: bool) -> None:
        self._responded = False
        try:
            self._route(head)
        except (OSError, TimeoutError) as e:
            if self._responded or isinstance(e, BrokenPipeError | ConnectionError | TimeoutError):
                self.close_connection = True  # mid-response, or the client is gone: nothing more to say
                return
            status = http_status_of(e)
            if status == 500:
                self._log_failure(e)
            self._error(HTTPStatus(status), _OS_ERROR_WORDS[status])
        except Exception as e:  # noqa: BLE001 - one request must never take the server's answer away
            self._log_failure(e)
            if not self._responded:
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "This page failed; the server's log says why.")
            self.close_connection = True

    def _route(self, head: bool) -> None:
        if not self.path.isascii():
            self._error(HTTPStatus.BAD_REQUEST, "The request target must be ASCII (percent-encode other bytes).")
            return
        url = urlsplit(self.path)
        try:
            if url.path == "/":
                self._send_html(self._index_page(parse_qs(url.query)), head)
            elif url.path.startswith(STORE_PREFIX) or url.path == STORE_PREFIX.rstrip("/"):
                self._serve_store(url.path, head)
            else:
                self._error(HTTPStatus.NOT_FOUND, "No such page. The index is at /.")
        except OutsideStore:
            self._error(HTTPStatus.FORBIDDEN, "That path is outside the store.")
        except NotAFile:
            self._error(HTTPStatus.FORBIDDEN, "Only regular files and directories are served (not a FIFO or device).")
        except UnusablePath:
            # a symlink loop, a name too long: the client is told so rather than left without an answer
            self._error(HTTPStatus.BAD_REQUEST, "That path cannot be served.")

    def _log_failure(self, error: BaseException) -> None:
        print(f"floodmark serve: {self.command} {_one_line(self.path)} failed: {type(error).__name__}: "
              f"{_one_line(error)}", file=sys.stderr, flush=True)

    # --- the index -------------------------------------------------------------------
    def _index_page(self, query: dict[str, list[str]]) -> str:
        def one(name: str) -> str:
            return (query.get(name) or [""])[0].strip()

        runs = self.server.index.runs()
        run_filter = RunFilter(test=one("test"), variant=one("variant"), nemesis=one("nemesis"), verdict=one("verdict"))
        matching = [r for r in runs if run_filter.matches(r)]
        per_page = _int(one("per"), DEFAULT_PER_PAGE, 1, MAX_PER_PAGE)
        pages = max(1, math.ceil(len(matching) / per_page))
        page = _int(one("page"), 1, 1, pages)
        page_runs = matching[(page - 1) * per_page: page * per_page]
        base = {k: v for k, v in (("test", run_filter.test), ("variant", run_filter.variant),
                                  ("nemesis", run_filter.nemesis), ("verdict", run_filter.verdict)) if v}
        if per_page != DEFAULT_PER_PAGE:
            base["per"] = str(per_page)

        def page_link(number: int) -> str:
            return "/?" + urlencode({**base, "page": str(number)})

        return environment().get_template("index.html.j2").render(
            store=shown(str(self.server.store_root)),
            runs=[_row(r) for r in page_runs],
            total=len(runs),
            matching=len(matching),
            page=page,
            pages=pages,
            first_shown=(page - 1) * per_page + 1 if page_runs else 0,
            last_shown=(page - 1) * per_page + len(page_runs),
            prev_link=page_link(page - 1) if page > 1 else None,
            next_link=page_link(page + 1) if page < pages else None,
            filter=run_filter,
            variants=sorted({shown(r.variant) for r in runs}),
            nemeses=sorted({shown(n) for r in runs for n in r.nemesis}),
            css=static_text("index.css"),
        )

    # --- the store -------------------------------------------------------------------
    def _serve_store(self, url_path: str, head: bool) -> None:
        root = self.server.store_root
        target = resolve_in_store(root, url_path[len(STORE_PREFIX):])
        if target.is_dir():
            self._serve_directory(target, url_path, head)
            return
        if not os.path.lexists(target):
            self._error(HTTPStatus.NOT_FOUND, "No such file in the store.")
            return
        try:
            fd, status = open_in_store(root, target)
        except IsADirectoryError:  # a directory made where the file was, since it was looked at
            self._serve_directory(target, url_path, head)
            return
        with open(fd, "rb") as f:
            is_report = target.name == REPORT
            content_type = "text/html; charset=utf-8" if is_report else _content_type(target, f)
            size = status.st_size  # what is served: the file as long as it is now, however it grows
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(size))
            self._safety_headers(_REPORT_CSP if is_report else "sandbox")
            self.end_headers()
            if not head:
                self._copy(f, size)

    def _serve_directory(self, target: Path, url_path: str, head: bool) -> None:
        if not url_path.endswith("/"):
            relative = os.path.relpath(target, self.server.store_root)
            self._redirect(STORE_PREFIX + ("" if relative == "." else href_path(Path(relative).as_posix()) + "/"))
            return
        self._send_html(self._listing(target), head)

    def _copy(self, f: Any, size: int) -> None:
        """``size`` bytes of ``f`` to the client, no more (the file may have grown since its length
        was sent); a file cut shorter meanwhile ends the connection early, which tells the
        client that the body is incomplete."""
        remaining = size
        while remaining > 0:
            block = f.read(min(_COPY_BLOCK, remaining))
            if not block:
                self.close_connection = True
                return
            self.wfile.write(block)
            remaining -= len(block)

    def _listing(self, directory: Path) -> str:
        root = self.server.store_root
        relative = Path(os.path.relpath(directory, root)).as_posix()
        entries = []
        for child in _sorted_entries(directory):
            try:
                is_dir = child.is_dir()
                if not inside(root, child.resolve()):
                    continue  # a symlink leading out of the store is not listed
                size = child.stat().st_size if not is_dir and child.is_file() else None
            except (OSError, RuntimeError):  # gone since the directory was read, or a loop
                continue
            slash = "/" if is_dir else ""
            entries.append((shown(child.name) + slash, href(child.name) + slash, size))
        return environment().get_template("listing.html.j2").render(
            path="" if relative == "." else shown(relative), entries=entries, css=static_text("index.css"))

    # --- responses -------------------------------------------------------------------
    def _safety_headers(self, csp: str) -> None:
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", csp)

    def _send_html(self, text: str, head: bool, status: HTTPStatus = HTTPStatus.OK) -> None:
        body = text.encode("utf-8", "backslashreplace")  # names are shown() already; never a failure here
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self._safety_headers(_INDEX_CSP)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(HTTPStatus.MOVED_PERMANENTLY)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send_html(self._error_page(status, message).decode("utf-8"), self.command == "HEAD", status)

    @staticmethod
    def _error_page(status: HTTPStatus, message: str) -> bytes:
        return (f"<!doctype html><meta charset=utf-8><title>{status.value} {status.phrase}</title>"
                f"<h1>{status.value} {status.phrase}</h1><p>{html.escape(message)}</p>"
                "<p><a href=\"/\">index</a></p>").encode()


_OS_ERROR_WORDS = {404: "No such file in the store (gone?).", 403: "That file cannot be read.",
                   400: "That path cannot be served.", 500: "That file cannot be read (the server's log says why)."}


def _row(run: RunSummary) -> dict[str, object]:
    base = STORE_PREFIX + href_path(run.relative) + "/"
    return {"run": _shown_summary(run), "files": base, "report": base + REPORT if run.has_report else None}


def _shown_summary(run: RunSummary) -> RunSummary:
    """``run`` with every text it shows as text (a directory name's bytes that are not UTF-8 as ``\\xff``)."""
    changes: dict[str, Any] = {f.name: shown(v) for f in dataclasses.fields(run)
                               if isinstance(v := getattr(run, f.name), str)}
    changes["nemesis"] = tuple(shown(n) for n in run.nemesis)
    return dataclasses.replace(run, **changes)


def _sorted_entries(directory: Path) -> list[Path]:
    """A directory's entries, directories first; OSError when the directory itself cannot be read."""
    def key(child: Path) -> tuple[bool, str]:
        try:
            return not child.is_dir(), child.name
        except OSError:
            return True, child.name
    return sorted(directory.iterdir(), key=key)


def _one_line(value: object) -> str:
    from floodmark.errors import one_line

    return one_line(shown(str(value)))


def _int(text: str, default: int, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        return default
    return min(max(value, low), high)


def _content_type(path: Path, f: Any) -> str:
    kind = _TEXT_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        return "text/plain; charset=utf-8" if _looks_textual(f) else "application/octet-stream"
    return f"{kind}; charset=utf-8"


def _looks_textual(f: Any) -> bool:
    """Whether the start of the open file ``f`` holds no NUL; ``f`` is left at its start."""
    head = f.read(4096)
    f.seek(0)
    return b"\x00" not in head


def make_server(store: Path, host: str = "127.0.0.1", port: int = 8080) -> StoreServer:
    return StoreServer(store, (host, port))


def host_problem(host: str) -> str | None:
    """Why ``host`` is no address or host name to listen on, in a few words; None when it may
    be one (binding says whether it is). The socket layer refuses these with TypeError, not
    the OSError it gives a name it cannot resolve. An IPv6 address may be in brackets, as a
    URL writes it (:func:`unbracketed`); nothing else may."""
    if host.startswith("[") or host.endswith("]"):
        inner = unbracketed(host)
        return None if inner != host and _is_ipv6(inner) else "brackets enclose an IPv6 address only, as in [::1]"
    try:
        host.encode("idna")  # as the socket layer encodes a name (a label of at most 63 characters)
    except UnicodeError:
        return "not an address or a host name"
    return None if host.isprintable() else "not an address or a host name"  # a NUL, a control, a lone surrogate


def unbracketed(host: str) -> str:
    """``host`` without the brackets a URL puts around an IPv6 address (``[::1]`` is ``::1``),
    as users copy it from one; any other host as it is."""
    return host[1:-1] if len(host) >= 2 and host[0] == "[" and host[-1] == "]" else host


def url_host(host: str) -> str:
    """``host`` as ``host:port`` (and a URL) names it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def _is_ipv6(host: str) -> bool:
    """Whether ``host`` is an IPv6 address written out (``::1``, ``::``, ``fe80::1%eth0``), not a name."""
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def serve(store: Path, host: str, port: int, announce: Callable[[str], None] = print) -> None:
    """Serve until interrupted: Ctrl-C or SIGTERM (also where SIGINT arrives ignored, as in a
    background job) stops the server and closes its socket."""
    server = make_server(store, host, port)
    try:
        with _terminate_as_interrupt():
            announce(server.url)
            server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt, as Ctrl-C does (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
