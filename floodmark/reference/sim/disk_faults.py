"""Disk faults as records: each injected fault is kept until it is healed, on its own.

A nemesis injects faults one at a time and heals them one at a time, and two of them may
overlap on one disk (a permission fault on one log directory while another is replaced by
a file, or two permission faults on the same directory). So the disk does not keep "the
current mode" of a path but the list of faults in force, in the order they were applied,
and derives the effect from it: the latest chmod still in force on a path decides its mode,
the latest injected error on a prefix decides that errno. Healing one fault removes it from
the list and the effect of the others stays, exactly as if it had never been applied.

Each :class:`DiskFault` records what the fault did (the mode it replaced, where a directory
was moved), which is also the evidence a backend reports that the fault took effect. The
effect of power loss on a disk is reported as a :class:`PowerLoss`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

DiskFaultKind = Literal["chmod", "replace-with-file", "fail-io"]

# Where a directory replaced by a file waits until the fault is healed: the suffix the real
# disk nemesis uses (``mv dir dir.floodmark-displaced; touch dir``).
DISPLACED = ".floodmark-displaced"


@dataclass(frozen=True)
class DiskFault:
    """One fault in force on a disk; ``number`` orders faults and tells equal ones apart."""

    number: int
    kind: DiskFaultKind
    path: str
    mode: int | None = None  # chmod: the owner bits set
    previous_mode: int | None = None  # chmod: the mode in force before (None: no restriction)
    moved_to: str | None = None  # replace-with-file: where the original entry waits
    errno: int | None = None  # fail-io: what every operation under ``path`` raises


@dataclass(frozen=True)
class PowerLoss:
    """What a power cut took from a disk: the evidence that it lost something."""

    unsynced_bytes: int  # bytes written to files and not yet fsynced
    uncommitted_changes: int  # metadata changes (create, rename, remove, truncate) undone
    deferred_writes: int  # whole-file writes of a group commit that had not completed
    written_back_bytes: int = 0  # unsynced bytes that survived all the same (a torn tail's)


@dataclass
class DiskFaults:
    """The faults in force on one disk, in the order they were applied."""

    _active: dict[int, DiskFault] = field(default_factory=dict)
    _applied: int = 0

    def add(self, kind: DiskFaultKind, path: str, *, mode: int | None = None,
            previous_mode: int | None = None, moved_to: str | None = None,
            errno: int | None = None) -> DiskFault:
        self._applied += 1
        fault = DiskFault(self._applied, kind, path, mode, previous_mode, moved_to, errno)
        self._active[fault.number] = fault
        return fault

    def is_active(self, fault: DiskFault) -> bool:
        return self._active.get(fault.number) == fault

    def remove(self, fault: DiskFault) -> bool:
        if not self.is_active(fault):
            return False
        del self._active[fault.number]
        return True

    def active(self) -> list[DiskFault]:
        return list(self._active.values())

    def modes(self) -> dict[str, int]:
        """The mode of every path under a chmod fault: the latest one in force wins."""
        return {f.path: f.mode for f in self._active.values() if f.kind == "chmod" and f.mode is not None}

    def errors(self) -> dict[str, int]:
        """The errno injected under each path prefix: the latest one in force wins."""
        return {f.path: f.errno for f in self._active.values() if f.kind == "fail-io" and f.errno is not None}
