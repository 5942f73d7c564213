"""Writing where the user said: a file named on the command line is written, never clobbered.

A command that writes a file the user named (``check --to-edn OUT``, ``report --out FILE``)
is handed a path as hostile as any input. It may name the very history being read (then
writing it would lose the input), a directory, a device or a FIFO (``/dev/stdout``, a named
pipe another program reads), or a place that does not exist. Every such command writes
through :func:`write_output`, which answers the same way for all of them:

- an existing directory is refused: ``--out PATH: is a directory``;
- a path that is (after symbolic links, or as a hard link) one of the command's inputs is
  refused before anything is written: ``--out PATH: is the input RUN/history.jsonl; it
  would be overwritten``;
- a character device or a FIFO is written *through*: opened and written in place, never
  replaced, so ``--out /dev/stdout`` works and a device node stays a device node (a FIFO
  must find a reader within :data:`READER_WAIT` seconds); a block device or a socket is
  refused;
- ``-`` is standard output, as for most Unix tools (``report --out - | ...``);
- anything else (no file yet, or a regular file) is written atomically: a temporary file in
  the same directory, renamed over the target, so a reader never sees half a file. A
  symbolic link is followed (the file it names is replaced, the link is kept), and a file
  replaced keeps its permissions. A file floodmark keeps for itself in a run directory (its
  default ``report.html``) is written with ``follow_links=False``: a link in its place is
  replaced, not followed, since a run directory may come from anyone and its link could aim
  the write at any file.

Every refusal and every failure to write is a :class:`~floodmark.errors.UsageError` with one
line naming the flag and the path (exit 254). :func:`check_output` is the refusal alone, for
a command to call before its expensive work; :func:`replace_file` the atomic replacement
alone, for a file floodmark keeps for itself (a run's ``results.json``).
"""

from __future__ import annotations

import errno
import fcntl
import io
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

from floodmark.errors import UsageError, printable

STDOUT = "-"  # the target that names standard output
READER_WAIT = 10.0  # seconds a FIFO written to may take to find a reader
_POLL = 0.02

# An input: a path, or an open file descriptor (0 for a history read from standard input).
Input = str | os.PathLike[str] | int
Writer = Callable[[TextIO], object]


def check_output(target: str | os.PathLike[str], *, flag: str | None = None,
                 inputs: Iterable[Input] = (), follow_links: bool = True) -> None:
    """Refuse ``target`` as the place to write (a :class:`UsageError` naming ``flag`` and
    the path) if it is a directory, one of ``inputs``, a block device or a socket, or if its
    directory does not exist (``follow_links=False``: a link at ``target`` is to be replaced,
    so only the directory it sits in counts)."""
    if os.fspath(target) == STDOUT:
        return
    name = _name(flag, target)
    if not follow_links and os.path.islink(target):
        return  # (a link is there, so its directory is: the link will be replaced)
    try:
        status = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet (or a link to nothing)
        _check_parent(target, name)
        return
    except OSError as e:
        raise UsageError(f"{name}: cannot write: {_describe(e)}") from None
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        raise UsageError(f"{name}: is a directory")
    if stat.S_ISBLK(mode):
        raise UsageError(f"{name}: is a block device; not written")
    if stat.S_ISSOCK(mode):
        raise UsageError(f"{name}: is a socket, not a file")
    for source in inputs:
        if _identity(source) == (status.st_dev, status.st_ino):
            shown = "standard input" if isinstance(source, int) else printable(os.fspath(source))
            raise UsageError(f"{name}: is the input {shown}; it would be overwritten")


def write_output(target: str | os.PathLike[str], write: Writer, *, flag: str | None = None,
                 inputs: Iterable[Input] = (), errors: str = "strict", follow_links: bool = True) -> Path:
    """Write a UTF-8 text file at ``target`` by calling ``write`` with it open, as the
    module says (refused, written through, or replaced atomically); return ``target``.

    ``flag`` is the option that named the path, for messages (None: a default path);
    ``errors`` is the encoding's error handler (``"replace"`` for text that may hold
    strings that are not Unicode); ``follow_links=False`` replaces a link at ``target``
    instead of writing the file it names."""
    check_output(target, flag=flag, inputs=inputs, follow_links=follow_links)
    name = _name(flag, target)
    if os.fspath(target) == STDOUT:
        try:
            _write_stdout(write, errors)
        except OSError as e:
            raise UsageError(f"{name}: cannot write to standard output: {_describe(e)}") from None
        return Path(target)
    try:
        try:
            status: os.stat_result | None = os.stat(target) if follow_links else os.lstat(target)
        except (FileNotFoundError, NotADirectoryError):
            status = None
        if status is not None and stat.S_ISLNK(status.st_mode):
            replace_file(Path(target), write, errors=errors)  # the link itself, not its target
        elif status is not None and not stat.S_ISREG(status.st_mode):
            _write_through(target, status, write, errors, name)
        else:
            replace_file(Path(os.path.realpath(target)), write, status=status, errors=errors)
    except OSError as e:
        raise UsageError(f"{name}: cannot write: {_describe(e)}") from None
    return Path(target)


def _write_stdout(write: Writer, errors: str) -> None:
    """Write UTF-8 to standard output, whatever its own encoding; after what was printed."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text stream with no bytes beneath it (a test's capture)
        write(sys.stdout)
        return
    stream = io.TextIOWrapper(buffer, encoding="utf-8", errors=errors)
    try:
        write(stream)
        stream.flush()
    finally:
        stream.detach()  # standard output stays open for what follows


def _write_through(target: str | os.PathLike[str], status: os.stat_result, write: Writer,
                   errors: str, name: str) -> None:
    """Write into a device or a FIFO in place: no temporary file, no rename."""
    if stat.S_ISFIFO(status.st_mode):
        fd = _open_fifo(target, name)
    else:
        fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
    with os.fdopen(fd, "w", encoding="utf-8", errors=errors) as f:
        write(f)


def _open_fifo(target: str | os.PathLike[str], name: str) -> int:
    """Open a FIFO for writing once it has a reader; without one, refuse after
    :data:`READER_WAIT` seconds instead of blocking for ever."""
    deadline = time.monotonic() + READER_WAIT
    while True:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
            if time.monotonic() >= deadline:
                raise UsageError(f"{name}: a FIFO no one reads (waited {READER_WAIT:g} s)") from None
            time.sleep(_POLL)
            continue
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return fd


def replace_file(target: Path, write: Writer, *, status: os.stat_result | None = None,
                 errors: str = "strict") -> None:
    """Write a temporary file of its own next to ``target`` and rename it over ``target``
    (a link named ``target`` is replaced, not followed): a reader sees the old file or the
    new one, never half of one, and two writers never share a temporary file. The temporary
    file is removed whatever happens. It gets ``status``'s permissions (the file replaced),
    else the umask's. OSError when it cannot be written."""
    mode = stat.S_IMODE(status.st_mode) if status is not None else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:100]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=errors) as f:
            os.fchmod(f.fileno(), mode)
            write(f)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # nothing written half is left behind
        raise


def _check_parent(target: str | os.PathLike[str], name: str) -> None:
    parent = Path(os.path.realpath(target)).parent
    if not parent.is_dir():
        shown = printable(str(Path(target).parent))
        raise UsageError(f"{name}: {shown}: {'is a file, not a directory' if parent.exists() else 'no such directory'}")


def _identity(source: Input) -> tuple[int, int] | None:
    try:
        status = os.fstat(source) if isinstance(source, int) else os.stat(source)
    except OSError:
        return None  # an input that is not there cannot be overwritten
    return status.st_dev, status.st_ino


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _name(flag: str | None, target: str | os.PathLike[str]) -> str:
    shown = printable(os.fspath(target))
    return f"{flag} {shown}" if flag else shown


def _describe(error: OSError) -> str:
    """An OSError in a few words, without the path (the message names it already)."""
    if error.errno == errno.EISDIR:
        return "is a directory"
    return (error.strerror or str(error)).lower()
