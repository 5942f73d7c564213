"""Paths inside a store, as the results browser names, opens and shows them.

A URL under ``/store/`` names a file of the store in percent-encoded bytes. File names are
bytes too: a run directory copied from another machine may carry a name that is not UTF-8.
So a URL is decoded to bytes and then to a file name the way Python names files
(``os.fsdecode``: undecodable bytes kept as surrogate escapes), a link is made from a file
name's own bytes (``os.fsencode``), and a name is shown with those bytes as ``\\xff``: every
file the store holds can be listed, linked and served, and a page never carries a character
that is not text.

Nothing outside the store is ever opened. A path is resolved (symlinks followed) and must
stay under the store's root; ``..``, NUL, backslash and absolute paths are refused
before the file system is touched. What is opened is checked again through the descriptor
itself (``/proc/self/fd``), so a directory swapped for a symlink between the check and the
open cannot lead out either, and a FIFO or device is refused without being waited on.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath
from urllib.parse import quote_from_bytes, unquote_to_bytes

PATH_MAX = 4096  # bytes in a path the kernel opens, its final NUL included (Linux)


class OutsideStore(Exception):
    """A request for a path that is not inside the store."""


class UnusablePath(Exception):
    """A request for a path the file system cannot follow (a symlink loop, a name too long)."""


class NotAFile(Exception):
    """A path in the store that is neither a regular file nor a directory (a FIFO, a device)."""


def resolve_in_store(root: Path, url_path: str) -> Path:
    """The file or directory a ``/store/...`` URL names, or OutsideStore.

    ``root`` must already be resolved. Percent-decoding happens once, here, to bytes and then
    to a file name (undecodable bytes as surrogate escapes, as ``os.fsdecode`` names files);
    ``..``, NUL, backslash, absolute paths and paths longer than the kernel opens are
    refused before touching the file system (empty and ``.`` segments are dropped), and the
    resolved path (symlinks followed) must still lie under ``root``.
    """
    relative = os.fsdecode(unquote_to_bytes(url_path))
    if "\x00" in relative or "\\" in relative or relative.startswith("/"):
        raise OutsideStore(url_path)
    parts = [p for p in relative.split("/") if p not in ("", ".")]  # "a//b" and "a/./b" are "a/b"
    if ".." in parts:
        raise OutsideStore(url_path)
    joined = root.joinpath(*parts)
    if len(os.fsencode(joined)) >= PATH_MAX:
        # No file has such a name (the kernel refuses it), and resolving one costs time
        # quadratic in its length: a 64 KiB request line held a thread for seconds.
        raise UnusablePath(url_path)
    try:
        target = joined.resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop (RuntimeError in 3.11), a name too long
        raise UnusablePath(url_path) from None
    if not inside(root, target):
        raise OutsideStore(url_path)
    return target


def inside(root: Path, path: Path) -> bool:
    """Whether the resolved ``path`` is ``root`` or lies under it."""
    return path == root or root in path.parents


def leads_out(path: Path, store: Path) -> bool:
    """Whether ``path`` is there and resolves (a link followed) outside ``store``: a file
    the index must not read, as the server must not serve it."""
    try:
        return os.path.lexists(path) and not inside(store.resolve(), path.resolve())
    except (OSError, RuntimeError):  # a loop or a name too long: its reader says so
        return False


def open_in_store(root: Path, target: Path) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``target`` (resolved, under ``root``) and its
    status; OutsideStore when what was opened is not under ``root`` after all, IsADirectoryError
    when it is a directory (made there since it was looked at), NotAFile when it is a FIFO or
    a device; OSError as the file system says."""
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        status = os.fstat(fd)
        opened = _opened_path(fd)
        if opened is not None and not inside(root, opened):
            raise OutsideStore(str(target))
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(target))
        if not stat.S_ISREG(status.st_mode):
            raise NotAFile(str(target))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def _opened_path(fd: int) -> Path | None:
    """The path the kernel says ``fd`` is open on (None where there is no ``/proc``)."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def href(name: str) -> str:
    """A file name as a URL path segment, percent-encoded from its own bytes."""
    return quote_from_bytes(os.fsencode(name), safe="")


def href_path(relative: str) -> str:
    """A relative path (``/``-separated) as a URL path, each segment percent-encoded."""
    return "/".join(href(part) for part in PurePosixPath(relative).parts)


def shown(text: str) -> str:
    """A name as text to show: bytes that are not UTF-8 as ``\\xff``, any other lone surrogate
    as ``\\udxxx``."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def http_status_of(error: OSError) -> int:
    """The HTTP status for a store path the file system refused: gone 404, not ours to read
    403, anything else (a disk error) 500."""
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        return 404
    if error.errno in (errno.EACCES, errno.EPERM):
        return 403
    if error.errno in (errno.ELOOP, errno.ENAMETOOLONG):
        return 400
    return 500
