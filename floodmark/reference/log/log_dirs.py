"""Log directories (JBOD): where a broker keeps its replicas, and what a failed disk takes away.

A broker is given several log directories, typically one per disk. Each replica lives in
exactly one of them, in ``<dir>/<topic>-<partition>/``. At start-up the broker finds its
replicas by listing every directory; a new replica goes to the online directory holding the
fewest (ties: the first configured), as Kafka does.

KIP-112: a disk failure must not take the whole broker down. Any ``OSError`` in a
directory (EIO, a ``chmod 000`` the broker cannot override, a directory replaced by a file)
takes that *directory* offline: its replicas stop (their logs are closed, nothing more is
read or written there) and the broker tells the controller, which elects leaders elsewhere;
replicas in the other directories keep serving. An offline directory stays offline until
the broker restarts.

``LogDirs`` reports offline transitions to its caller rather than acting on them: its own
operations raise :class:`LogDirOfflineError` carrying the directory and the replicas that
just went offline, and the broker calls ``mark_offline`` itself when an ``OSError`` comes
out of a log it holds.

**Clean shutdown markers** (Kafka's ``.kafka_cleanshutdown``, the signal KIP-966 builds
on). The broker acknowledges records without fsync, so a power loss takes the unsynced
tail of its logs, records the ISR may have counted on. A clean shutdown, after its final
flush, durably writes an empty marker in every online directory; start-up removes the
markers, durably, before anything is written. A directory that holds replicas but no marker
was therefore not shut down cleanly (power loss, kill, a disk that failed meanwhile), and
its replicas may lack records they had; the broker says so when it registers. A directory
without replicas has nothing to lose (a fresh one, say): no marker is needed there.

**Leader epoch journals.** Each online directory has one (``epoch_journal``): the epoch
caches of its logs persist there, so that becoming leader of thousands of replicas costs a
few file operations per directory, not one file per replica. ``defer_syncs`` /
``complete_syncs`` group a batch of changes (the journals' lines and any atomic file
writes) into one sync each; ``compact_epoch_journals`` brings the replicas' own checkpoint
files up to date later, in bounded steps.
"""

from __future__ import annotations

import contextlib
import functools
import posixpath
from collections import Counter
from dataclasses import dataclass

from floodmark.reference.log.checkpoint import HIGH_WATERMARK_FILE, OffsetCheckpoint
from floodmark.reference.log.epoch_journal import LeaderEpochJournal
from floodmark.reference.log.partition_log import (
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_SEGMENT_RECORDS,
    PartitionLog,
)
from floodmark.reference.runtime import Storage

TopicPartitionKey = tuple[str, int]
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class LogDirOfflineError(OSError):
    """An operation needed a log directory that is (or just went) offline."""

    def __init__(self, directory: str | None, cause: str, newly_offline: list[TopicPartitionKey]) -> None:
        super().__init__(f"log directory {directory or '(none online)'} is offline: {cause}")
        self.directory = directory
        self.cause = cause
        self.newly_offline = newly_offline  # replicas this failure took offline (empty if it already was)


@dataclass(frozen=True)
class OfflineDir:
    directory: str
    error: str  # what took it offline


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> TopicPartitionKey | None:
    """``t0-3`` -> ("t0", 3); topics may contain '-', the partition is after the last one."""
    topic, dash, number = name.rpartition("-")
    if not dash or not topic or not number.isdigit():
        return None
    return topic, int(number)


class LogDirs:
    """The broker's log directories and which replica lives where."""

    def __init__(self, storage: Storage, dirs: list[str], *, segment_records: int = DEFAULT_SEGMENT_RECORDS,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        if not dirs:
            raise ValueError("at least one log directory is needed")
        if len(set(dirs)) != len(dirs):
            raise ValueError(f"log directories listed twice: {dirs}")
        self.storage = storage
        self.dirs = list(dirs)
        self.segment_records = segment_records
        self.segment_bytes = segment_bytes
        self._offline: dict[str, OfflineDir] = {}
        self._location: dict[TopicPartitionKey, str] = {}
        self._replica_counts: Counter[str] = Counter()  # replicas per directory, for choose_dir
        self._open: dict[TopicPartitionKey, PartitionLog] = {}
        self._journals: dict[str, LeaderEpochJournal] = {}  # of the online directories
        for directory in self.dirs:
            try:
                self._discover(directory)
                self._journals[directory] = LeaderEpochJournal.open(
                    storage, directory, functools.partial(self._lives_in, directory=directory))
            except OSError as error:
                self.mark_offline(directory, error)

    def _discover(self, directory: str) -> None:
        self.storage.make_dirs(directory)
        for name in self.storage.list_dir(directory):
            key = parse_partition_dir_name(name)
            if key is None or not self.storage.is_dir(posixpath.join(directory, name)):
                continue
            if key in self._location:
                raise ValueError(
                    f"replica {name} exists in two log directories: {self._location[key]} and {directory}")
            self._place(key, directory)

    def _lives_in(self, name: str, directory: str) -> bool:
        """Is ``name`` (``t-0``) a replica in ``directory``?"""
        key = parse_partition_dir_name(name)
        return key is not None and self._location.get(key) == directory

    # ------------------------------------------------------------------ queries

    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.dirs if d not in self._offline]

    @property
    def offline_dirs(self) -> list[OfflineDir]:
        return [self._offline[d] for d in self.dirs if d in self._offline]

    def is_online(self, directory: str) -> bool:
        return directory not in self._offline

    def replicas(self) -> list[TopicPartitionKey]:
        """Every replica found or created, online or not, sorted."""
        return sorted(self._location)

    def partitions_in(self, directory: str) -> list[TopicPartitionKey]:
        return sorted(key for key, d in self._location.items() if d == directory)

    def dir_of(self, topic: str, partition: int) -> str | None:
        return self._location.get((topic, partition))

    def dir_containing(self, path: str) -> str | None:
        """The log directory ``path`` lies in, if any."""
        for directory in self.dirs:
            if path.startswith(directory.rstrip("/") + "/"):
                return directory
        return None

    def is_offline(self, topic: str, partition: int) -> bool:
        """True if the replica lives in an offline directory."""
        directory = self._location.get((topic, partition))  # dir_of, asked on every request
        return directory is not None and directory in self._offline

    def log_path(self, topic: str, partition: int) -> str | None:
        directory = self.dir_of(topic, partition)
        return None if directory is None else posixpath.join(directory, partition_dir_name(topic, partition))

    def open_logs(self) -> dict[TopicPartitionKey, PartitionLog]:
        return dict(self._open)

    def choose_dir(self) -> str:
        """The online directory with the fewest replicas (the first configured on ties)."""
        online = self.online_dirs
        if not online:
            raise LogDirOfflineError(None, "every log directory is offline", [])
        return min(online, key=lambda d: (self._replica_counts[d], self.dirs.index(d)))

    def _place(self, key: TopicPartitionKey, directory: str) -> None:
        previous = self._location.get(key)
        if previous == directory:
            return
        if previous is not None:
            self._replica_counts[previous] -= 1
        self._location[key] = directory
        self._replica_counts[directory] += 1

    # ------------------------------------------------------------------ changes

    def open_log(self, topic: str, partition: int, *, is_new: bool = False) -> PartitionLog:
        """The replica's log, opened (and recovered) once; created in a chosen dir if absent.

        A log that is found nowhere is created only for a new partition or while every
        directory is online (Kafka's rule): an offline directory may hold it, and a second
        copy elsewhere would leave the broker unable to start once that directory is back.
        """
        key = (topic, partition)
        if key in self._open:
            return self._open[key]
        directory = self._location.get(key)
        if directory is None and not is_new and self._offline:
            offline = next(d for d in self.dirs if d in self._offline)
            raise LogDirOfflineError(offline, f"{topic}-{partition} may be in it: not created elsewhere", [])
        directory = directory or self.choose_dir()
        if directory in self._offline:
            raise LogDirOfflineError(directory, self._offline[directory].error, [])
        try:
            log = PartitionLog.open(self.storage, posixpath.join(directory, partition_dir_name(topic, partition)),
                                    segment_records=self.segment_records, segment_bytes=self.segment_bytes,
                                    journal=self._journals.get(directory))
        except OSError as error:
            self._place(key, directory)  # the replica is now known to live there
            raise self._failed(directory, error) from error
        self._place(key, directory)
        self._open[key] = log
        return log

    def delete(self, topic: str, partition: int) -> None:
        """Close and delete the replica (StopReplica with delete, or a removed assignment)."""
        key = (topic, partition)
        directory = self._location.get(key)
        if directory is None:
            return
        if directory in self._offline:
            raise LogDirOfflineError(directory, self._offline[directory].error, [])
        log = self._open.pop(key, None)
        if log is not None:
            log.close()
        path = posixpath.join(directory, partition_dir_name(topic, partition))
        try:
            if self.storage.exists(path):
                self.storage.remove_tree(path)
            journal = self._journals.get(directory)
            if journal is not None:
                journal.forget(partition_dir_name(topic, partition))
        except OSError as error:
            raise self._failed(directory, error) from error
        del self._location[key]
        self._replica_counts[directory] -= 1

    def close_log(self, topic: str, partition: int) -> None:
        """Close the replica's log but keep its data (StopReplica without delete)."""
        log = self._open.pop((topic, partition), None)
        if log is not None:
            log.close()

    def mark_offline(self, directory: str, error: BaseException | str) -> list[TopicPartitionKey]:
        """Take ``directory`` offline; returns the replicas this took offline (empty if it
        already was offline). Their open logs are closed."""
        if directory not in self.dirs:
            raise ValueError(f"{directory} is not one of the log directories {self.dirs}")
        if directory in self._offline:
            return []
        self._offline[directory] = OfflineDir(directory, _describe(error))
        journal = self._journals.pop(directory, None)
        if journal is not None:
            journal.close()
        held = self.partitions_in(directory)
        for key in held:
            log = self._open.pop(key, None)
            if log is not None:
                log.close()
        return held

    def high_watermark_checkpoint(self, directory: str) -> OffsetCheckpoint:
        """The HW checkpoint file of ``directory`` (``replication-offset-checkpoint``)."""
        return OffsetCheckpoint(self.storage, posixpath.join(directory, HIGH_WATERMARK_FILE))

    def read_high_watermarks(self) -> tuple[dict[TopicPartitionKey, int], list[LogDirOfflineError]]:
        """The HW checkpoints of every online directory (start-up), and the failures:
        a directory whose checkpoint cannot be read goes offline."""
        high_watermarks: dict[TopicPartitionKey, int] = {}
        failures: list[LogDirOfflineError] = []
        for directory in self.online_dirs:
            try:
                found = self.high_watermark_checkpoint(directory).read()
            except OSError as error:
                failures.append(self._failed(directory, error))
                continue
            # Only replicas that live here count: a stale entry for a moved replica does not.
            high_watermarks.update({k: v for k, v in found.items() if self._location.get(k) == directory})
        return high_watermarks, failures

    def write_high_watermarks(self, high_watermarks: dict[TopicPartitionKey, int]) -> list[LogDirOfflineError]:
        """Checkpoint each online directory's replicas' HWs; failing directories go offline."""
        failures: list[LogDirOfflineError] = []
        for directory in self.online_dirs:
            mine = {k: v for k, v in high_watermarks.items() if self._location.get(k) == directory}
            try:
                self.high_watermark_checkpoint(directory).write(mine)
            except OSError as error:
                failures.append(self._failed(directory, error))
        return failures

    def close(self) -> None:
        for key in sorted(self._open):
            self._open.pop(key).close()
        for journal in self._journals.values():
            journal.close()

    # ------------------------------------------------------------------ epoch journals

    def defer_syncs(self) -> None:
        """Start a group commit: epoch journal lines and atomic file writes wait for
        ``complete_syncs`` (see ``Storage.defer_syncs``)."""
        self.storage.defer_syncs()
        for journal in self._journals.values():
            journal.defer()

    def complete_syncs(self) -> list[OSError]:
        """Make the group commit durable: one journal sync per directory, one sync per file
        system for the files. Returns the failures, each naming a path in its directory."""
        failures = self.storage.complete_syncs()
        for directory in self.dirs:  # every directory's batch ends, online or not
            journal = self._journals.get(directory)
            if journal is not None:
                failures += journal.complete()
        return failures

    def epoch_checkpoints_behind(self) -> int:
        """How many replicas' epoch checkpoint files lag behind their directory's journal."""
        return sum(journal.pending for journal in self._journals.values())

    def compact_epoch_journals(self, limit: int) -> tuple[int, list[LogDirOfflineError]]:
        """Bring up to ``limit`` epoch checkpoint files per directory up to date. Returns how
        many still lag, and the directories that failed doing so (they go offline)."""
        failures: list[LogDirOfflineError] = []
        for directory in self.online_dirs:
            journal = self._journals.get(directory)
            if journal is None or not journal.pending:
                continue
            try:
                journal.compact(limit)
            except OSError as error:
                failures.append(self._failed(directory, error))
        return self.epoch_checkpoints_behind(), failures

    # ------------------------------------------------------------------ clean shutdown markers

    def clear_clean_shutdown_markers(self) -> tuple[bool, list[LogDirOfflineError]]:
        """Start-up: whether every online directory holding replicas was shut down cleanly,
        and the directories that failed finding out (they go offline). The markers are
        removed, durably, so that from now on a crash is an unclean shutdown."""
        clean = True
        failures: list[LogDirOfflineError] = []
        for directory in self.online_dirs:
            marker = posixpath.join(directory, CLEAN_SHUTDOWN_FILE)
            try:
                if not self.storage.exists(marker):
                    clean = clean and not self.partitions_in(directory)
                    continue
                self.storage.remove(marker)
                # A removal is durable once its directory is synced: rewriting the HW
                # checkpoint beside it (write_atomic syncs the directory) does that.
                checkpoint = self.high_watermark_checkpoint(directory)
                checkpoint.write(checkpoint.read())
            except OSError as error:
                # Offline for this run, so nothing in it changes: the next start judges it.
                failures.append(self._failed(directory, error))
        return clean, failures

    def write_clean_shutdown_markers(self) -> None:
        """Clean shutdown, after the final flush: a durable marker in every online directory.
        A directory that cannot take one is judged unclean at the next start, which is safe."""
        for directory in self.online_dirs:
            with contextlib.suppress(OSError):
                self.storage.write_atomic(posixpath.join(directory, CLEAN_SHUTDOWN_FILE), b"")

    def _failed(self, directory: str, error: OSError) -> LogDirOfflineError:
        newly = self.mark_offline(directory, error)
        return LogDirOfflineError(directory, _describe(error), newly)


def _describe(error: BaseException | str) -> str:
    return error if isinstance(error, str) else f"{type(error).__name__}: {error}"
