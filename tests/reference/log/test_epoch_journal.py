"""The leader epoch journal: epoch caches persisted per log directory, and every crash point.

Power losses are the simulated disk's (unsynced bytes and uncommitted metadata lost); the
round trips and the torn tail also run on real files.
"""

from __future__ import annotations

import pytest
from storage_fixtures import StorageRoot

from floodmark.reference.log.checkpoint import MalformedFileError
from floodmark.reference.log.epoch_cache import EPOCH_CHECKPOINT_FILE, EpochEntry
from floodmark.reference.log.epoch_journal import (
    EPOCH_JOURNAL_FILE,
    LeaderEpochJournal,
    encode_snapshot,
    parse_journal,
)
from floodmark.reference.log.log_dirs import LogDirs
from floodmark.reference.protocol.messages import Record
from floodmark.reference.sim.disk import SimDisk

DIR = "/d"
JOURNAL = f"{DIR}/{EPOCH_JOURNAL_FILE}"


def entries(*pairs: tuple[int, int]) -> tuple[EpochEntry, ...]:
    return tuple(EpochEntry(epoch, start) for epoch, start in pairs)


def reopened(disk: SimDisk, partitions: int) -> LogDirs:
    """A broker starting again on ``disk`` (after whatever happened to it)."""
    dirs = LogDirs(disk, [DIR])
    for p in range(partitions):
        dirs.open_log("t", p)
    return dirs


def cache(dirs: LogDirs, partition: int) -> tuple[EpochEntry, ...]:
    return dirs.open_log("t", partition).epoch_cache.entries


def led(disk: SimDisk, partitions: int, epoch: int) -> LogDirs:
    """Logs with two records of ``epoch`` each; then epoch ``epoch + 1`` begun at offset 2 in
    one deferred batch, as becoming leader does, and a record appended in it (the records
    flushed: epochs without records are dropped when a log is opened)."""
    dirs = LogDirs(disk, [DIR])
    for p in range(partitions):
        dirs.open_log("t", p).append_as_leader(["a", "b"], epoch)
    dirs.defer_syncs()
    for p in range(partitions):
        dirs.open_log("t", p).epoch_cache.assign(epoch + 1, 2)
    assert dirs.complete_syncs() == []
    for p in range(partitions):
        log = dirs.open_log("t", p)
        log.append_as_leader(["c"], epoch + 1)
        log.flush()
    return dirs


def test_a_batch_is_one_journal_append_and_no_file_per_log() -> None:
    disk = SimDisk()
    led(disk, 3, epoch=4)
    assert disk.durable_contents(f"{DIR}/t-0/{EPOCH_CHECKPOINT_FILE}") is None
    assert parse_journal(JOURNAL, disk.durable_contents(JOURNAL) or b"")["t-2"] == entries((4, 0), (5, 2))


def test_a_completed_batch_survives_a_power_loss() -> None:
    disk = SimDisk()
    dirs = LogDirs(disk, [DIR])
    dirs.defer_syncs()
    for p in range(3):
        dirs.open_log("t", p).epoch_cache.assign(5, 0)
    assert dirs.complete_syncs() == []
    disk.power_loss()  # before any record of epoch 5: the journal has it all the same
    assert parse_journal(JOURNAL, disk.read(JOURNAL)) == {f"t-{p}": entries((5, 0)) for p in range(3)}


def test_a_batch_not_completed_is_lost_whole_and_the_older_state_stands() -> None:
    disk = SimDisk()
    dirs = led(disk, 2, epoch=4)
    dirs.defer_syncs()
    dirs.open_log("t", 0).epoch_cache.assign(9, 3)
    disk.power_loss()  # before complete_syncs: nobody acted on epoch 9
    assert parse_journal(JOURNAL, disk.read(JOURNAL))["t-0"] == entries((4, 0), (5, 2))
    assert cache(reopened(disk, 2), 0) == entries((4, 0), (5, 2))


def test_outside_a_batch_a_change_is_durable_on_return() -> None:
    disk = SimDisk()
    dirs = led(disk, 1, epoch=4)
    log = dirs.open_log("t", 0)
    log.append_as_leader(["d"], 6)
    log.flush()
    disk.power_loss()
    assert cache(reopened(disk, 1), 0) == entries((4, 0), (5, 2), (6, 3))


@pytest.mark.parametrize("crash_after_steps", [0, 1, 2, 3])
def test_compaction_can_crash_anywhere(crash_after_steps: int) -> None:
    disk = SimDisk()
    dirs = led(disk, 5, epoch=4)
    for _ in range(crash_after_steps):
        dirs.compact_epoch_journals(2)  # 2 checkpoint files a step; the journal emptied after the last
    disk.power_loss()
    again = reopened(disk, 5)
    assert [cache(again, p) for p in range(5)] == [entries((4, 0), (5, 2))] * 5
    if crash_after_steps == 3:
        assert disk.durable_contents(JOURNAL) == b"0\n"
        assert disk.durable_contents(f"{DIR}/t-4/{EPOCH_CHECKPOINT_FILE}") == b"0\n2\n4 0\n5 2\n"


def test_a_change_after_compaction_wins_over_the_checkpoint_file() -> None:
    disk = SimDisk()
    dirs = led(disk, 1, epoch=4)
    assert dirs.compact_epoch_journals(10) == (0, [])
    dirs.open_log("t", 0).truncate_to(1)  # epoch 5 started at 2: gone
    disk.power_loss()
    assert cache(reopened(disk, 1), 0) == entries((4, 0))


def forgot_an_epoch(disk: SimDisk, *, compacted: bool) -> LogDirs:
    """Led epoch 7 from offset 2 without writing, then followed a leader whose epoch 4 went on
    to offset 4: the cache is (4, 0) alone, which the records cannot tell from (4, 0), (7, 2)
    when the log is opened. ``compacted``: the checkpoint file still says 7 at 2."""
    dirs = LogDirs(disk, [DIR])
    log = dirs.open_log("t", 0)
    log.append_as_leader(["a", "b"], 4)
    log.epoch_cache.assign(7, 2)
    if compacted:
        assert dirs.compact_epoch_journals(10) == (0, [])
    log.append_as_follower([Record(2, 4, "x"), Record(3, 4, "y")])
    log.flush()
    assert log.epoch_cache.entries == entries((4, 0))
    return dirs


@pytest.mark.parametrize("compacted", [False, True])
def test_an_epoch_a_follower_forgets_does_not_come_back(compacted: bool) -> None:
    disk = SimDisk()
    forgot_an_epoch(disk, compacted=compacted)
    disk.power_loss()
    assert cache(reopened(disk, 1), 0) == entries((4, 0))


def test_a_compaction_that_fails_midway_keeps_the_journal() -> None:
    disk = SimDisk()
    dirs = forgot_an_epoch(disk, compacted=True)
    disk.fail_io(f"{DIR}/t-0")  # its checkpoint file cannot be rewritten
    remaining, failures = dirs.compact_epoch_journals(10)
    assert failures and dirs.online_dirs == []
    disk.heal()
    disk.power_loss()
    assert cache(reopened(disk, 1), 0) == entries((4, 0))  # not the checkpoint file's 7 at 2


@pytest.mark.parametrize("compacted_first", [False, True])
def test_a_deleted_log_created_again_never_inherits_the_old_epochs(compacted_first: bool) -> None:
    disk = SimDisk()
    dirs = led(disk, 1, epoch=4)
    if compacted_first:
        dirs.compact_epoch_journals(10)
    dirs.delete("t", 0)
    log = dirs.open_log("t", 0, is_new=True)
    assert log.epoch_cache.entries == ()
    log.append_as_follower([Record(0, 2, "x")])
    log.flush()
    disk.power_loss()
    assert cache(reopened(disk, 1), 0) == entries((2, 0))


def test_a_journal_line_of_a_log_that_no_longer_exists_is_dropped_on_open() -> None:
    disk = SimDisk()
    led(disk, 2, epoch=4)
    disk.remove_tree(f"{DIR}/t-1")
    assert LogDirs(disk, [DIR]).epoch_checkpoints_behind() == 1
    assert "t-1" not in parse_journal(JOURNAL, disk.read(JOURNAL))


def test_a_torn_last_line_is_ignored_and_cut_off(storage_root: StorageRoot) -> None:
    directory = storage_root.path("d")
    storage_root.storage.make_dirs(directory)
    journal = LeaderEpochJournal.open(storage_root.storage, directory, lambda name: True)
    journal.record("t-0", entries((1, 0)))
    journal.close()
    path = f"{directory}/{EPOCH_JOURNAL_FILE}"
    torn = storage_root.storage.open_append(path)
    torn.write(b"t-0 1 2")  # a crash in the middle of an append
    torn.fsync()
    torn.close()
    again = LeaderEpochJournal.open(storage_root.storage, directory, lambda name: True)
    assert again.snapshot("t-0") == entries((1, 0))
    again.record("t-1", entries((3, 5)))
    assert parse_journal(path, storage_root.storage.read(path)) == {"t-0": entries((1, 0)), "t-1": entries((3, 5))}


@pytest.mark.parametrize(("text", "line", "problem"), [
    (b"", 1, "empty file"),
    (b"1\n", 1, "unsupported format version"),
    (b"0\nt-0\n", 2, "a log name and an entry count"),
    (b"0\nt-0 x\n", 2, "entry count 'x' is not an integer"),
    (b"0\nt-0 2 1 0\n", 2, "does not match"),
    (b"0\nt-0 1 1 -4\n", 2, "must not be negative"),
    (b"0\nt-1 0\nt-0 2 5 0 3 9\n", 3, "epochs must increase"),
    (b"0\n\xff\n", 2, "not UTF-8"),
])
def test_a_malformed_journal_says_where(text: bytes, line: int, problem: str) -> None:
    with pytest.raises(MalformedFileError) as raised:
        parse_journal(JOURNAL, text)
    assert raised.value.line == line and problem in raised.value.problem


def test_a_malformed_journal_takes_its_directory_offline_alone() -> None:
    disk = SimDisk()
    disk.make_dirs("/a")
    disk.make_dirs("/b")
    disk.write_atomic(f"/a/{EPOCH_JOURNAL_FILE}", b"0\nt-0 1 x 0\n")
    dirs = LogDirs(disk, ["/a", "/b"])
    assert dirs.online_dirs == ["/b"]
    assert "line 2: epoch 'x' is not an integer" in dirs.offline_dirs[0].error


def test_snapshot_lines_refuse_names_with_spaces() -> None:
    assert encode_snapshot("t-0", entries((1, 0), (3, 4))) == b"t-0 2 1 0 3 4\n"
    with pytest.raises(ValueError):
        encode_snapshot("t 0", ())
