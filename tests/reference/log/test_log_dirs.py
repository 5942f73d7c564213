"""LogDirs (JBOD): discovery, placement, and a failed directory going offline alone."""

from __future__ import annotations

import errno

import pytest
from storage_fixtures import StorageRoot

from floodmark.reference.log.checkpoint import HIGH_WATERMARK_FILE
from floodmark.reference.log.epoch_journal import EPOCH_JOURNAL_FILE
from floodmark.reference.log.log_dirs import (
    CLEAN_SHUTDOWN_FILE,
    LogDirOfflineError,
    LogDirs,
    parse_partition_dir_name,
)
from floodmark.reference.sim.disk import SimDisk


def two_dirs(sr: StorageRoot) -> list[str]:
    return [sr.path("a"), sr.path("b")]


def test_partition_dir_names() -> None:
    assert parse_partition_dir_name("t0-3") == ("t0", 3)
    assert parse_partition_dir_name("my-topic-12") == ("my-topic", 12)
    for other in ["t0", "-3", "t0-x", "t0-", HIGH_WATERMARK_FILE]:
        assert parse_partition_dir_name(other) is None


def test_new_replicas_go_to_the_emptiest_online_dir(storage_root: StorageRoot) -> None:
    dirs = LogDirs(storage_root.storage, two_dirs(storage_root))
    a, b = two_dirs(storage_root)
    for p in range(4):
        dirs.open_log("t0", p)
    assert dirs.partitions_in(a) == [("t0", 0), ("t0", 2)]
    assert dirs.partitions_in(b) == [("t0", 1), ("t0", 3)]
    assert dirs.dir_of("t0", 3) == b and dirs.dir_of("t9", 0) is None
    assert dirs.log_path("t0", 1) == f"{b}/t0-1"
    assert dirs.open_log("t0", 1) is dirs.open_log("t0", 1)  # opened once


def test_discovers_existing_replicas_at_start_up(storage_root: StorageRoot) -> None:
    dirs = LogDirs(storage_root.storage, two_dirs(storage_root))
    dirs.open_log("t0", 0).append_as_leader(["x"], 0)
    dirs.open_log("other-topic", 7)
    dirs.write_high_watermarks({("t0", 0): 1, ("other-topic", 7): 0})
    dirs.close()
    storage_root.storage.write_atomic(storage_root.path("a", "not-a-replica"), b"")

    restarted = LogDirs(storage_root.storage, two_dirs(storage_root))
    assert restarted.replicas() == [("other-topic", 7), ("t0", 0)]
    assert restarted.dir_of("other-topic", 7) == storage_root.path("b")
    assert restarted.read_high_watermarks() == ({("t0", 0): 1, ("other-topic", 7): 0}, [])
    assert [r.value for r in restarted.open_log("t0", 0).read(0, 10)] == ["x"]


def test_a_replica_in_two_dirs_is_refused(storage_root: StorageRoot) -> None:
    for d in two_dirs(storage_root):
        storage_root.storage.make_dirs(f"{d}/t0-0")
    with pytest.raises(ValueError, match="t0-0 exists in two log directories"):
        LogDirs(storage_root.storage, two_dirs(storage_root))


def test_delete_removes_the_replica(storage_root: StorageRoot) -> None:
    dirs = LogDirs(storage_root.storage, two_dirs(storage_root))
    dirs.open_log("t0", 0).append_as_leader(["x"], 0)
    dirs.delete("t0", 0)
    assert dirs.replicas() == []
    assert storage_root.storage.list_dir(storage_root.path("a")) == [EPOCH_JOURNAL_FILE]  # the replica is gone
    assert dirs.open_log("t0", 0).log_end == 0  # a fresh, empty replica
    dirs.delete("never", 0)  # unknown replica: nothing to do


def test_close_log_keeps_the_data(storage_root: StorageRoot) -> None:
    dirs = LogDirs(storage_root.storage, two_dirs(storage_root))
    log = dirs.open_log("t0", 0)
    log.append_as_leader(["kept"], 0)
    dirs.close_log("t0", 0)
    assert log.closed
    assert [r.value for r in dirs.open_log("t0", 0).read(0, 5)] == ["kept"]


# ------------------------------------------------------------------ offline directories


def sim_dirs() -> tuple[SimDisk, LogDirs]:
    disk = SimDisk()
    dirs = LogDirs(disk, ["/data/a", "/data/b"])
    for p in range(4):
        dirs.open_log("t0", p).append_as_leader([f"v{p}"], 0)
    return disk, dirs


def test_mark_offline_closes_that_dirs_replicas_only() -> None:
    disk, dirs = sim_dirs()
    logs = dirs.open_logs()
    assert dirs.mark_offline("/data/a", OSError(errno.EIO, "I/O error")) == [("t0", 0), ("t0", 2)]
    assert dirs.mark_offline("/data/a", "again") == []  # already offline: nothing new
    assert dirs.online_dirs == ["/data/b"]
    assert dirs.offline_dirs[0].directory == "/data/a" and "I/O error" in dirs.offline_dirs[0].error
    assert logs[("t0", 0)].closed and logs[("t0", 2)].closed
    assert dirs.is_offline("t0", 0) and not dirs.is_offline("t0", 1)
    # The good directory keeps serving, and takes every new replica.
    logs[("t0", 1)].append_as_leader(["more"], 0)
    assert [r.value for r in logs[("t0", 1)].read(0, 5)] == ["v1", "more"]
    dirs.open_log("t1", 0, is_new=True)
    assert dirs.dir_of("t1", 0) == "/data/b"
    with pytest.raises(LogDirOfflineError, match="/data/a is offline"):
        dirs.open_log("t0", 0)
    with pytest.raises(ValueError, match="not one of the log directories"):
        dirs.mark_offline("/data/c", "x")


def test_an_existing_partition_is_not_created_again_while_a_dir_is_offline() -> None:
    # The broker restarted while /data/a was unreadable: it does not know t0-0 is there. A
    # copy created in /data/b would leave it unable to start once /data/a is back.
    disk, dirs = sim_dirs()
    dirs.close()
    disk.chmod("/data/a", 0)
    restarted = LogDirs(disk, ["/data/a", "/data/b"])
    assert restarted.online_dirs == ["/data/b"] and restarted.dir_of("t0", 0) is None
    with pytest.raises(LogDirOfflineError, match="t0-0 may be in it"):
        restarted.open_log("t0", 0)
    restarted.open_log("t9", 0, is_new=True)  # a new partition cannot be anywhere else
    restarted.close()
    disk.chmod("/data/a", 0o755)
    assert LogDirs(disk, ["/data/a", "/data/b"]).replicas() == [("t0", 0), ("t0", 1), ("t0", 2), ("t0", 3), ("t9", 0)]


def test_permission_fault_on_open_takes_the_dir_offline() -> None:
    disk, dirs = sim_dirs()
    dirs.close_log("t0", 2)
    disk.chmod("/data/a", 0)
    with pytest.raises(LogDirOfflineError) as info:
        dirs.open_log("t0", 2)
    assert isinstance(info.value, OSError)
    assert info.value.directory == "/data/a"
    assert info.value.newly_offline == [("t0", 0), ("t0", 2)]
    assert "PermissionError" in info.value.cause
    assert dirs.online_dirs == ["/data/b"]
    # A replica already open in the good dir is untouched.
    assert dirs.open_log("t0", 3).append_as_leader(["ok"], 0) == 1


def test_a_broken_dir_at_start_up_is_offline_from_the_start() -> None:
    disk = SimDisk()
    disk.make_dirs("/data/a/t0-0")
    disk.make_dirs("/data/b")
    disk.replace_with_file("/data/a")
    dirs = LogDirs(disk, ["/data/a", "/data/b"])
    assert dirs.online_dirs == ["/data/b"]
    assert "FileExistsError" in dirs.offline_dirs[0].error
    with pytest.raises(LogDirOfflineError):  # t0-0 may be in /data/a: no second copy in /data/b
        dirs.open_log("t0", 0)
    assert dirs.open_log("t1", 0, is_new=True).directory == "/data/b/t1-0"


def test_every_dir_offline() -> None:
    disk, dirs = sim_dirs()
    dirs.mark_offline("/data/a", "x")
    dirs.mark_offline("/data/b", "y")
    with pytest.raises(LogDirOfflineError, match="none online"):
        dirs.open_log("t9", 0, is_new=True)


def test_high_watermark_checkpoints_are_per_dir_and_failures_isolate() -> None:
    disk, dirs = sim_dirs()
    hws = {("t0", p): 1 for p in range(4)}
    assert dirs.write_high_watermarks(hws) == []
    assert disk.read(f"/data/b/{HIGH_WATERMARK_FILE}") == b"0\n2\nt0 1 1\nt0 3 1\n"
    disk.fail_io("/data/a")
    failures = dirs.write_high_watermarks(hws)
    assert [f.directory for f in failures] == ["/data/a"]
    assert failures[0].newly_offline == [("t0", 0), ("t0", 2)]
    assert dirs.write_high_watermarks(hws) == []  # the offline dir is no longer written
    disk.heal()
    disk.write_atomic(f"/data/b/{HIGH_WATERMARK_FILE}", b"0\n1\nbroken\n")
    found, failures = dirs.read_high_watermarks()
    assert found == {} and [f.directory for f in failures] == ["/data/b"]
    assert "line 3" in failures[0].cause


# ----------------------------------------------------------------------------- clean shutdown markers


def test_a_clean_shutdown_leaves_a_marker_that_the_next_start_up_takes(storage_root: StorageRoot) -> None:
    dirs = LogDirs(storage_root.storage, two_dirs(storage_root))
    dirs.open_log("t0", 0).append_as_leader(["x"], 0)
    assert dirs.clear_clean_shutdown_markers() == (False, [])  # holds a replica, no marker
    dirs.open_log("t0", 0).flush()
    dirs.close()
    dirs.write_clean_shutdown_markers()
    for d in two_dirs(storage_root):
        assert storage_root.storage.exists(f"{d}/{CLEAN_SHUTDOWN_FILE}")

    restarted = LogDirs(storage_root.storage, two_dirs(storage_root))
    assert restarted.replicas() == [("t0", 0)]  # the marker is not taken for a replica
    assert restarted.clear_clean_shutdown_markers() == (True, [])
    for d in two_dirs(storage_root):
        assert not storage_root.storage.exists(f"{d}/{CLEAN_SHUTDOWN_FILE}")
    # The next start after this one finds no marker: whatever ends this run was not clean.
    assert LogDirs(storage_root.storage, two_dirs(storage_root)).clear_clean_shutdown_markers() == (False, [])


def test_directories_without_replicas_need_no_marker(storage_root: StorageRoot) -> None:
    dirs = LogDirs(storage_root.storage, two_dirs(storage_root))
    assert dirs.clear_clean_shutdown_markers() == (True, [])  # a fresh broker has nothing to lose
    dirs.open_log("t0", 0)  # lands in a; b stays empty
    assert dirs.clear_clean_shutdown_markers() == (False, [])


def test_a_marker_taken_at_start_up_stays_taken_after_a_power_loss() -> None:
    disk = SimDisk()
    dirs = LogDirs(disk, ["/data/a"])
    dirs.open_log("t0", 0).append_as_leader(["x"], 0)
    dirs.open_log("t0", 0).flush()
    dirs.close()
    dirs.write_clean_shutdown_markers()
    disk.crash()  # the marker was written durably
    assert LogDirs(disk, ["/data/a"]).clear_clean_shutdown_markers() == (True, [])
    disk.crash()  # a power loss right after start-up: the removal was durable too
    assert LogDirs(disk, ["/data/a"]).clear_clean_shutdown_markers() == (False, [])


def test_a_directory_that_fails_while_taking_its_marker_goes_offline() -> None:
    disk = SimDisk()
    dirs = LogDirs(disk, ["/data/a", "/data/b"])
    dirs.open_log("t0", 0)
    dirs.open_log("t0", 1)
    dirs.close()
    dirs.write_clean_shutdown_markers()
    restarted = LogDirs(disk, ["/data/a", "/data/b"])
    disk.fail_io("/data/b")
    clean, failures = restarted.clear_clean_shutdown_markers()
    assert clean and [f.directory for f in failures] == ["/data/b"]
    assert restarted.online_dirs == ["/data/a"]
