"""The simulated disk's file system: inodes with live and durable bytes, directories, trees.

A ``SimDisk`` keeps two trees of the same shape: the *live* tree (what the running process
sees, the page cache) and the *durable* tree (what a power cut leaves). Directories are
per tree, so a metadata change (create, rename, remove) can be applied to the live tree now
and to the durable one when the journal commits it. A regular file is one :class:`Inode`
shared by both trees: it knows its live bytes and which of them are durable, so ``fsync``
is one assignment and a power cut reverts each file to its durable bytes.

Nothing here knows about permissions, faults or journals: that is the disk's business
(``sim.disk``). Paths are absolute and normalised by the disk before they reach a tree.
"""

from __future__ import annotations

import errno as errno_codes
import os
import posixpath
from dataclasses import dataclass, field


def os_error(code: int, path: str) -> OSError:
    # OSError(errno, ...) builds the right subclass (FileNotFoundError, PermissionError, ...).
    return OSError(code, os.strerror(code), path)


def split_path(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


class Inode:
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

    def unsynced(self) -> int:
        """Live bytes a power cut now would drop (beyond the durable prefix)."""
        return len(self.data) - self.synced

    def durable_bytes(self) -> bytes:
        return bytes(self.data[: self.synced]) + self.detached

    def revert_to_durable(self, keep_unsynced: int = 0) -> None:
        """Keep only the durable bytes, and the first ``keep_unsynced`` of the unsynced
        suffix (what the page cache wrote back on its own before the cut; none while a
        truncation is pending, whose durable bytes are not a prefix of the live ones)."""
        kept = bytes(self.data[self.synced:self.synced + keep_unsynced]) if not self.detached else b""
        self.data = bytearray(self.durable_bytes() + kept)
        self.synced = len(self.data)
        self.detached = b""


@dataclass
class Directory:
    entries: dict[str, Directory | Inode] = field(default_factory=dict)

    def copy(self) -> Directory:
        return Directory({name: e.copy() if isinstance(e, Directory) else e for name, e in self.entries.items()})

    def inodes(self) -> list[Inode]:
        """Every file beneath, depth first in entry order."""
        found: list[Inode] = []
        for entry in self.entries.values():
            found.extend(entry.inodes() if isinstance(entry, Directory) else [entry])
        return found


class Tree:
    """A directory tree without permissions: one for the live state, one for the durable."""

    def __init__(self, root: Directory | None = None) -> None:
        self.root = root or Directory()

    def lookup(self, path: str) -> Directory | Inode:
        node: Directory | Inode = self.root
        for part in split_path(path):
            if not isinstance(node, Directory):
                raise os_error(errno_codes.ENOTDIR, path)
            if part not in node.entries:
                raise os_error(errno_codes.ENOENT, path)
            node = node.entries[part]
        return node

    def parent(self, path: str) -> tuple[Directory, str]:
        parent_path, name = posixpath.split(path)
        node = self.lookup(parent_path)
        if not isinstance(node, Directory):
            raise os_error(errno_codes.ENOTDIR, path)
        if not name:
            raise os_error(errno_codes.EEXIST, path)  # the root
        return node, name

    def link(self, path: str, entry: Directory | Inode) -> None:
        parent, name = self.parent(path)
        parent.entries[name] = entry

    def unlink(self, path: str) -> None:
        parent, name = self.parent(path)
        del parent.entries[name]

    def move(self, src: str, dst: str) -> None:
        src_parent, src_name = self.parent(src)
        dst_parent, dst_name = self.parent(dst)
        dst_parent.entries[dst_name] = src_parent.entries.pop(src_name)


def make_dir(tree: Tree, path: str) -> None:
    tree.link(path, Directory())  # each tree gets its own directory object; files are shared
