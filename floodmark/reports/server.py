"""The results browser: ``floodmark serve``, a small web server over a store of runs.

Two kinds of page: the *index* (``/``), every run newest first, colour-coded by verdict,
filtered by test name, variant, nemesis and verdict, paged; and the *store itself* under
``/store/...``: each run's report, its raw files and directory listings, so the report's
relative links work unchanged.

It is built on the standard library's ``http.server`` (one thread per request) and binds to
127.0.0.1 unless told otherwise, because a store holds node logs. Every path is resolved
(symlinks included) and must stay inside the store: ``..`` segments, absolute paths and
symlinks that lead out are refused. Files other than reports are served as plain text with
``nosniff``, so a log line that looks like HTML is shown, never run.
"""

from __future__ import annotations

import html
import math
import os
import shutil
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from floodmark.reports.run_index import RunFilter, RunIndex, RunSummary
from floodmark.reports.templating import environment, static_text
from floodmark.rundir import REPORT

DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 500
STORE_PREFIX = "/store/"
_TEXT_SUFFIXES = {".json": "application/json", ".jsonl": "text/plain", ".yaml": "text/plain",
                  ".yml": "text/plain", ".log": "text/plain", ".txt": "text/plain", ".edn": "text/plain"}
_INDEX_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'"
_REPORT_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
               "base-uri 'none'; form-action 'none'")


class OutsideStore(Exception):
    """A request for a path that is not inside the store."""


class UnusablePath(Exception):
    """A request for a path the file system cannot follow (a symlink loop, a name too long)."""


def resolve_in_store(root: Path, url_path: str) -> Path:
    """The file or directory a ``/store/...`` URL names, or OutsideStore.

    ``root`` must already be resolved. Percent-decoding happens once, here; ``..``, empty
    and NUL-containing segments are refused before touching the file system, and the
    resolved path (symlinks followed) must still lie under ``root``.
    """
    relative = unquote(url_path, errors="strict")
    if "\x00" in relative or "\\" in relative or relative.startswith("/"):
        raise OutsideStore(url_path)
    parts = [p for p in PurePosixPath("/" + relative).parts[1:]]
    if any(p in ("..", ".") for p in parts):
        raise OutsideStore(url_path)
    try:
        target = root.joinpath(*parts).resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError in 3.11), a name too long
        raise UnusablePath(url_path) from None
    if target != root and root not in target.parents:
        raise OutsideStore(url_path)
    return target


class StoreServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, store: Path, address: tuple[str, int]) -> None:
        self.store_root = store.resolve()
        self.index = RunIndex(self.store_root)
        super().__init__(address, StoreHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"


class StoreHandler(BaseHTTPRequestHandler):
    server: StoreServer
    server_version = "floodmark-serve"

    def log_message(self, format: str, *args: object) -> None:  # quieter than the default
        pass

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def _dispatch(self, head: bool) -> None:
        url = urlsplit(self.path)
        try:
            if url.path == "/":
                self._send_html(self._index_page(parse_qs(url.query)), head)
            elif url.path.startswith(STORE_PREFIX) or url.path == STORE_PREFIX.rstrip("/"):
                self._serve_store(url.path[len(STORE_PREFIX):], head)
            else:
                self._error(HTTPStatus.NOT_FOUND, "No such page. The index is at /.")
        except OutsideStore:
            self._error(HTTPStatus.FORBIDDEN, "That path is outside the store.")
        except UnicodeDecodeError:
            self._error(HTTPStatus.BAD_REQUEST, "The path is not valid UTF-8.")
        except (BrokenPipeError, ConnectionResetError):
            pass
        except (UnusablePath, OSError, RuntimeError, ValueError):
            # a symlink loop, a name too long, a file that vanished: the path cannot be served,
            # and the client is told so rather than left without an answer
            self._error(HTTPStatus.BAD_REQUEST, "That path cannot be served.")

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
        shown = matching[(page - 1) * per_page: page * per_page]
        base = {k: v for k, v in (("test", run_filter.test), ("variant", run_filter.variant),
                                  ("nemesis", run_filter.nemesis), ("verdict", run_filter.verdict)) if v}
        if per_page != DEFAULT_PER_PAGE:
            base["per"] = str(per_page)

        def page_link(number: int) -> str:
            return "/?" + urlencode({**base, "page": str(number)})

        return environment().get_template("index.html.j2").render(
            store=str(self.server.store_root),
            runs=[_row(r) for r in shown],
            total=len(runs),
            matching=len(matching),
            page=page,
            pages=pages,
            first_shown=(page - 1) * per_page + 1 if shown else 0,
            last_shown=(page - 1) * per_page + len(shown),
            prev_link=page_link(page - 1) if page > 1 else None,
            next_link=page_link(page + 1) if page < pages else None,
            filter=run_filter,
            variants=sorted({r.variant for r in runs}),
            nemeses=sorted({n for r in runs for n in r.nemesis}),
            css=static_text("index.css"),
        )

    # --- the store -------------------------------------------------------------------
    def _serve_store(self, relative: str, head: bool) -> None:
        root = self.server.store_root
        target = resolve_in_store(root, relative)
        if target.is_dir():
            if not self.path.split("?")[0].endswith("/"):
                self._redirect(STORE_PREFIX + quote(Path(os.path.relpath(target, root)).as_posix()) + "/")
                return
            self._send_html(self._listing(target), head)
            return
        if not target.is_file():
            self._error(HTTPStatus.NOT_FOUND, "No such file in the store.")
            return
        is_report = target.name == REPORT
        content_type = "text/html; charset=utf-8" if is_report else _content_type(target)
        try:
            f = open(target, "rb")  # noqa: SIM115 (closed below; streamed, not read whole)
        except OSError:
            self._error(HTTPStatus.FORBIDDEN, "That file cannot be read.")
            return
        with f:
            size = os.fstat(f.fileno()).st_size
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(size))
            self._safety_headers(_REPORT_CSP if is_report else "sandbox")
            self.end_headers()
            if not head:
                shutil.copyfileobj(f, self.wfile, 1 << 20)

    def _listing(self, directory: Path) -> str:
        root = self.server.store_root
        relative = Path(os.path.relpath(directory, root)).as_posix()
        entries = []
        for child in sorted(directory.iterdir(), key=lambda p: (not p.is_dir(), p.name)):
            try:
                inside = child.resolve()
            except (OSError, RuntimeError):
                continue
            if inside != root and root not in inside.parents:
                continue  # a symlink leading out of the store is not listed
            entries.append((child.name + ("/" if child.is_dir() else ""), quote(child.name) + ("/" if child.is_dir() else ""),
                            child.stat().st_size if child.is_file() else None))
        return environment().get_template("listing.html.j2").render(
            path="" if relative == "." else relative, entries=entries, css=static_text("index.css"))

    # --- responses -------------------------------------------------------------------
    def _safety_headers(self, csp: str) -> None:
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", csp)

    def _send_html(self, text: str, head: bool, status: HTTPStatus = HTTPStatus.OK) -> None:
        body = text.encode("utf-8")
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
        page = (f"<!doctype html><meta charset=utf-8><title>{status.value} {status.phrase}</title>"
                f"<h1>{status.value} {status.phrase}</h1><p>{html.escape(message)}</p><p><a href=\"/\">index</a></p>")
        self._send_html(page, self.command == "HEAD", status)


def _row(run: RunSummary) -> dict[str, object]:
    base = STORE_PREFIX + quote(run.relative) + "/"
    return {"run": run, "files": base, "report": base + REPORT if run.has_report else None}


def _int(text: str, default: int, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        return default
    return min(max(value, low), high)


def _content_type(path: Path) -> str:
    kind = _TEXT_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        return "text/plain; charset=utf-8" if _looks_textual(path) else "application/octet-stream"
    return f"{kind}; charset=utf-8"


def _looks_textual(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return b"\x00" not in f.read(4096)
    except OSError:
        return False


def make_server(store: Path, host: str = "127.0.0.1", port: int = 8080) -> StoreServer:
    return StoreServer(store, (host, port))


def serve(store: Path, host: str, port: int, announce: Callable[[str], None] = print) -> None:
    """Serve until interrupted."""
    server = make_server(store, host, port)
    announce(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
