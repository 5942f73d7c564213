"""SimDisk: the Storage protocol in memory, its crash semantics and its disk faults."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest

from floodmark.reference.real.files import FileStorage
from floodmark.reference.runtime import Storage
from floodmark.reference.sim.disk import SimDisk
from floodmark.reference.sim.disk_faults import DISPLACED


@pytest.fixture
def disk() -> SimDisk:
    d = SimDisk()
    d.make_dirs("/data/a")
    return d


def test_basic_file_operations(disk: SimDisk) -> None:
    f = disk.open_append("/data/a/x.log")
    f.write(b"hello ")
    f.write(b"world")
    assert f.size() == 11
    assert disk.read("/data/a/x.log") == b"hello world"
    assert disk.read("/data/a/x.log", 6) == b"world"
    assert disk.read("/data/a/x.log", 2, 3) == b"llo"
    assert disk.size("/data/a/x.log") == 11
    assert disk.exists("/data/a/x.log") and not disk.is_dir("/data/a/x.log")
    assert disk.is_dir("/data/a") and disk.is_dir("/")
    assert disk.list_dir("/data/a") == ["x.log"]
    disk.truncate("/data/a/x.log", 5)
    assert disk.read("/data/a/x.log") == b"hello"
    f.write(b"!")  # append mode writes at the (new) end
    assert disk.read("/data/a/x.log") == b"hello!"


def test_list_dir_is_sorted_and_make_dirs_is_idempotent(disk: SimDisk) -> None:
    for name in ["b", "c", "a"]:
        disk.open_append(f"/data/a/{name}").close()
    disk.make_dirs("/data/a/sub/deeper")
    disk.make_dirs("/data/a/sub")
    assert disk.list_dir("/data/a") == ["a", "b", "c", "sub"]


def test_errors_match_the_os(disk: SimDisk) -> None:
    disk.open_append("/data/a/file").close()
    with pytest.raises(FileNotFoundError):
        disk.read("/data/a/missing")
    with pytest.raises(FileNotFoundError):
        disk.open_append("/data/nowhere/x")
    with pytest.raises(FileNotFoundError):
        disk.list_dir("/data/b")
    with pytest.raises(NotADirectoryError):
        disk.list_dir("/data/a/file")
    with pytest.raises(NotADirectoryError):
        disk.open_append("/data/a/file/x")
    with pytest.raises(IsADirectoryError):
        disk.open_append("/data/a")
    with pytest.raises(IsADirectoryError):
        disk.read("/data/a")
    with pytest.raises(IsADirectoryError):
        disk.remove("/data/a")
    with pytest.raises(FileExistsError):
        disk.make_dirs("/data/a/file")
    with pytest.raises(NotADirectoryError):
        disk.make_dirs("/data/a/file/sub")
    with pytest.raises(FileNotFoundError):
        disk.remove("/data/a/missing")
    with pytest.raises(ValueError, match="absolute"):
        disk.exists("relative/path")
    assert not disk.exists("/data/a/file/x")  # ENOTDIR reads as "does not exist", like os.stat


def test_rename_and_remove(disk: SimDisk) -> None:
    disk.write_atomic("/data/a/one", b"1")
    disk.write_atomic("/data/a/two", b"2")
    disk.rename("/data/a/one", "/data/a/two")  # replaces, like os.rename
    assert disk.list_dir("/data/a") == ["two"]
    assert disk.read("/data/a/two") == b"1"
    disk.make_dirs("/data/a/d/e")
    disk.write_atomic("/data/a/d/e/f", b"f")
    disk.rename("/data/a/d", "/data/a/moved")
    assert disk.read("/data/a/moved/e/f") == b"f"
    with pytest.raises(OSError) as info:
        disk.rename("/data/a/moved", "/data/a/moved/e/inside")
    assert info.value.errno == errno.EINVAL
    disk.remove_tree("/data/a/moved")
    assert disk.list_dir("/data/a") == ["two"]
    disk.remove("/data/a/two")
    assert disk.list_dir("/data/a") == []


def test_an_open_file_outlives_its_directory_entry(disk: SimDisk) -> None:
    f = disk.open_append("/data/a/x")
    disk.remove("/data/a/x")
    f.write(b"still works")  # as on Linux: the inode lives while it is open
    assert f.size() == 11
    assert not disk.exists("/data/a/x")


# ------------------------------------------------------------------ crash semantics


def test_crash_drops_exactly_the_unsynced_suffix(disk: SimDisk) -> None:
    f = disk.open_append("/data/a/seg")
    f.write(b"durable")
    f.fsync()
    f.write(b"-lost")
    assert disk.unsynced_bytes("/data/a/seg") == 5
    assert disk.durable_contents("/data/a/seg") == b"durable"
    disk.crash()
    assert disk.read("/data/a/seg") == b"durable"
    assert disk.unsynced_bytes("/data/a/seg") == 0


def test_a_power_loss_may_keep_a_prefix_of_the_unsynced_suffix_cut_anywhere(disk: SimDisk) -> None:
    f = disk.open_append("/data/a/seg")
    f.write(b"durable")
    f.fsync()
    f.write(b"-written-back-lost")
    lost = disk.power_loss(written_back=lambda unsynced: 3)
    assert disk.read("/data/a/seg") == b"durable-wr"  # a torn tail: the page cache wrote some back
    assert (lost.unsynced_bytes, lost.written_back_bytes) == (15, 3)
    assert disk.unsynced_bytes("/data/a/seg") == 0  # what survived is on the platter now


def test_a_power_loss_keeps_nothing_unsynced_of_a_file_whose_truncation_is_pending(disk: SimDisk) -> None:
    f = disk.open_append("/data/a/seg")
    f.write(b"durable-tail")
    f.fsync()
    disk.truncate("/data/a/seg", 7)
    f.write(b"+new")
    disk.power_loss(written_back=lambda unsynced: unsynced)
    assert disk.read("/data/a/seg") == b"durable-tail"  # the truncation is undone, "+new" never was


def test_crash_removes_files_never_made_durable(disk: SimDisk) -> None:
    disk.open_append("/data/a/synced").fsync()  # the fsync also commits /data/a itself
    f = disk.open_append("/data/a/never-synced")
    f.write(b"data")
    disk.make_dirs("/data/a/new-dir")
    disk.crash()
    assert disk.list_dir("/data/a") == ["synced"]


def test_a_later_fsync_commits_earlier_metadata(disk: SimDisk) -> None:
    g = disk.open_append("/data/a/g")
    g.write(b"unsynced")
    disk.open_append("/data/a/other").fsync()  # commits the journal, not g's data
    disk.crash()
    assert disk.list_dir("/data/a") == ["g", "other"]
    assert disk.read("/data/a/g") == b""


def test_rename_and_remove_are_undone_by_a_crash_before_commit(disk: SimDisk) -> None:
    disk.write_atomic("/data/a/old", b"x")
    disk.rename("/data/a/old", "/data/a/new")
    disk.crash()
    assert disk.list_dir("/data/a") == ["old"]
    disk.remove("/data/a/old")
    disk.crash()
    assert disk.list_dir("/data/a") == ["old"]
    disk.remove("/data/a/old")
    disk.write_atomic("/data/a/marker", b"")  # write_atomic commits everything before it
    disk.crash()
    assert disk.list_dir("/data/a") == ["marker"]


def test_write_atomic_is_durable_and_replaces_whole(disk: SimDisk) -> None:
    disk.write_atomic("/data/a/cp", b"version 1")
    disk.write_atomic("/data/a/cp", b"v2")
    disk.crash()
    assert disk.read("/data/a/cp") == b"v2"


def test_a_group_commit_shows_its_writes_only_once_complete(disk: SimDisk) -> None:
    disk.write_atomic("/data/a/cp", b"old")
    disk.defer_syncs()
    disk.write_atomic("/data/a/cp", b"new")
    disk.write_atomic("/data/a/other", b"x")
    assert disk.read("/data/a/cp") == b"old" and not disk.exists("/data/a/other")
    assert disk.complete_syncs() == []
    disk.crash()
    assert disk.read("/data/a/cp") == b"new" and disk.read("/data/a/other") == b"x"


def test_a_crash_before_the_group_commit_completes_loses_its_writes(disk: SimDisk) -> None:
    disk.write_atomic("/data/a/cp", b"old")
    disk.defer_syncs()
    disk.write_atomic("/data/a/cp", b"new")
    disk.crash()
    assert disk.complete_syncs() == []  # nothing left to commit
    assert disk.read("/data/a/cp") == b"old"


def test_a_group_commit_reports_the_paths_that_failed(disk: SimDisk) -> None:
    disk.make_dirs("/data/b")
    disk.defer_syncs()
    disk.write_atomic("/data/a/cp", b"a")
    disk.write_atomic("/data/b/cp", b"b")
    disk.fail_io("/data/b")
    failures = disk.complete_syncs()
    assert [f.filename for f in failures] == ["/data/b/cp"]
    disk.heal()
    assert disk.read("/data/a/cp") == b"a" and not disk.exists("/data/b/cp")


def test_truncation_is_undone_by_a_crash_unless_committed(disk: SimDisk) -> None:
    f = disk.open_append("/data/a/seg")
    f.write(b"0123456789")
    f.fsync()
    disk.truncate("/data/a/seg", 4)
    f.write(b"ab")
    disk.crash()  # neither the truncation nor the new bytes were committed
    assert disk.read("/data/a/seg") == b"0123456789"

    f = disk.open_append("/data/a/seg")
    disk.truncate("/data/a/seg", 4)
    f.write(b"ab")
    disk.write_atomic("/data/a/other", b"")  # commits the truncation, not the new bytes
    disk.crash()
    assert disk.read("/data/a/seg") == b"0123"

    f = disk.open_append("/data/a/seg")
    disk.truncate("/data/a/seg", 2)
    f.write(b"xyz")
    f.fsync()
    disk.crash()
    assert disk.read("/data/a/seg") == b"01xyz"


def test_files_opened_before_a_crash_are_dead_after_it(disk: SimDisk) -> None:
    f = disk.open_append("/data/a/seg")
    disk.crash()
    with pytest.raises(OSError) as info:
        f.write(b"x")
    assert info.value.errno == errno.EBADF


# ------------------------------------------------------------------ permission faults


def test_chmod_000_denies_listing_opening_and_creating(disk: SimDisk) -> None:
    disk.make_dirs("/data/a/t-0")
    disk.write_atomic("/data/a/t-0/seg", b"x")
    disk.chmod("/data/a", 0)
    assert disk.is_dir("/data/a")  # stat of the directory itself needs only its parent
    with pytest.raises(PermissionError):
        disk.list_dir("/data/a")
    with pytest.raises(PermissionError):
        disk.open_append("/data/a/t-0/seg")
    with pytest.raises(PermissionError):
        disk.open_append("/data/a/new")
    with pytest.raises(PermissionError):
        disk.read("/data/a/t-0/seg")
    with pytest.raises(PermissionError):
        disk.exists("/data/a/t-0")  # os.stat fails with EACCES; we do not hide it as "missing"
    with pytest.raises(PermissionError):
        disk.write_atomic("/data/a/cp", b"x")
    with pytest.raises(PermissionError):
        disk.remove_tree("/data/a/t-0")
    disk.chmod("/data/a", 0o755)
    assert disk.read("/data/a/t-0/seg") == b"x"


def test_open_files_keep_working_after_chmod(disk: SimDisk) -> None:
    f = disk.open_append("/data/a/seg")
    disk.chmod("/data/a", 0)
    f.write(b"abc")
    f.fsync()
    assert f.size() == 3
    disk.heal()
    assert disk.read("/data/a/seg") == b"abc"


def test_read_only_directory_allows_reads_but_not_creation(disk: SimDisk) -> None:
    disk.write_atomic("/data/a/seg", b"x")
    disk.chmod("/data/a", 0o500)
    assert disk.list_dir("/data/a") == ["seg"]
    assert disk.read("/data/a/seg") == b"x"
    with pytest.raises(PermissionError):
        disk.open_append("/data/a/new")
    with pytest.raises(PermissionError):
        disk.remove("/data/a/seg")


def test_chmod_on_a_missing_path_fails(disk: SimDisk) -> None:
    with pytest.raises(FileNotFoundError):
        disk.chmod("/data/zzz", 0)


def test_modes_survive_a_crash(disk: SimDisk) -> None:
    disk.write_atomic("/data/a/x", b"")  # makes /data/a durable
    disk.chmod("/data/a", 0)
    disk.crash()
    with pytest.raises(PermissionError):
        disk.list_dir("/data/a")


def test_directory_replaced_by_a_file(disk: SimDisk) -> None:
    disk.make_dirs("/data/a/t-0")
    f = disk.open_append("/data/a/t-0/seg")
    disk.replace_with_file("/data/a")
    assert not disk.is_dir("/data/a")
    assert not disk.exists("/data/a/t-0")
    with pytest.raises(NotADirectoryError):
        disk.list_dir("/data/a")
    with pytest.raises(NotADirectoryError):
        disk.open_append("/data/a/t-0/seg")
    f.write(b"open files keep working")
    disk.crash()  # the replacement is durable
    assert not disk.is_dir("/data/a")


def test_a_replaced_directory_comes_back_with_its_contents_when_healed(disk: SimDisk) -> None:
    disk.make_dirs("/data/a/t-0")
    disk.write_atomic("/data/a/t-0/seg", b"records")
    fault = disk.replace_with_file("/data/a")
    assert fault.moved_to == "/data/a" + DISPLACED
    assert disk.list_dir("/data") == ["a", "a" + DISPLACED]  # as `mv dir dir.displaced; touch dir`
    disk.crash()  # the displacement is durable
    assert not disk.is_dir("/data/a")
    assert disk.heal_fault(fault)
    assert disk.list_dir("/data") == ["a"]
    assert disk.read("/data/a/t-0/seg") == b"records"
    disk.crash()  # and so is the return
    assert disk.read("/data/a/t-0/seg") == b"records"
    assert not disk.heal_fault(fault)  # healed already


def test_chmod_faults_heal_one_at_a_time_back_to_the_recorded_mode(disk: SimDisk) -> None:
    disk.write_atomic("/data/a/seg", b"x")
    read_only = disk.chmod("/data/a", 0o500)
    closed = disk.chmod("/data/a", 0)
    assert (read_only.previous_mode, closed.previous_mode) == (None, 0o500)
    with pytest.raises(PermissionError):
        disk.list_dir("/data/a")
    disk.heal_fault(read_only)  # the later fault is still in force
    with pytest.raises(PermissionError):
        disk.list_dir("/data/a")
    disk.heal_fault(closed)
    assert disk.list_dir("/data/a") == ["seg"]
    disk.open_append("/data/a/new").close()  # no restriction left: the recorded mode


def test_healing_one_fault_leaves_the_others_in_force(disk: SimDisk) -> None:
    disk.make_dirs("/data/b")
    disk.make_dirs("/data/c")
    failing = disk.fail_io("/data/b", errno.ENOSPC)
    closed = disk.chmod("/data/c", 0)
    replaced = disk.replace_with_file("/data/a")
    assert disk.faults.active() == [failing, closed, replaced]
    disk.heal_fault(closed)
    assert disk.list_dir("/data/c") == []
    with pytest.raises(OSError) as info:
        disk.open_append("/data/b/x")
    assert info.value.errno == errno.ENOSPC
    assert not disk.is_dir("/data/a")
    assert disk.heal() == [replaced, failing]  # the rest, latest first
    assert disk.is_dir("/data/a") and disk.list_dir("/data/b") == []
    assert disk.faults.active() == []


# ------------------------------------------------------------------ injected I/O errors


def test_fail_io_affects_the_prefix_and_open_files_until_healed(disk: SimDisk) -> None:
    disk.make_dirs("/data/ab")
    f = disk.open_append("/data/a/seg")
    disk.fail_io("/data/a")
    for action in (lambda: disk.list_dir("/data/a"), lambda: f.write(b"x"), f.fsync,
                   lambda: disk.open_append("/data/a/new"), lambda: disk.read("/data/a/seg")):
        with pytest.raises(OSError) as info:
            action()
        assert info.value.errno == errno.EIO
    disk.open_append("/data/ab/fine").write(b"ok")  # a sibling with a common prefix is unaffected
    disk.heal()
    f.write(b"x")
    assert disk.read("/data/a/seg") == b"x"


def test_fail_io_with_another_errno(disk: SimDisk) -> None:
    disk.fail_io("/data/a", errno=errno.ENOSPC)
    with pytest.raises(OSError) as info:
        disk.open_append("/data/a/seg")
    assert info.value.errno == errno.ENOSPC


def test_rename_edge_cases_match_the_os(disk: SimDisk) -> None:
    disk.make_dirs("/data/a/d/inner")
    disk.write_atomic("/data/a/f", b"f")
    disk.rename("/data/a/d", "/data/a/d")  # onto itself: nothing happens
    assert disk.list_dir("/data/a") == ["d", "f"]
    with pytest.raises(IsADirectoryError):
        disk.rename("/data/a/f", "/data/a/d")
    with pytest.raises(NotADirectoryError):
        disk.rename("/data/a/d", "/data/a/f")
    disk.make_dirs("/data/a/full/x")
    with pytest.raises(OSError) as info:
        disk.rename("/data/a/d", "/data/a/full")
    assert info.value.errno == errno.ENOTEMPTY
    with pytest.raises(FileNotFoundError):
        disk.rename("/data/a/missing", "/data/a/g")


def test_behaves_like_the_real_file_system(tmp_path: Path) -> None:
    """The same operations on SimDisk and on real files give the same results and errors."""

    def outcomes(storage: Storage, root: str) -> list[object]:
        steps: list[Callable[[], object]] = [
            lambda: storage.make_dirs(f"{root}/a/b"),
            lambda: storage.make_dirs(f"{root}/a/b"),
            lambda: storage.open_append(f"{root}/a/f").write(b"123456"),
            lambda: storage.read(f"{root}/a/f", 2, 2),
            lambda: storage.read(f"{root}/a/f", 4),
            lambda: storage.size(f"{root}/a/f"),
            lambda: storage.truncate(f"{root}/a/f", 3),
            lambda: storage.read(f"{root}/a/f"),
            lambda: storage.list_dir(f"{root}/a"),
            lambda: storage.exists(f"{root}/a/f/x"),
            lambda: storage.is_dir(f"{root}/a/b"),
            lambda: storage.read(f"{root}/a/missing"),
            lambda: storage.read(f"{root}/a/b"),
            lambda: storage.open_append(f"{root}/a/b"),
            lambda: storage.open_append(f"{root}/a/f/x"),
            lambda: storage.open_append(f"{root}/nowhere/x"),
            lambda: storage.list_dir(f"{root}/a/f"),
            lambda: storage.list_dir(f"{root}/zz"),
            lambda: storage.make_dirs(f"{root}/a/f/sub"),
            lambda: storage.remove(f"{root}/a/b"),
            lambda: storage.remove(f"{root}/a/missing"),
            lambda: storage.remove_tree(f"{root}/a/f"),
            lambda: storage.remove_tree(f"{root}/a/zz"),
            lambda: storage.rename(f"{root}/a/f", f"{root}/a/b"),
            lambda: storage.rename(f"{root}/a/b", f"{root}/a/f"),
            lambda: storage.rename(f"{root}/a/f", f"{root}/a/g"),
            lambda: storage.write_atomic(f"{root}/a/b", b"x"),
            lambda: storage.write_atomic(f"{root}/a/g", b"new"),
            lambda: storage.read(f"{root}/a/g"),
            lambda: storage.remove_tree(f"{root}/a"),
            lambda: storage.exists(f"{root}/a"),
        ]
        results: list[object] = []
        for step in steps:
            try:
                results.append(step())
            except OSError as e:
                results.append((type(e).__name__, e.errno))
        return results

    disk = SimDisk()
    disk.make_dirs("/data")
    simulated = outcomes(disk, "/data")
    real = outcomes(FileStorage(), str(tmp_path))
    assert simulated == real
