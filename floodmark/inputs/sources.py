"""Reading what a user hands us: a file, a pipe, a FIFO or standard input, read once.

Every reader of user-supplied input (histories, node events, configurations, schedules,
results) takes its bytes from here, because a path is not always a file. ``<(cat h.edn)``
and ``/dev/stdin`` are pipes: whoever reads them first takes the data, so a reader that
peeks at the head to detect a format and then reopens the path finds nothing, and judging
nothing gives a wrong verdict. A named FIFO with no writer blocks ``open`` for ever, and
``/dev/zero`` never ends. So a source is read exactly once, into memory, and then parsed:

- ``-`` is standard input;
- a FIFO (named or a pipe) is opened without blocking and must see its first byte within
  :data:`WRITER_WAIT` seconds, else it is refused. A pipe (``<(cat f)``) has its writer
  already, and is read as that writer writes. A named FIFO no process has open for writing
  is said to be waited on, at once, on stderr (:func:`_first_bytes`), not waited on in
  silence nor refused at once: a writer opened after the reader (``floodmark run --schedule
  f & cat s.json > f``, two terminals) is what a named FIFO is for;
- ``limit`` bounds the size (configurations are small; a history is not bounded), and a
  NUL byte in the first block of a text source refuses it at once, so ``/dev/zero`` or a
  binary file is named as such instead of being read without end;
- text must be UTF-8: a bad byte is reported with its line, never replaced silently; a
  text saved as UTF-16 or UTF-32 (what some Windows editors and PowerShell's ``>`` write) is
  named as such (:func:`other_encoding`), not as binary data nor as a bad byte: by its byte
  order mark, or, without one, by the NUL bytes ASCII text has in those encodings, only
  where every code unit of the head is one (anything else stays binary data or a bad byte);
- a UTF-8 byte order mark at the start of a text (what some editors save) is no part of it
  and is dropped (:func:`without_bom`, :func:`skip_bom` for a file a reader streams).

Every failure is a :class:`~floodmark.errors.SourceError` naming the source and, where it
has one, the line. A file a run directory should hold (``results.json``, ``schedule.json``,
...) is looked at before it is read (:func:`file_problem`): a directory, a FIFO or a
symbolic link that leads nowhere there is named as such at once, not waited on.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import sys
from typing import BinaryIO

from floodmark.errors import SourceError, printable

STDIN = "-"
BOM = b"\xef\xbb\xbf"  # the UTF-8 byte order mark
WRITER_WAIT = 10.0  # seconds a FIFO may take to produce its first byte
_BLOCK = 1 << 20
HEAD_BLOCK = _BLOCK  # the head read first, and judged by head_problem


def describe_os_error(error: OSError) -> str:
    """An OSError in a few words, without the path (the caller names the source)."""
    if error.errno == errno.ENOENT:
        return "no such file or directory"
    if error.errno == errno.ELOOP:
        return "too many levels of symbolic links"
    if error.errno == errno.ENAMETOOLONG:
        return "file name too long"
    if error.errno == errno.EISDIR:
        return "is a directory, not a file"
    return (error.strerror or str(error)).lower()


def file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a regular file to read, in a few words; None when it is one."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if e.errno == errno.ENOENT and os.path.islink(path):
            return "a symbolic link to nothing"
        return describe_os_error(e)
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO, not a file"
    return "is not a regular file"


def special_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is a FIFO or a device, in a few words: no run writes one, and reading it
    would wait for a writer (or never end), so a reader of a run's file names it at once.
    None for anything else (a regular file, a directory, a missing or unreadable path: the
    readers name those)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return file_problem(path)


def read_source(path: str | os.PathLike[str], *, limit: int | None = None, text: bool = True,
                writer_wait: float = WRITER_WAIT) -> bytes:
    """All the bytes of ``path`` (``-`` for standard input), read once, a ``text``'s without
    the byte order mark it may start with; raises SourceError."""
    source = os.fspath(path)
    if source == STDIN:
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):  # none (started closed, ``<&-``), or closed since
            raise SourceError("<stdin>", 0, "cannot read: standard input is closed") from None
        return _read_fd(fd, "<stdin>", limit, text, fifo=False, writer_wait=writer_wait)
    try:
        mode = os.stat(source).st_mode
        fifo = stat.S_ISFIFO(mode)
        if stat.S_ISDIR(mode):
            raise SourceError(source, 0, "is a directory, not a file")
        # (a regular file too: reading one never blocks, except a kernel file such as
        # /proc/kmsg, which would wait for data for ever; without blocking it says EAGAIN)
        fd = os.open(source, os.O_RDONLY | (os.O_NONBLOCK if fifo or stat.S_ISREG(mode) else 0))
    except OSError as e:
        raise SourceError(source, 0, f"cannot read: {file_problem(source) or describe_os_error(e)}") from None
    try:
        return _read_fd(fd, source, limit, text, fifo=fifo, writer_wait=writer_wait)
    finally:
        os.close(fd)


def _first_bytes(fd: int, source: str, writer_wait: float) -> bytes:
    """The first bytes of the FIFO ``fd`` (opened without blocking), or b"" at its end, waiting
    at most ``writer_wait`` seconds for them; raises SourceError.

    A read that finds nothing tells whether a writer has it open (EAGAIN) or none has (its
    end). A pipe with none has had its writer, and all it wrote was read: an empty input. A
    named FIFO with none may yet get one (see the module), so the wait is said at once: a
    path that is a FIFO by mistake is not waited on in silence.
    """
    try:
        data = os.read(fd, _BLOCK)
    except BlockingIOError:
        writer = True  # a writer has it open, and has not written yet
    except OSError as e:
        raise SourceError(source, 0, f"cannot read: {describe_os_error(e)}") from None
    else:
        if data or _is_pipe(fd):
            return data
        writer = False
        print(f"floodmark: {printable(source)}: a FIFO no process has open for writing yet; waiting up to "
              f"{writer_wait:g} s for one", file=sys.stderr, flush=True)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    if not poller.poll(int(writer_wait * 1000)):
        raise SourceError(source, 0, f"its writer wrote nothing within {writer_wait:g} s" if writer else
                          f"a FIFO no process opened for writing within {writer_wait:g} s (no writer)")
    try:
        return os.read(fd, _BLOCK)
    except BlockingIOError:  # (a writer came and went, another has it open and has not written)
        return _first_bytes(fd, source, writer_wait)
    except OSError as e:
        raise SourceError(source, 0, f"cannot read: {describe_os_error(e)}") from None


def _is_pipe(fd: int) -> bool:
    """Whether ``fd`` is an anonymous pipe (a shell's ``|`` or ``<(...)``), not a named FIFO."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    except OSError:  # (no /proc: taken for a named FIFO, whose end is waited on; said so)
        return False


def _read_fd(fd: int, source: str, limit: int | None, text: bool, *, fifo: bool, writer_wait: float) -> bytes:
    first = None
    if fifo:
        first = _first_bytes(fd, source, writer_wait)
        os.set_blocking(fd, True)
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk, first = (first, None) if first is not None else (os.read(fd, _BLOCK), None)
        except BlockingIOError:
            raise SourceError(source, 0, "cannot read: it has no data now and would wait for some (a kernel "
                                         "file such as /proc/kmsg), not a history") from None
        except OSError as e:
            raise SourceError(source, 0, f"cannot read: {describe_os_error(e)}") from None
        if not chunk:
            break
        problem = head_problem(chunk) if text and not chunks else None
        if problem is not None:
            raise SourceError(source, *problem)
        chunks.append(chunk)
        size += len(chunk)
        if limit is not None and size > limit:
            raise SourceError(source, 0, f"larger than {limit} bytes: not a file of this kind")
    data = b"".join(chunks)
    return without_bom(data) if text else data


def head_problem(head: bytes) -> tuple[int, str] | None:
    """Why a text whose first :data:`HEAD_BLOCK` bytes (or all, if fewer) are ``head`` is not
    one to read as UTF-8 lines, as (line, problem), line 0 for the whole text: UTF-16 or
    UTF-32, or binary data (a NUL byte, on the line it is on); None when it may be."""
    problem = other_encoding(head)
    if problem is not None:
        return 0, problem
    if b"\0" in head:
        return head[: head.index(b"\0")].count(b"\n") + 1, "binary data (a NUL byte), not text"
    return None


# The byte order marks of UTF-32 and UTF-16 (UTF-32 LE's first: it begins with UTF-16 LE's).
_MARKS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
          (b"\xfe\xff", "UTF-16"))
# A BOM-less head taken for UTF-16/32: its code units (little-endian, big-endian), each an
# ASCII character that text holds; enough of them that binary data is not mistaken for it.
_UNITS = (("UTF-32 LE", 4, 0), ("UTF-32 BE", 4, 3), ("UTF-16 LE", 2, 0), ("UTF-16 BE", 2, 1))
_TEXT_BYTES = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}
_MIN_UNITS = 2
HEAD = 4096  # bytes of a text's head other_encoding looks at


def other_encoding(head: bytes) -> str | None:
    """What a text starting with ``head`` is, in a few words, when it is certainly UTF-16 or
    UTF-32 rather than UTF-8 ("UTF-16 text (byte order mark FF FE); save it as UTF-8");
    None when it is not (see the module)."""
    for mark, name in _MARKS:
        if head.startswith(mark):
            return f"{name} text (byte order mark {mark.hex(' ').upper()}), not UTF-8; save it as UTF-8"
    head = head[:HEAD]
    if b"\0" not in head:  # (every code unit of such a head holds one: UTF-8 text is done here, at once)
        return None
    for name, size, at in _UNITS:
        units = [head[i:i + size] for i in range(0, len(head) - len(head) % size, size)]
        if len(units) >= _MIN_UNITS and all(
                unit[at] in _TEXT_BYTES and unit.count(0) == size - 1 for unit in units):
            return f"{name} text (no byte order mark: a NUL beside each character), not UTF-8; save it as UTF-8"
    return None


def without_bom(data: bytes) -> bytes:
    """``data`` without the UTF-8 byte order mark it may start with."""
    return data[len(BOM):] if data.startswith(BOM) else data


def skip_bom(stream: BinaryIO, source: str | None = None, error: type[SourceError] = SourceError) -> None:
    """Move a (seekable) stream at the start of a text past the byte order mark, if it has one;
    given its ``source``, an ``error`` naming it when the text is UTF-16 or UTF-32."""
    start = stream.tell()
    head = stream.read(HEAD if source is not None else len(BOM))
    problem = other_encoding(head) if source is not None else None
    if problem is not None:
        raise error(source or "", 0, problem)
    stream.seek(start + (len(BOM) if head.startswith(BOM) else 0))


def decode_utf8(data: bytes, source: str) -> str:
    """``data`` as text; a byte that is not UTF-8 is an error naming its line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        problem = other_encoding(data)
        if problem is not None:
            raise SourceError(source, 0, problem) from None
        line = data[: e.start].count(b"\n") + 1
        raise SourceError(source, line, f"not UTF-8 text (byte 0x{data[e.start]:02x})") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | os.PathLike[str], *, limit: int | None = None,
              writer_wait: float = WRITER_WAIT) -> str:
    """The UTF-8 text of ``path`` (``-`` for standard input), read once."""
    source = os.fspath(path)
    return decode_utf8(read_source(source, limit=limit, writer_wait=writer_wait),
                       "<stdin>" if source == STDIN else source)
