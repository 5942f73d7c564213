"""Real files: the ``Storage`` protocol over the operating system.

Each call is one or a few system calls and lets the OS's ``OSError`` through unchanged, so
the broker sees exactly what Linux reports: ``PermissionError`` for a ``chmod 000`` log
directory (when the broker runs without DAC override), ``NotADirectoryError`` for a
directory replaced by a file, ``OSError(EIO)`` for a failing disk. Files are opened
unbuffered, so a write reaches the kernel at once and only a machine crash (not a process
crash) can lose it before ``fsync``.

``write_atomic`` is the classic checkpoint write: write a temporary file beside the target,
fsync it, rename it over the target, fsync the directory so the rename itself is durable.
That is two fsyncs per file, about a millisecond here; a broker bringing thousands of
leader epoch checkpoint files up to date from its epoch journal after a failover writes
thousands at once. Between
``defer_syncs`` and ``complete_syncs`` the checkpoints are group-committed instead: each
temporary file is written at once (so a permission fault still surfaces at the call), then
one ``syncfs`` per file system makes them all durable, the renames follow, and a second
``syncfs`` makes the renames durable. Same guarantee, two syncs in all.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import stat
from io import FileIO


class OsAppendFile:
    """An open file appended to with ``os.write`` (``runtime.AppendFile``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def _descriptor(self) -> int:
        if self._fd is None:
            raise OSError(9, os.strerror(9), self.path)  # EBADF: closed
        return self._fd

    def write(self, data: bytes) -> None:
        fd = self._descriptor()
        view = memoryview(data)
        while view:  # os.write may write less than asked (signals, full pipes)
            written = os.write(fd, view)
            view = view[written:]

    def fsync(self) -> None:
        os.fsync(self._descriptor())

    def size(self) -> int:
        return os.fstat(self._descriptor()).st_size

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _stat(path: str) -> os.stat_result | None:
    """``os.stat`` that answers None for a missing path but raises every other error
    (``os.path.exists`` would hide a permission fault as "missing")."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


class FileStorage:
    """``runtime.Storage`` on the real file system."""

    def __init__(self) -> None:
        self._deferred: dict[str, str] | None = None  # target -> its written temporary file

    def exists(self, path: str) -> bool:
        return _stat(path) is not None

    def is_dir(self, path: str) -> bool:
        result = _stat(path)
        return result is not None and stat.S_ISDIR(result.st_mode)

    def list_dir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def make_dirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def open_append(self, path: str) -> OsAppendFile:
        return OsAppendFile(path)

    def read(self, path: str, offset: int = 0, length: int = -1) -> bytes:
        with open(path, "rb", buffering=0) as f:
            if offset:
                f.seek(offset)
            return f.readall() if length < 0 else _read_exactly(f, length)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def truncate(self, path: str, size: int) -> None:
        os.truncate(path, size)

    def write_atomic(self, path: str, data: bytes) -> None:
        temporary = path + ".tmp"
        try:
            _write_temporary(temporary, data, sync=self._deferred is None)
            if self._deferred is not None:
                self._deferred[path] = temporary
                return
            os.replace(temporary, path)
        except OSError:
            _remove_quietly(temporary)  # do not leave a half-written temporary behind
            raise
        _fsync_directory(os.path.dirname(path) or ".")

    def defer_syncs(self) -> None:
        if self._deferred is None:
            self._deferred = {}

    def complete_syncs(self) -> list[OSError]:
        deferred, self._deferred = self._deferred or {}, None
        if not deferred:
            return []
        failures: dict[str, OSError] = {}
        by_device = _by_file_system(deferred, failures)
        for paths in by_device.values():  # the temporary files' contents
            _sync_file_system(paths, failures)
        for path in deferred:
            if path in failures:
                _remove_quietly(deferred[path])
                continue
            try:
                os.replace(deferred[path], path)
            except OSError as error:
                _remove_quietly(deferred[path])
                failures[path] = _naming(error, path)
        for paths in by_device.values():  # the renames
            _sync_file_system([p for p in paths if p not in failures], failures)
        return list(failures.values())

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def remove(self, path: str) -> None:
        os.remove(path)

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path)


def _write_temporary(temporary: str, data: bytes, *, sync: bool) -> None:
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


def _fsync_directory(directory: str) -> None:
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _naming(error: OSError, path: str) -> OSError:
    """The error with ``filename`` set to the checkpoint it was about."""
    return OSError(error.errno, error.strerror or str(error), path)


def _by_file_system(deferred: dict[str, str], failures: dict[str, OSError]) -> dict[int, list[str]]:
    """Deferred targets grouped by the device of their directory."""
    groups: dict[int, list[str]] = {}
    for path in deferred:
        try:
            device = os.stat(os.path.dirname(path) or ".").st_dev
        except OSError as error:
            failures[path] = _naming(error, path)
            continue
        groups.setdefault(device, []).append(path)
    return groups


_libc = ctypes.CDLL(None, use_errno=True)


def _sync_file_system(paths: list[str], failures: dict[str, OSError]) -> None:
    """``syncfs`` the file system holding ``paths``; on failure every one of them failed."""
    if not paths:
        return
    try:
        fd = os.open(os.path.dirname(paths[0]) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if _libc.syncfs(fd) != 0:  # Linux >= 5.8 reports writeback errors here
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code))
        finally:
            os.close(fd)
    except OSError as error:
        for path in paths:
            failures.setdefault(path, _naming(error, path))


def _read_exactly(f: FileIO, length: int) -> bytes:
    """Read up to ``length`` bytes, looping over short reads (stops early only at EOF)."""
    chunks: list[bytes] = []
    remaining = length
    while remaining > 0:
        chunk = f.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
