"""PartitionLog: appends, reads, rolls, truncation and recovery, on SimDisk and real files."""

from __future__ import annotations

import errno
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_fixtures import CountingStorage, StorageRoot

from floodmark.reference.log.epoch_cache import EPOCH_CHECKPOINT_FILE, EpochEntry
from floodmark.reference.log.partition_log import (
    LogAppendError,
    OffsetOutOfRangeError,
    PartitionLog,
)
from floodmark.reference.log.segment import encode_record, segment_name
from floodmark.reference.protocol.messages import Record
from floodmark.reference.runtime import Storage
from floodmark.reference.sim.disk import SimDisk


def open_log(sr: StorageRoot, **kwargs: Any) -> PartitionLog:
    return PartitionLog.open(sr.storage, sr.path("t-0"), **kwargs)


def values(records: list[Record]) -> list[str]:
    return [r.value for r in records]


def test_new_log_is_empty(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    assert (log.log_start, log.log_end, log.last_epoch) == (0, 0, -1)
    assert log.read(0, 10) == []
    assert log.recovery is None
    assert storage_root.storage.list_dir(storage_root.path("t-0")) == [segment_name(0)]


def test_append_and_read(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    assert log.append_as_leader(["a", "b"], 0) == 0
    assert log.append_as_leader(["c"], 1) == 2
    assert log.append_as_leader([], 1) == 3
    assert log.log_end == 3 and log.last_epoch == 1
    assert log.read(0, 10) == [Record(0, 0, "a"), Record(1, 0, "b"), Record(2, 1, "c")]
    assert values(log.read(1, 1)) == ["b"]
    assert values(log.read(0, 10, max_offset=2)) == ["a", "b"]
    assert log.read(3, 10) == []
    assert log.epoch_of(2) == 1


def test_reads_outside_the_log_are_refused(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["a"], 0)
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 2 is outside the log \[0, 1\]"):
        log.read(2, 1)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1)


def test_values_round_trip_unicode(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    texts = ["", "ünïcødé", "emoji 🌊", "a b\nc"]
    log.append_as_leader(texts, 3)
    log.close()
    assert values(open_log(storage_root).read(0, 10)) == texts


def test_rolls_by_record_count_and_reads_across_segments(storage_root: StorageRoot) -> None:
    log = open_log(storage_root, segment_records=3)
    for i in range(10):
        log.append_as_leader([f"v{i}"], 0)
    assert log.segment_count == 4
    names = storage_root.storage.list_dir(storage_root.path("t-0"))
    assert [n for n in names if n.endswith(".log")] == [segment_name(b) for b in (0, 3, 6, 9)]
    assert segment_name(9) == "00000000000000000009.log"
    assert values(log.read(2, 5)) == ["v2", "v3", "v4", "v5", "v6"]
    assert values(log.read(0, 100)) == [f"v{i}" for i in range(10)]


def test_rolls_by_bytes_but_never_splits_a_batch(storage_root: StorageRoot) -> None:
    log = open_log(storage_root, segment_bytes=100)
    log.append_as_leader(["x" * 40] * 3, 0)  # one batch over the limit stays in one segment
    assert log.segment_count == 1
    log.append_as_leader(["y"], 0)
    assert log.segment_count == 2
    assert values(log.read(0, 10)) == ["x" * 40] * 3 + ["y"]


def test_reopen_after_clean_close_keeps_everything(storage_root: StorageRoot) -> None:
    log = open_log(storage_root, segment_records=4)
    log.append_as_leader([str(i) for i in range(6)], 0)
    log.append_as_leader([str(i) for i in range(6, 11)], 2)
    log.flush()
    log.close()
    reopened = open_log(storage_root, segment_records=4)
    assert reopened.recovery is None
    assert reopened.log_end == 11 and reopened.last_epoch == 2
    assert values(reopened.read(0, 100)) == [str(i) for i in range(11)]
    assert reopened.epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(2, 6))
    assert reopened.append_as_leader(["next"], 2) == 11


def test_reads_seek_instead_of_scanning(storage_root: StorageRoot) -> None:
    log = open_log(storage_root, segment_records=1000)
    log.append_as_leader([f"value-{i:05d}" for i in range(5000)], 0)
    log.append_as_leader([f"value-{i:05d}" for i in range(5000, 10000)], 0)
    log.close()
    counting = CountingStorage(storage_root.storage)
    log = PartitionLog.open(cast(Storage, counting), storage_root.path("t-0"), segment_records=1000)
    counting.bytes_read = 0
    records = log.read(9000, 3)
    assert values(records) == ["value-09000", "value-09001", "value-09002"]
    assert counting.bytes_read == sum(len(r.value) + 20 for r in records)


# ------------------------------------------------------------------ recovery


def test_torn_tail_is_truncated_on_open(storage_root: StorageRoot) -> None:
    log = open_log(storage_root, segment_records=4)
    log.append_as_leader([f"v{i}" for i in range(4)], 0)
    log.append_as_leader([f"v{i}" for i in range(4, 7)], 1)
    log.close()
    active = storage_root.path("t-0", segment_name(4))
    size = storage_root.storage.size(active)
    storage_root.storage.truncate(active, size - 3)  # the last record loses its last bytes

    recovered = open_log(storage_root, segment_records=4)
    assert recovered.log_end == 6
    assert recovered.recovery is not None and recovered.recovery.truncated_at == 6
    assert "torn" in recovered.recovery.reason
    assert values(recovered.read(0, 100)) == [f"v{i}" for i in range(6)]
    assert recovered.append_as_leader(["again"], 1) == 6
    recovered.close()
    assert values(open_log(storage_root).read(5, 10)) == ["v5", "again"]


def test_a_torn_header_is_truncated(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["a", "b"], 0)
    log.close()
    f = storage_root.storage.open_append(storage_root.path("t-0", segment_name(0)))
    f.write(b"\x00\x00\x00")  # three bytes of a next header, then the crash
    f.close()
    recovered = open_log(storage_root)
    assert recovered.log_end == 2
    assert recovered.recovery is not None and recovered.recovery.bytes_removed == 3


def test_corrupt_crc_truncates_from_the_bad_record(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["alpha", "bravo", "charlie", "delta"], 0)
    log.close()
    path = storage_root.path("t-0", segment_name(0))
    data = storage_root.storage.read(path)
    storage_root.overwrite(path, data.index(b"charlie"), b"CHARLIE")

    recovered = open_log(storage_root)
    assert recovered.log_end == 2
    assert recovered.recovery is not None and "CRC" in recovered.recovery.reason
    assert values(recovered.read(0, 10)) == ["alpha", "bravo"]  # the bad record is never served


def test_corruption_in_an_old_segment_drops_the_later_segments(storage_root: StorageRoot) -> None:
    log = open_log(storage_root, segment_records=2)
    for i in range(6):
        log.append_as_leader([f"v{i}"], 0)
    log.close()
    first = storage_root.path("t-0", segment_name(0))
    data = storage_root.storage.read(first)
    storage_root.overwrite(first, data.index(b"v1"), b"XX")

    recovered = open_log(storage_root, segment_records=2)
    assert recovered.log_end == 1 and recovered.segment_count == 1
    assert recovered.recovery is not None and recovered.recovery.segments_removed == 2
    files = storage_root.storage.list_dir(storage_root.path("t-0"))
    assert [f for f in files if f.endswith(".log")] == [segment_name(0)]


def test_a_record_with_the_wrong_offset_is_treated_as_corrupt(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["a"], 0)
    log.close()
    f = storage_root.storage.open_append(storage_root.path("t-0", segment_name(0)))
    f.write(encode_record(7, 0, b"misplaced"))  # a valid CRC but not offset 1
    f.close()
    recovered = open_log(storage_root)
    assert recovered.log_end == 1
    assert recovered.recovery is not None and "expected 1" in recovered.recovery.reason


def test_epoch_cache_is_rebuilt_when_its_checkpoint_is_lost(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["a"], 1)
    log.append_as_leader(["b", "c"], 4)
    log.close()
    storage_root.storage.remove(storage_root.path("t-0", EPOCH_CHECKPOINT_FILE))
    assert open_log(storage_root).epoch_cache.entries == (EpochEntry(1, 0), EpochEntry(4, 1))


def test_recovery_trims_epochs_beyond_the_recovered_end(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["a", "b"], 1)
    log.append_as_leader(["c"], 3)
    log.close()
    active = storage_root.path("t-0", segment_name(0))
    storage_root.storage.truncate(active, storage_root.storage.size(active) - 1)
    recovered = open_log(storage_root)
    assert recovered.log_end == 2 and recovered.last_epoch == 1
    assert recovered.epoch_cache.entries == (EpochEntry(1, 0),)


# ------------------------------------------------------------------ truncation


def test_truncate_across_segments(storage_root: StorageRoot) -> None:
    log = open_log(storage_root, segment_records=3)
    for i in range(10):
        log.append_as_leader([f"v{i}"], 0 if i < 5 else 2)
    log.truncate_to(4)
    assert log.log_end == 4 and log.segment_count == 2 and log.last_epoch == 0
    assert log.epoch_cache.entries == (EpochEntry(0, 0),)
    assert values(log.read(0, 100)) == ["v0", "v1", "v2", "v3"]
    assert log.append_as_leader(["new"], 3) == 4
    log.close()
    reopened = open_log(storage_root, segment_records=3)
    assert values(reopened.read(0, 100)) == ["v0", "v1", "v2", "v3", "new"]


def test_truncate_to_a_segment_boundary_and_to_the_start(storage_root: StorageRoot) -> None:
    log = open_log(storage_root, segment_records=3)
    log.append_as_leader([f"v{i}" for i in range(3)], 0)
    log.append_as_leader([f"v{i}" for i in range(3, 6)], 0)
    log.truncate_to(3)
    assert log.log_end == 3 and log.segment_count == 1
    log.truncate_to(9)  # beyond the end: nothing to do
    assert log.log_end == 3
    log.truncate_to(0)
    assert (log.log_start, log.log_end, log.last_epoch) == (0, 0, -1)
    assert log.epoch_cache.entries == ()
    log.append_as_leader(["fresh"], 5)
    assert log.read(0, 10) == [Record(0, 5, "fresh")]


def test_truncating_at_the_end_forgets_the_epochs_that_hold_no_record(storage_root: StorageRoot) -> None:
    # A leader elected in epoch 2 that appended nothing, now a follower: truncating at its
    # log end removes no record, but its record-less epoch 2 goes (Kafka's truncateTo). The
    # reopened log agrees (opening drops such epochs too, so that line alone proves nothing).
    log = open_log(storage_root)
    log.append_as_leader(["a", "b"], 0)
    log.epoch_cache.assign(2, 2)
    log.truncate_to(5)
    assert log.log_end == 2 and log.epoch_cache.entries == (EpochEntry(0, 0),)
    log.close()
    assert open_log(storage_root).epoch_cache.entries == (EpochEntry(0, 0),)


def test_truncate_fully_and_start_at(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["a", "b"], 0)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start, log.log_end) == (100, 100)
    log.append_as_follower([Record(100, 3, "x")])
    log.close()
    reopened = open_log(storage_root)
    assert (reopened.log_start, reopened.log_end) == (100, 101)
    assert reopened.read(100, 5) == [Record(100, 3, "x")]
    with pytest.raises(OffsetOutOfRangeError):
        reopened.read(0, 1)


# ------------------------------------------------------------------ follower appends


def test_follower_append_must_continue_the_log(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_follower([Record(0, 1, "a"), Record(1, 1, "b")])
    with pytest.raises(LogAppendError, match="expected 2"):
        log.append_as_follower([Record(3, 1, "gap")])
    with pytest.raises(LogAppendError, match="expected 2"):
        log.append_as_follower([Record(1, 1, "overlap")])
    with pytest.raises(LogAppendError, match="expected 3"):
        log.append_as_follower([Record(2, 1, "c"), Record(4, 1, "gap inside")])
    with pytest.raises(LogAppendError, match="older than 1"):
        log.append_as_follower([Record(2, 0, "epoch going back")])
    with pytest.raises(LogAppendError, match="older than 2"):
        log.append_as_follower([Record(2, 2, "c"), Record(3, 1, "back inside")])
    assert log.log_end == 2  # nothing of a refused batch was written
    log.append_as_follower([Record(2, 1, "c"), Record(3, 4, "d")])
    assert log.epoch_cache.entries == (EpochEntry(1, 0), EpochEntry(4, 3))
    assert log.last_epoch == 4


def test_follower_forgets_its_own_empty_epochs(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["a"], 2)
    log.epoch_cache.assign(3, 1)  # it led epoch 3 briefly and appended nothing
    log.append_as_follower([Record(1, 2, "from the new leader")])
    assert log.epoch_cache.entries == (EpochEntry(2, 0),)


def test_leader_append_with_a_stale_epoch_is_refused(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["a"], 5)
    with pytest.raises(LogAppendError, match="older"):
        log.append_as_leader(["b"], 4)
    log.epoch_cache.assign(7, 1)
    with pytest.raises(LogAppendError):
        log.append_as_leader(["c"], 6)
    assert log.log_end == 1


def test_closed_log_raises_oserror(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.close()
    log.close()  # idempotent
    with pytest.raises(OSError) as info:
        log.append_as_leader(["a"], 0)
    assert info.value.errno == errno.EBADF


# ------------------------------------------------------------------ simulated crashes


def test_crash_keeps_flushed_records_and_drops_the_rest() -> None:
    disk = SimDisk()
    log = PartitionLog.open(disk, "/data/t-0", segment_records=3)
    log.append_as_leader(["a", "b", "c"], 0)
    log.append_as_leader(["d"], 0)  # rolls: the full segment is fsynced
    log.flush()
    log.append_as_leader(["e", "f"], 1)  # never flushed
    disk.crash()
    log = PartitionLog.open(disk, "/data/t-0", segment_records=3)
    assert values(log.read(0, 10)) == ["a", "b", "c", "d"]
    assert log.recovery is None  # the unsynced suffix vanished whole


def test_crash_mid_record_leaves_a_torn_tail_that_recovery_removes() -> None:
    disk = SimDisk()
    log = PartitionLog.open(disk, "/data/t-0")
    log.append_as_leader(["kept"], 0)
    log.flush()
    path = "/data/t-0/" + segment_name(0)
    synced = disk.size(path)
    log.append_as_leader(["half-written"], 0)
    full = disk.read(path)
    # What a crash mid-write leaves: part of the record made it to the platter.
    log.close()
    disk.truncate(path, synced)
    f = disk.open_append(path)
    f.write(full[synced : synced + 10])
    f.fsync()
    disk.crash()
    log = PartitionLog.open(disk, "/data/t-0")
    assert values(log.read(0, 10)) == ["kept"]
    assert log.recovery is not None and log.recovery.bytes_removed == 10
    disk.crash()  # the recovery's truncation was made durable
    assert disk.size(path) == synced


def test_truncation_survives_a_crash() -> None:
    disk = SimDisk()
    log = PartitionLog.open(disk, "/data/t-0", segment_records=2)
    log.append_as_leader([f"v{i}" for i in range(2)], 0)
    log.append_as_leader([f"v{i}" for i in range(2, 5)], 1)
    log.flush()
    log.truncate_to(1)
    disk.crash()
    log = PartitionLog.open(disk, "/data/t-0", segment_records=2)
    assert values(log.read(0, 10)) == ["v0"]
    assert log.epoch_cache.entries == (EpochEntry(0, 0),)


def test_disk_errors_surface_as_oserror() -> None:
    disk = SimDisk()
    log = PartitionLog.open(disk, "/data/t-0")
    log.append_as_leader(["a"], 0)
    disk.fail_io("/data")
    with pytest.raises(OSError) as info:
        log.append_as_leader(["b"], 0)
    assert info.value.errno == errno.EIO
    with pytest.raises(OSError):
        log.read(0, 1)
    with pytest.raises(OSError):
        PartitionLog.open(disk, "/data/t-1")


def test_permission_fault_hits_at_roll_not_before() -> None:
    disk = SimDisk()
    log = PartitionLog.open(disk, "/data/t-0", segment_records=2)
    log.append_as_leader(["a"], 0)
    disk.chmod("/data/t-0", 0)
    log.append_as_leader(["b"], 0)  # the active segment is already open
    log.flush()
    with pytest.raises(PermissionError):
        log.append_as_leader(["c"], 0)  # needs a new segment file
    with pytest.raises(PermissionError):
        log.read(0, 2)  # reads reopen the segment


# ------------------------------------------------------------------ against a model


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.booleans()),
    st.tuples(st.just("flush"), st.just(0), st.just(False)),
    st.tuples(st.just("truncate"), st.integers(0, 30), st.just(False)),
    st.tuples(st.just("crash"), st.just(0), st.just(False)),
    st.tuples(st.just("reopen"), st.just(0), st.just(False)),
), max_size=40))
def test_log_matches_a_model_through_crashes(operations: list[tuple[str, int, bool]]) -> None:
    """Whatever happens, the log holds a prefix of what was appended that keeps at least
    everything flushed (or made durable by truncation), with offsets and epochs intact."""
    disk = SimDisk()
    log = PartitionLog.open(disk, "/data/t-0", segment_records=3)
    model: list[Record] = []
    durable = 0  # records the disk must keep through a crash
    epoch = 0
    for kind, number, bump in operations:
        if kind == "append":
            epoch += bump
            base = log.append_as_leader([f"{epoch}:{len(model) + i}" for i in range(number)], epoch)
            assert base == len(model)
            model += [Record(base + i, epoch, f"{epoch}:{base + i}") for i in range(number)]
        elif kind == "flush":
            log.flush()
            durable = len(model)
        elif kind == "truncate":
            log.truncate_to(number)
            # A real truncation is fsynced, which makes all that remains durable.
            durable = number if number < len(model) else durable
            model = model[:number]
        else:
            if kind == "crash":
                disk.crash()
            else:
                log.flush()
                log.close()
                durable = len(model)
            log = PartitionLog.open(disk, "/data/t-0", segment_records=3)
            survived = log.read(0, 1000)
            assert survived == model[: len(survived)] and len(survived) >= durable
            model = survived
            durable = len(model)
            epoch = max(epoch, log.epoch_cache.latest_epoch, 0)
        assert log.log_end == len(model)
        assert log.read(0, 1000) == model
        assert log.last_epoch == (model[-1].leader_epoch if model else -1)
        starts = [(r.leader_epoch, r.offset) for i, r in enumerate(model)
                  if i == 0 or model[i - 1].leader_epoch != r.leader_epoch]
        assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == starts


def test_a_segment_that_does_not_follow_on_is_dropped(storage_root: StorageRoot) -> None:
    log = open_log(storage_root)
    log.append_as_leader(["a", "b"], 0)
    log.close()
    stray = storage_root.storage.open_append(storage_root.path("t-0", segment_name(5)))
    stray.write(encode_record(5, 0, b"from nowhere"))
    stray.close()
    recovered = open_log(storage_root)
    assert recovered.log_end == 2 and recovered.segment_count == 1
    assert recovered.recovery is not None and "does not follow on from offset 2" in recovered.recovery.reason
    assert not storage_root.storage.exists(storage_root.path("t-0", segment_name(5)))


def test_a_malformed_epoch_checkpoint_fails_the_open_with_a_clear_oserror(storage_root: StorageRoot) -> None:
    open_log(storage_root).close()
    path = storage_root.path("t-0", EPOCH_CHECKPOINT_FILE)
    storage_root.storage.write_atomic(path, b"0\n1\nnot numbers\n")
    with pytest.raises(OSError, match=f"{path}: line 3: "):
        open_log(storage_root)
