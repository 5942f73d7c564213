"""Shared fixtures for the storage tests: the same tests run on SimDisk and on real files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from floodmark.reference.real.files import FileStorage
from floodmark.reference.runtime import Storage
from floodmark.reference.sim.disk import SimDisk


@dataclass
class StorageRoot:
    """A storage and an empty absolute directory in it to work under."""

    storage: Storage
    root: str
    kind: str  # "sim" or "file"

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def overwrite(self, path: str, position: int, data: bytes) -> None:
        """Replace bytes in the middle of a file (simulated disk damage)."""
        content = bytearray(self.storage.read(path))
        content[position : position + len(data)] = data
        self.storage.write_atomic(path, bytes(content))


STORAGE_KINDS = ["sim", "file"]


def make_storage_root(kind: str, tmp_path: Path) -> StorageRoot:
    """An empty directory on a fresh SimDisk ("sim") or under pytest's tmp_path ("file").

    ``tests/conftest.py`` wraps it in the parametrised ``storage_root`` fixture, so every test
    that takes it runs on both storages.
    """
    if kind == "sim":
        disk = SimDisk()
        disk.make_dirs("/data")
        return StorageRoot(disk, "/data", "sim")
    return StorageRoot(FileStorage(), str(tmp_path), "file")


class CountingStorage:
    """Wraps a Storage and counts the bytes read (to show reads do not scan the log)."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.bytes_read = 0

    def read(self, path: str, offset: int = 0, length: int = -1) -> bytes:
        data = self.inner.read(path, offset, length)
        self.bytes_read += len(data)
        return data

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)
