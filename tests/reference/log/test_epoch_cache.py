"""LeaderEpochCache: KIP-101 bookkeeping, KIP-279 lookups (and the old ones), persistence."""

from __future__ import annotations

import pytest

from floodmark.reference.log.checkpoint import MalformedFileError
from floodmark.reference.log.epoch_cache import EPOCH_CHECKPOINT_FILE, EpochEntry, LeaderEpochCache
from floodmark.reference.sim.disk import SimDisk

DIR = "/data/t-0"
PATH = f"{DIR}/{EPOCH_CHECKPOINT_FILE}"


@pytest.fixture
def disk() -> SimDisk:
    d = SimDisk()
    d.make_dirs(DIR)
    return d


def cache_with(disk: SimDisk, *pairs: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache.load(disk, DIR)
    for epoch, start in pairs:
        cache.assign(epoch, start)
    return cache


def test_empty_cache(disk: SimDisk) -> None:
    cache = LeaderEpochCache.load(disk, DIR)
    assert cache.entries == () and cache.latest_epoch == -1
    assert cache.start_offset(0) == -1
    assert cache.end_offset_for(0, 10) == (-1, -1)
    assert not disk.exists(PATH)  # nothing written until something changes


def test_assign_records_epoch_starts(disk: SimDisk) -> None:
    cache = cache_with(disk, (0, 0), (2, 10), (2, 15), (5, 20))
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(5, 20))
    assert cache.latest_epoch == 5
    assert cache.start_offset(2) == 10 and cache.start_offset(3) == -1


def test_assign_removes_entries_it_contradicts(disk: SimDisk) -> None:
    cache = cache_with(disk, (0, 0), (2, 10), (5, 20))
    cache.assign(3, 15)  # epoch 5 starting at 20 can no longer be true
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(3, 15))
    cache.assign(4, 12)  # start offset before 3's start: 3 goes too
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(4, 12))
    cache.assign(4, 11)  # the same epoch, starting earlier, replaces it
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(4, 11))


def test_assign_refuses_negative_values(disk: SimDisk) -> None:
    cache = LeaderEpochCache.load(disk, DIR)
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -5)


# ------------------------------------------------------------------ KIP-279 lookups

# Three epochs with gaps between them: 0 at 0, 2 at 10, 5 at 20; the log ends at 30.
GAPPED = ((0, 0), (2, 10), (5, 20))


@pytest.mark.parametrize(
    ("requested", "answer"),
    [
        (5, (5, 30)),  # the latest epoch ends at the log end
        (2, (2, 20)),  # a known epoch ends where the next one starts
        (3, (2, 20)),  # unknown, between 2 and 5: the largest epoch <= 3 is 2
        (4, (2, 20)),
        (0, (0, 10)),
        (1, (0, 10)),  # unknown, between 0 and 2
        (6, (-1, -1)),  # newer than anything the leader knows
        (-1, (-1, -1)),
    ],
)
def test_kip279_end_offsets(disk: SimDisk, requested: int, answer: tuple[int, int]) -> None:
    assert cache_with(disk, *GAPPED).end_offset_for(requested, 30) == answer


def test_kip279_epoch_older_than_everything_ends_at_the_first_start(disk: SimDisk) -> None:
    cache = cache_with(disk, (3, 10), (5, 20))
    assert cache.end_offset_for(1, 30) == (1, 10)


@pytest.mark.parametrize(
    ("requested", "answer"),
    [
        (5, (5, 30)),
        (2, (2, 20)),
        (3, (3, 20)),  # the requested epoch is echoed; the offset is the next epoch's start
        (4, (4, 20)),
        (1, (1, 10)),
        (6, (-1, -1)),
        (-1, (-1, -1)),
    ],
)
def test_pre_kip279_end_offsets(disk: SimDisk, requested: int, answer: tuple[int, int]) -> None:
    assert cache_with(disk, *GAPPED).end_offset_for(requested, 30, kip279=False) == answer


def test_pre_kip279_epoch_older_than_everything_is_undefined(disk: SimDisk) -> None:
    cache = cache_with(disk, (3, 10), (5, 20))
    assert cache.end_offset_for(1, 30, kip279=False) == (-1, -1)


def test_the_two_behaviours_differ_exactly_on_epochs_the_leader_never_had(disk: SimDisk) -> None:
    """The KAFKA-6361 shape: a follower wrote epoch 3 at offsets 15..; the leader went from
    epoch 2 (at 10) straight to 5 (at 20). Before KIP-279 the leader says "epoch 3 ends at
    20", so the follower keeps its epoch-3 records 15..19, which the leader holds as epoch-2
    records: the logs diverge. KIP-279 says "the largest common epoch is 2, ending at 20",
    and the follower, whose own epoch 2 ends at 15, truncates to 15."""
    leader = cache_with(disk, *GAPPED)
    follower_disk = SimDisk()
    follower_disk.make_dirs(DIR)
    follower = cache_with(follower_disk, (0, 0), (2, 10), (3, 15))
    follower_end = 19

    old_epoch, old_end = leader.end_offset_for(follower.latest_epoch, 30, kip279=False)
    assert min(old_end, follower_end) == 19  # keeps 15..18, written in epoch 3: divergent

    epoch, end = leader.end_offset_for(follower.latest_epoch, 30)
    assert epoch == 2
    _, follower_end_of_epoch = follower.end_offset_for(epoch, follower_end)
    assert min(end, follower_end_of_epoch) == 15  # truncates everything epoch 3 wrote


# ------------------------------------------------------------------ truncation


def test_truncate_from_end(disk: SimDisk) -> None:
    cache = cache_with(disk, *GAPPED)
    cache.truncate_from_end(25)
    assert cache.entries == tuple(EpochEntry(*p) for p in GAPPED)
    cache.truncate_from_end(20)  # epoch 5 started at 20: nothing of it is left
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 10))
    cache.truncate_from_end(3)
    assert cache.entries == (EpochEntry(0, 0),)
    assert LeaderEpochCache.load(disk, DIR).entries == (EpochEntry(0, 0),)


def test_truncate_from_start(disk: SimDisk) -> None:
    cache = cache_with(disk, *GAPPED)
    cache.truncate_from_start(0)
    assert cache.entries == tuple(EpochEntry(*p) for p in GAPPED)
    cache.truncate_from_start(12)  # the log now starts inside epoch 2
    assert cache.entries == (EpochEntry(2, 12), EpochEntry(5, 20))
    cache.truncate_from_start(20)
    assert cache.entries == (EpochEntry(5, 20),)
    assert LeaderEpochCache.load(disk, DIR).entries == (EpochEntry(5, 20),)


# ------------------------------------------------------------------ persistence


def test_persisted_in_kafka_checkpoint_format(disk: SimDisk) -> None:
    cache_with(disk, (0, 0), (3, 7))
    assert disk.read(PATH) == b"0\n2\n0 0\n3 7\n"


def test_persisted_durably(disk: SimDisk) -> None:
    cache_with(disk, (1, 0), (4, 9))
    disk.crash()  # write_atomic survives a crash
    assert LeaderEpochCache.load(disk, DIR).entries == (EpochEntry(1, 0), EpochEntry(4, 9))


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        (b"0\n1\n3\n", 3, "expected 2 space-separated fields"),
        (b"0\n1\nx 3\n", 3, "epoch 'x' is not an integer"),
        (b"0\n2\n4 5\n3 9\n", 4, "epochs must increase"),
        (b"0\n1\n-1 0\n", 3, "must not be negative"),
        (b"1\n0\n", 1, "unsupported format version"),
        (b"0\n3\n1 1\n", 4, "promises 3 entries"),  # line 4 is the first missing one
    ],
)
def test_malformed_checkpoint_names_file_and_line(disk: SimDisk, content: bytes, line: int, problem: str) -> None:
    disk.write_atomic(PATH, content)
    with pytest.raises(MalformedFileError, match=problem) as info:
        LeaderEpochCache.load(disk, DIR)
    assert info.value.path == PATH and info.value.line == line
    assert PATH in str(info.value)


def test_the_latest_epoch_follows_every_change_and_a_reload(disk: SimDisk) -> None:
    cache = cache_with(disk)
    assert cache.latest_epoch == -1
    cache.assign(1, 0)
    cache.assign(3, 5)
    assert cache.latest_epoch == 3
    cache.truncate_from_end(5)
    assert cache.latest_epoch == 1
    cache.assign(2, 5)
    cache.truncate_from_start(6)
    assert cache.latest_epoch == 2 and cache.entries == (EpochEntry(2, 6),)
    assert LeaderEpochCache.load(disk, DIR).latest_epoch == 2
    cache.clear()
    assert cache.latest_epoch == -1
