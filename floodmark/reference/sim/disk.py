"""A simulated disk: the ``Storage`` protocol in memory, with crashes and disk faults.

The simulated runtime gives every node one ``SimDisk``; it outlives the node's process the
way a real disk does. Two ways for the process to die differ in what the disk keeps:

* **kill** (SIGKILL, ``process_killed``): the machine stays up, so the OS page cache keeps
  every write, synced or not, and its journal still commits later. Only what the process
  held is gone: its open files and a group commit it had not completed;
* **power loss** (``power_loss``, also ``crash``): what survives is decided the way a
  journalling file system (ext4, ``data=ordered``) decides it:

  - **file contents** are durable only up to the last ``fsync`` of that file. Bytes written
    after it are the *unsynced suffix*, which a power loss drops; or, if the caller says
    so, drops only in part: the page cache may have written back a prefix of it on its
    own, cut anywhere, even inside a record (a *torn* tail, what log recovery is for);
  - **metadata** (creating a file or directory, rename, remove, truncate) goes into a journal
    that is committed, in order, by the next ``fsync`` of any file or by ``write_atomic``.
    A power loss before that commit undoes the change: a new file vanishes, a rename is
    undone, a truncated tail comes back;
  - ``write_atomic`` (write temp, fsync, rename, fsync the directory) is durable on return;
    between ``defer_syncs`` and ``complete_syncs`` (a group commit) its permission and fault
    checks happen at once, but the new contents appear, durably, only at ``complete_syncs``,
    and a crash before then loses them.

Faults, injected by the nemesis or by tests, behave as Linux does for an *unprivileged*
process (the broker runs without DAC override). Each returns a :class:`DiskFault` that
``heal_fault`` undoes on its own, leaving other faults in force (see ``sim.disk_faults``);
``heal()`` undoes them all:

* ``chmod(path, 0)`` on a directory: listing it, and opening, creating, removing or
  renaming anything beneath it raise ``PermissionError`` (so does ``exists`` for a path
  beneath it: ``os.stat`` fails with EACCES, and hiding that as "missing" would let a broker
  mistake a permission fault for an empty directory); files that are already open keep
  working. Modes are a fault, not data: they survive crashes until healed;
* ``replace_with_file(path)``: the directory is moved aside and a regular file takes its
  place, so paths beneath it raise ``NotADirectoryError``; healing moves it back, contents
  and all;
* ``fail_io(prefix, errno)``: every operation on a path under ``prefix`` (including writes
  and fsyncs through files already open there) raises ``OSError(errno)``.

Only the owner permission bits matter (the broker owns its files): ``r`` to list a
directory or read a file, ``w`` to change a directory's entries or write a file, ``x`` to
traverse a directory. The file system's structures themselves are in ``sim.disk_tree``.
"""

from __future__ import annotations

import errno as errno_codes
import functools
import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from floodmark.reference.sim.disk_faults import DISPLACED, DiskFault, DiskFaults, PowerLoss
from floodmark.reference.sim.disk_tree import Directory, Inode, Tree, make_dir, os_error, split_path

_READ, _WRITE, _SEARCH = 0o400, 0o200, 0o100


@dataclass
class _Handle:
    path: str
    inode: Inode
    generation: int
    closed: bool = False


class SimAppendFile:
    """An open file of a ``SimDisk`` (``runtime.AppendFile``)."""

    def __init__(self, disk: SimDisk, handle: _Handle) -> None:
        self._disk = disk
        self._handle = handle

    def _check(self) -> Inode:
        handle = self._handle
        if handle.closed or handle.generation != self._disk.generation:
            # After a crash the process that opened this file is gone.
            raise os_error(errno_codes.EBADF, handle.path)
        self._disk.check_fault(handle.path)
        return handle.inode

    def write(self, data: bytes) -> None:
        self._check().data += data

    def fsync(self) -> None:
        inode = self._check()
        self._disk.commit_journal()
        inode.fsync()

    def size(self) -> int:
        return len(self._check().data)

    def close(self) -> None:
        self._handle.closed = True


class SimDisk:
    """In-memory ``runtime.Storage`` with crash and fault hooks (see the module docstring)."""

    def __init__(self) -> None:
        self._live = Tree()
        self._durable = Tree()
        # Metadata changes not yet committed, applied to the durable tree in order.
        self._journal: list[Callable[[], None]] = []
        self.faults = DiskFaults()
        # The faults' combined effect, read on every operation: mode per path, errno per prefix.
        self._modes: dict[str, int] = {}
        self._faults: dict[str, int] = {}
        self.generation = 0  # bumped when the process dies; invalidates open files
        self.crashes = 0  # power losses
        self.kills = 0  # process deaths that kept the page cache
        self._deferred: dict[str, bytes] | None = None  # write_atomic's group commit, if open

    # ------------------------------------------------------------------ the process dies

    def power_loss(self, written_back: Callable[[int], int] | None = None) -> PowerLoss:
        """Lose everything not durable: unsynced file suffixes and uncommitted metadata.

        ``written_back(n)``, if given, says how many of a surviving file's ``n`` unsynced
        bytes the page cache had written back before the cut (a prefix, cut anywhere, even
        inside a record: a torn tail); without it every unsynced byte is lost.
        """
        unsynced = sum(inode.unsynced() for inode in self._live.root.inodes())
        changes, deferred = len(self._journal), len(self._deferred or {})
        self._journal.clear()
        self._deferred = None
        self._live = Tree(self._durable.root.copy())
        kept = 0
        for inode in self._live.root.inodes():
            keep = written_back(inode.unsynced()) if written_back is not None and inode.unsynced() else 0
            before = len(inode.durable_bytes())
            inode.revert_to_durable(keep)
            kept += len(inode.data) - before
        lost = PowerLoss(unsynced - kept, changes, deferred, kept)
        self.generation += 1
        self.crashes += 1
        return lost

    def crash(self) -> PowerLoss:
        """A power loss (the name the storage tests use)."""
        return self.power_loss()

    def process_killed(self) -> int:
        """The process died (SIGKILL) but the machine did not: the page cache keeps every
        write, durable or not, and the journal still commits at the next fsync. Only what
        the process held is gone: its open files, and a group commit it had not completed
        (the temporary files were written, the renames never happened). Returns how many
        such deferred writes were lost."""
        lost = len(self._deferred or {})
        self._deferred = None
        self.generation += 1
        self.kills += 1
        return lost

    # ------------------------------------------------------------------ faults

    def chmod(self, path: str, mode: int) -> DiskFault:
        """Set the owner permission bits of ``path`` until this fault is healed."""
        path = self._norm(path)
        self._live.lookup(path)  # FileNotFoundError if absent, as chmod(1)
        fault = self.faults.add("chmod", path, mode=mode, previous_mode=self._modes.get(path))
        self._apply_faults()
        return fault

    def replace_with_file(self, path: str) -> DiskFault:
        """Move the directory (or file) at ``path`` aside to ``path + DISPLACED`` and put an
        empty regular file in its place, durably (``mv dir dir.displaced; touch dir``, then
        a sync). Healing the fault moves it back with its contents."""
        path = self._norm(path)
        moved_to = path + DISPLACED
        self._live.lookup(path)  # FileNotFoundError if absent
        if self._stat(moved_to) is not None:
            raise os_error(errno_codes.EEXIST, moved_to)
        self.commit_journal()  # so that the durable tree has ``path`` too
        inode = Inode(durable=True)
        for tree in (self._live, self._durable):
            tree.move(path, moved_to)
            tree.link(path, inode)
        return self.faults.add("replace-with-file", path, moved_to=moved_to)

    def fail_io(self, path_prefix: str, errno: int = errno_codes.EIO) -> DiskFault:
        """Make every operation under ``path_prefix`` raise ``OSError(errno)``."""
        fault = self.faults.add("fail-io", self._norm(path_prefix), errno=errno)
        self._apply_faults()
        return fault

    def heal_fault(self, fault: DiskFault) -> bool:
        """Undo one fault and only that one; False if it was not active (healed already).

        A chmod gives way to the mode in effect without it (another chmod of the same path
        still active, else the recorded previous mode); a replaced directory comes back, with
        its contents, in place of the file (``rm -f dir; mv dir.displaced dir``)."""
        if not self.faults.is_active(fault):
            return False
        if fault.moved_to is not None:
            self._live.lookup(fault.moved_to)  # FileNotFoundError if it was moved away since
            self.commit_journal()
            for tree in (self._live, self._durable):
                parent, name = tree.parent(fault.path)
                parent.entries.pop(name, None)
                tree.move(fault.moved_to, fault.path)
        self.faults.remove(fault)
        self._apply_faults()
        return True

    def heal(self) -> list[DiskFault]:
        """Undo every fault, the latest first; returns those healed."""
        healed = list(reversed(self.faults.active()))
        for fault in healed:
            self.heal_fault(fault)
        return healed

    def _apply_faults(self) -> None:
        self._modes = self.faults.modes()
        self._faults = self.faults.errors()

    # ------------------------------------------------------------------ inspection (tests)

    def unsynced_bytes(self, path: str) -> int:
        """Bytes of the file that a power loss now would lose (0 for a synced file)."""
        return self._file(self._norm(path)).unsynced()

    def durable_contents(self, path: str) -> bytes | None:
        """What the file would hold after a crash now (None: it would not exist)."""
        try:
            node = self._durable.lookup(self._norm(path))
        except OSError:
            return None
        return node.durable_bytes() if isinstance(node, Inode) else None

    # ------------------------------------------------------------------ Storage protocol

    def exists(self, path: str) -> bool:
        return self._stat(path) is not None

    def is_dir(self, path: str) -> bool:
        return isinstance(self._stat(path), Directory)

    def list_dir(self, path: str) -> list[str]:
        path = self._norm(path)
        node = self._resolve_directory(path)
        self._need(path, _READ)
        return sorted(node.entries)

    def make_dirs(self, path: str) -> None:
        path = self._norm(path)
        parts = split_path(path)
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            node = self._stat(prefix)
            if isinstance(node, Directory):
                continue
            if node is not None:  # a file where a directory should be (as os.makedirs reports it)
                raise os_error(errno_codes.EEXIST if i == len(parts) else errno_codes.ENOTDIR, path)
            self._need_entry_change(prefix)
            self._apply(functools.partial(make_dir, path=prefix))

    def open_append(self, path: str) -> SimAppendFile:
        path = self._norm(path)
        node = self._stat(path)
        if isinstance(node, Directory):
            raise os_error(errno_codes.EISDIR, path)
        if node is None:
            self._need_entry_change(path)
            inode = Inode()
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
        if isinstance(self._stat(path), Directory):
            raise os_error(errno_codes.EISDIR, path)
        self._need_entry_change(path)
        if self._deferred is not None:
            self._deferred[path] = data
            return
        inode = Inode(data, durable=True)
        self._apply(lambda tree: tree.link(path, inode))
        self.commit_journal()

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
        if isinstance(target, Directory) and not isinstance(node, Directory):
            raise os_error(errno_codes.EISDIR, dst)
        if isinstance(node, Directory) and target is not None:
            if not isinstance(target, Directory):
                raise os_error(errno_codes.ENOTDIR, dst)
            if target.entries:
                raise os_error(errno_codes.ENOTEMPTY, dst)
        if dst.startswith(src + "/"):
            raise os_error(errno_codes.EINVAL, dst)
        self._apply(lambda tree: tree.move(src, dst))

    def remove(self, path: str) -> None:
        path = self._norm(path)
        if isinstance(self._resolve(path), Directory):
            raise os_error(errno_codes.EISDIR, path)
        self._need_entry_change(path)
        self._apply(lambda tree: tree.unlink(path))

    def remove_tree(self, path: str) -> None:
        path = self._norm(path)
        node = self._resolve_directory(path)
        self._need_entry_change(path)
        for name in sorted(node.entries):  # rmtree needs to list and empty every directory
            child = posixpath.join(path, name)
            if isinstance(node.entries[name], Directory):
                self._need(child, _READ | _WRITE | _SEARCH)
        self._need(path, _READ | _WRITE | _SEARCH)
        self._apply(lambda tree: tree.unlink(path))

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _norm(path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"storage paths must be absolute, got {path!r}")
        return posixpath.normpath(path)

    def _apply(self, change: Callable[[Tree], None]) -> None:
        """Apply a metadata change now, and to the durable tree at the next journal commit."""
        change(self._live)
        self._journal.append(lambda: change(self._durable))

    def commit_journal(self) -> None:
        """Make the metadata changes so far durable: an fsync of any file on the disk
        commits them, as a journaling file system's commit does."""
        for change in self._journal:
            change()
        self._journal.clear()

    def check_fault(self, path: str) -> None:
        """Raise the injected error if ``path`` lies under a faulted directory."""
        for prefix, code in self._faults.items():
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                raise os_error(code, path)

    def _check_traverse(self, path: str) -> None:
        """Every proper ancestor directory must be searchable (x), as for path lookup."""
        parts = split_path(path)
        for i in range(len(parts)):
            ancestor = "/" + "/".join(parts[:i])
            mode = self._modes.get(posixpath.normpath(ancestor))
            if mode is not None and not mode & _SEARCH:
                raise os_error(errno_codes.EACCES, path)

    def _resolve(self, path: str) -> Directory | Inode:
        """Look up ``path`` as the OS would: faults, traversal permission, then existence."""
        self.check_fault(path)
        self._check_traverse(path)
        return self._live.lookup(path)

    def _resolve_directory(self, path: str, reported: str | None = None) -> Directory:
        """Look up ``path`` as :meth:`_resolve` does; ENOTDIR (naming ``reported``, by default
        ``path``) if it is not a directory."""
        node = self._resolve(path)
        if not isinstance(node, Directory):
            raise os_error(errno_codes.ENOTDIR, reported or path)
        return node

    def _stat(self, path: str) -> Directory | Inode | None:
        """Like ``os.stat``: None when absent (ENOENT/ENOTDIR), other errors raised."""
        path = self._norm(path)
        try:
            return self._resolve(path)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _file(self, path: str) -> Inode:
        node = self._resolve(path)
        if isinstance(node, Directory):
            raise os_error(errno_codes.EISDIR, path)
        return node

    def _need(self, path: str, bits: int) -> None:
        mode = self._modes.get(path)
        if mode is not None and (mode & bits) != bits:
            raise os_error(errno_codes.EACCES, path)

    def _need_entry_change(self, path: str) -> None:
        """Creating, removing or renaming ``path`` needs w+x on its parent directory."""
        parent = posixpath.dirname(path)
        self._resolve_directory(parent, reported=path)
        self.check_fault(path)
        mode = self._modes.get(parent)
        if mode is not None and (mode & (_WRITE | _SEARCH)) != (_WRITE | _SEARCH):
            raise os_error(errno_codes.EACCES, path)
