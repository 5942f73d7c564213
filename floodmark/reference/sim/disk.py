"""A simulated disk: the ``Storage`` protocol in memory, with crashes and disk faults.

The simulated runtime gives every node one ``SimDisk``; it survives the node's crashes the
way a real disk survives a power cut. What survives is decided the way a journalling file
system (ext4, ``data=ordered``) decides it:

* **file contents** are durable only up to the last ``fsync`` of that file. Bytes written
  after it are the *unsynced suffix*, which ``crash()`` drops;
* **metadata** (creating a file or directory, rename, remove, truncate) goes into a journal
  that is committed, in order, by the next ``fsync`` of any file or by ``write_atomic``.
  A crash before that commit undoes the change: a new file vanishes, a rename is undone, a
  truncated tail comes back;
* ``write_atomic`` (write temp, fsync, rename, fsync the directory) is durable on return;
  between ``defer_syncs`` and ``complete_syncs`` (a group commit) its permission and fault
  checks happen at once, but the new contents appear, durably, only at ``complete_syncs``,
  and a crash before then loses them.

Faults, injected by the nemesis or by tests, behave as Linux does for an *unprivileged*
process (the broker runs without DAC override):

* ``chmod(path, 0)`` on a directory: listing it, and opening, creating, removing or
  renaming anything beneath it raise ``PermissionError`` (so does ``exists`` for a path
  beneath it: ``os.stat`` fails with EACCES, and hiding that as "missing" would let a broker
  mistake a permission fault for an empty directory); files that are already open keep
  working. Modes are a fault, not data: they survive crashes until changed back;
* ``replace_with_file(path)``: the directory becomes a regular file, so paths beneath it
  raise ``NotADirectoryError``;
* ``fail_io(prefix, errno)``: every operation on a path under ``prefix`` (including writes
  and fsyncs through files already open there) raises ``OSError(errno)``, until ``heal()``.

Only the owner permission bits matter (the broker owns its files): ``r`` to list a
directory or read a file, ``w`` to change a directory's entries or write a file, ``x`` to
traverse a directory.
"""

from __future__ import annotations

import errno as errno_codes
import functools
import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field

_READ, _WRITE, _SEARCH = 0o400, 0o200, 0o100


def _error(code: int, path: str) -> OSError:
    # OSError(errno, ...) builds the right subclass (FileNotFoundError, PermissionError, ...).
    return OSError(code, os.strerror(code), path)


class _Inode:
    """A regular file's bytes, live and durable.

    The durable contents are ``data[:synced] + detached``: appends never change
    ``data[:synced]``, and a truncation below ``synced`` moves the lost durable bytes into
    ``detached`` until the journal commits the truncation. This keeps ``fsync`` O(1).
    """

    __slots__ = ("data", "synced", "detached")

    def __init__(self, data: bytes = b"", durable: bool = False) -> None:
        self.data = bytearray(data)
        self.synced = len(data) if durable else 0
        self.detached = b""

    def fsync(self) -> None:
        self.synced = len(self.data)
        self.detached = b""

    def truncate(self, size: int) -> None:
        if size < self.synced:
            self.detached = bytes(self.data[size : self.synced]) + self.detached
            self.synced = size
        del self.data[size:]

    def commit_truncate(self, size: int) -> None:
        """The journal committed a truncation to ``size``: the durable bytes shrink too."""
        if size <= self.synced:
            self.synced, self.detached = size, b""
        else:
            self.detached = self.detached[: size - self.synced]

    def durable_bytes(self) -> bytes:
        return bytes(self.data[: self.synced]) + self.detached

    def revert_to_durable(self) -> None:
        self.data = bytearray(self.durable_bytes())
        self.synced = len(self.data)
        self.detached = b""


@dataclass
class _Dir:
    entries: dict[str, _Dir | _Inode] = field(default_factory=dict)

    def copy(self) -> _Dir:
        return _Dir({name: e.copy() if isinstance(e, _Dir) else e for name, e in self.entries.items()})


def _split(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


class _Tree:
    """A directory tree without permissions: one for the live state, one for the durable."""

    def __init__(self, root: _Dir | None = None) -> None:
        self.root = root or _Dir()

    def lookup(self, path: str) -> _Dir | _Inode:
        node: _Dir | _Inode = self.root
        for part in _split(path):
            if not isinstance(node, _Dir):
                raise _error(errno_codes.ENOTDIR, path)
            if part not in node.entries:
                raise _error(errno_codes.ENOENT, path)
            node = node.entries[part]
        return node

    def parent(self, path: str) -> tuple[_Dir, str]:
        parent_path, name = posixpath.split(path)
        node = self.lookup(parent_path)
        if not isinstance(node, _Dir):
            raise _error(errno_codes.ENOTDIR, path)
        if not name:
            raise _error(errno_codes.EEXIST, path)  # the root
        return node, name

    def link(self, path: str, entry: _Dir | _Inode) -> None:
        parent, name = self.parent(path)
        parent.entries[name] = entry

    def unlink(self, path: str) -> None:
        parent, name = self.parent(path)
        del parent.entries[name]

    def move(self, src: str, dst: str) -> None:
        src_parent, src_name = self.parent(src)
        dst_parent, dst_name = self.parent(dst)
        dst_parent.entries[dst_name] = src_parent.entries.pop(src_name)


def _make_dir(tree: _Tree, path: str) -> None:
    tree.link(path, _Dir())  # each tree gets its own directory object; files are shared


@dataclass
class _Handle:
    path: str
    inode: _Inode
    generation: int
    closed: bool = False


class SimAppendFile:
    """An open file of a ``SimDisk`` (``runtime.AppendFile``)."""

    def __init__(self, disk: SimDisk, handle: _Handle) -> None:
        self._disk = disk
        self._handle = handle

    def _check(self) -> _Inode:
        handle = self._handle
        if handle.closed or handle.generation != self._disk.generation:
            # After a crash the process that opened this file is gone.
            raise _error(errno_codes.EBADF, handle.path)
        self._disk._check_fault(handle.path)
        return handle.inode

    def write(self, data: bytes) -> None:
        self._check().data += data

    def fsync(self) -> None:
        inode = self._check()
        self._disk._commit_journal()
        inode.fsync()

    def size(self) -> int:
        return len(self._check().data)

    def close(self) -> None:
        self._handle.closed = True


class SimDisk:
    """In-memory ``runtime.Storage`` with crash and fault hooks (see the module docstring)."""

    def __init__(self) -> None:
        self._live = _Tree()
        self._durable = _Tree()
        # Metadata changes not yet committed, applied to the durable tree in order.
        self._journal: list[Callable[[], None]] = []
        self._modes: dict[str, int] = {}
        self._faults: dict[str, int] = {}
        self.generation = 0  # bumped by crash(); invalidates open files
        self.crashes = 0
        self._deferred: dict[str, bytes] | None = None  # write_atomic's group commit, if open

    # ------------------------------------------------------------------ fault hooks

    def crash(self) -> None:
        """Lose everything not durable: unsynced file suffixes and uncommitted metadata."""
        self._journal.clear()
        self._deferred = None
        self._live = _Tree(self._durable.root.copy())
        for inode in self._inodes(self._live.root):
            inode.revert_to_durable()
        self.generation += 1
        self.crashes += 1

    def chmod(self, path: str, mode: int) -> None:
        path = self._norm(path)
        self._live.lookup(path)  # FileNotFoundError if absent, as chmod(1)
        self._modes[path] = mode

    def replace_with_file(self, path: str) -> None:
        """Replace the directory (or file) at ``path`` with an empty regular file, durably."""
        path = self._norm(path)
        self._live.lookup(path)  # FileNotFoundError if absent
        self._commit_journal()  # so that the durable tree has ``path`` too
        inode = _Inode(durable=True)
        for tree in (self._live, self._durable):
            tree.link(path, inode)

    def fail_io(self, path_prefix: str, errno: int = errno_codes.EIO) -> None:
        """Make every operation under ``path_prefix`` raise ``OSError(errno)``."""
        self._faults[self._norm(path_prefix)] = errno

    def heal(self) -> None:
        """Remove every fault: modes back to normal, no injected errors."""
        self._modes.clear()
        self._faults.clear()

    # ------------------------------------------------------------------ inspection (tests)

    def unsynced_bytes(self, path: str) -> int:
        """Bytes of the file that a crash now would lose (0 for a synced file)."""
        inode = self._file(self._norm(path))
        return len(inode.data) - inode.synced

    def durable_contents(self, path: str) -> bytes | None:
        """What the file would hold after a crash now (None: it would not exist)."""
        try:
            node = self._durable.lookup(self._norm(path))
        except OSError:
            return None
        return node.durable_bytes() if isinstance(node, _Inode) else None

    # ------------------------------------------------------------------ Storage protocol

    def exists(self, path: str) -> bool:
        return self._stat(path) is not None

    def is_dir(self, path: str) -> bool:
        return isinstance(self._stat(path), _Dir)

    def list_dir(self, path: str) -> list[str]:
        path = self._norm(path)
        node = self._resolve(path)
        if not isinstance(node, _Dir):
            raise _error(errno_codes.ENOTDIR, path)
        self._need(path, _READ)
        return sorted(node.entries)

    def make_dirs(self, path: str) -> None:
        path = self._norm(path)
        parts = _split(path)
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            node = self._stat(prefix)
            if isinstance(node, _Dir):
                continue
            if node is not None:  # a file where a directory should be (as os.makedirs reports it)
                raise _error(errno_codes.EEXIST if i == len(parts) else errno_codes.ENOTDIR, path)
            self._need_entry_change(prefix)
            self._apply(functools.partial(_make_dir, path=prefix))

    def open_append(self, path: str) -> SimAppendFile:
        path = self._norm(path)
        node = self._stat(path)
        if isinstance(node, _Dir):
            raise _error(errno_codes.EISDIR, path)
        if node is None:
            self._need_entry_change(path)
            inode = _Inode()
            self._apply(lambda tree: tree.link(path, inode))
        else:
            self._need(path, _WRITE)
            inode = node
        return SimAppendFile(self, _Handle(path, inode, self.generation))

    def read(self, path: str, offset: int = 0, length: int = -1) -> bytes:
        path = self._norm(path)
        inode = self._file(path)
        self._need(path, _READ)
        end = len(inode.data) if length < 0 else offset + length
        return bytes(inode.data[offset:end])

    def size(self, path: str) -> int:
        return len(self._file(self._norm(path)).data)

    def truncate(self, path: str, size: int) -> None:
        path = self._norm(path)
        inode = self._file(path)
        self._need(path, _WRITE)
        if size < len(inode.data):
            inode.truncate(size)
            self._journal.append(lambda: inode.commit_truncate(size))
        else:
            inode.data += bytes(size - len(inode.data))

    def write_atomic(self, path: str, data: bytes) -> None:
        path = self._norm(path)
        if isinstance(self._stat(path), _Dir):
            raise _error(errno_codes.EISDIR, path)
        self._need_entry_change(path)
        if self._deferred is not None:
            self._deferred[path] = data
            return
        inode = _Inode(data, durable=True)
        self._apply(lambda tree: tree.link(path, inode))
        self._commit_journal()

    def defer_syncs(self) -> None:
        if self._deferred is None:
            self._deferred = {}

    def complete_syncs(self) -> list[OSError]:
        deferred, self._deferred = self._deferred or {}, None
        failures: list[OSError] = []
        for path, data in deferred.items():
            try:
                self.write_atomic(path, data)
            except OSError as error:  # a fault injected since the temporary file was written
                failures.append(error)
        return failures

    def rename(self, src: str, dst: str) -> None:
        src, dst = self._norm(src), self._norm(dst)
        node = self._resolve(src)
        self._need_entry_change(src)
        self._need_entry_change(dst)
        if dst == src:
            return  # os.rename of a path onto itself succeeds and does nothing
        target = self._stat(dst)
        if isinstance(target, _Dir) and not isinstance(node, _Dir):
            raise _error(errno_codes.EISDIR, dst)
        if isinstance(node, _Dir) and target is not None:
            if not isinstance(target, _Dir):
                raise _error(errno_codes.ENOTDIR, dst)
            if target.entries:
                raise _error(errno_codes.ENOTEMPTY, dst)
        if dst.startswith(src + "/"):
            raise _error(errno_codes.EINVAL, dst)
        self._apply(lambda tree: tree.move(src, dst))

    def remove(self, path: str) -> None:
        path = self._norm(path)
        if isinstance(self._resolve(path), _Dir):
            raise _error(errno_codes.EISDIR, path)
        self._need_entry_change(path)
        self._apply(lambda tree: tree.unlink(path))

    def remove_tree(self, path: str) -> None:
        path = self._norm(path)
        node = self._resolve(path)
        if not isinstance(node, _Dir):
            raise _error(errno_codes.ENOTDIR, path)
        self._need_entry_change(path)
        for name in sorted(node.entries):  # rmtree needs to list and empty every directory
            child = posixpath.join(path, name)
            if isinstance(node.entries[name], _Dir):
                self._need(child, _READ | _WRITE | _SEARCH)
        self._need(path, _READ | _WRITE | _SEARCH)
        self._apply(lambda tree: tree.unlink(path))

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _norm(path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"storage paths must be absolute, got {path!r}")
        return posixpath.normpath(path)

    def _apply(self, change: Callable[[_Tree], None]) -> None:
        """Apply a metadata change now, and to the durable tree at the next journal commit."""
        change(self._live)
        self._journal.append(lambda: change(self._durable))

    def _commit_journal(self) -> None:
        for change in self._journal:
            change()
        self._journal.clear()

    def _inodes(self, directory: _Dir) -> list[_Inode]:
        found: list[_Inode] = []
        for entry in directory.entries.values():
            found.extend(self._inodes(entry) if isinstance(entry, _Dir) else [entry])
        return found

    def _check_fault(self, path: str) -> None:
        for prefix, code in self._faults.items():
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                raise _error(code, path)

    def _check_traverse(self, path: str) -> None:
        """Every proper ancestor directory must be searchable (x), as for path lookup."""
        parts = _split(path)
        for i in range(len(parts)):
            ancestor = "/" + "/".join(parts[:i])
            mode = self._modes.get(posixpath.normpath(ancestor))
            if mode is not None and not mode & _SEARCH:
                raise _error(errno_codes.EACCES, path)

    def _resolve(self, path: str) -> _Dir | _Inode:
        """Look up ``path`` as the OS would: faults, traversal permission, then existence."""
        self._check_fault(path)
        self._check_traverse(path)
        return self._live.lookup(path)

    def _stat(self, path: str) -> _Dir | _Inode | None:
        """Like ``os.stat``: None when absent (ENOENT/ENOTDIR), other errors raised."""
        path = self._norm(path)
        try:
            return self._resolve(path)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _file(self, path: str) -> _Inode:
        node = self._resolve(path)
        if isinstance(node, _Dir):
            raise _error(errno_codes.EISDIR, path)
        return node

    def _need(self, path: str, bits: int) -> None:
        mode = self._modes.get(path)
        if mode is not None and (mode & bits) != bits:
            raise _error(errno_codes.EACCES, path)

    def _need_entry_change(self, path: str) -> None:
        """Creating, removing or renaming ``path`` needs w+x on its parent directory."""
        parent = posixpath.dirname(path)
        node = self._resolve(parent)
        if not isinstance(node, _Dir):
            raise _error(errno_codes.ENOTDIR, path)
        self._check_fault(path)
        mode = self._modes.get(parent)
        if mode is not None and (mode & (_WRITE | _SEARCH)) != (_WRITE | _SEARCH):
            raise _error(errno_codes.EACCES, path)
