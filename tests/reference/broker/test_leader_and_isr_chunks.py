"""A LeaderAndIsr for thousands of partitions (a controller failover) on one broker.

The broker applies it in chunks, group-committing each chunk's new leader epochs (one
journal sync per log directory, no file per partition) before going on, and yields to the event loop between chunks so that heartbeats and client
requests are not starved. A newer controller heard from meanwhile makes the rest stale.
"""

from __future__ import annotations

import asyncio

import pytest

from floodmark.reference.broker import replica_manager
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.broker.epoch_compaction import CompactionSchedule
from floodmark.reference.broker.metadata_cache import MetadataCache
from floodmark.reference.broker.replica_manager import ReplicaManager
from floodmark.reference.broker.session import BrokerSession
from floodmark.reference.log.epoch_cache import EPOCH_CHECKPOINT_FILE, EpochEntry
from floodmark.reference.log.epoch_journal import EPOCH_JOURNAL_FILE, parse_journal
from floodmark.reference.log.log_dirs import LogDirs, partition_dir_name
from floodmark.reference.protocol.messages import (
    Errors,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionState,
    StopReplicaRequest,
)
from floodmark.reference.sim import SimWorld

pytestmark = pytest.mark.sim_world(seed=5)

CONTROLLER_EPOCH = 3
JOURNAL = f"/d/{EPOCH_JOURNAL_FILE}"


def manager(world: SimWorld) -> ReplicaManager:
    runtime = world.add_node("b")
    return ReplicaManager(runtime, BrokerConfig(broker_id=1, log_dirs=("/d",)),
                          LogDirs(runtime.storage, ["/d"]), MetadataCache(), BrokerSession())


def lead(partitions: int, epoch: int) -> LeaderAndIsrRequest:
    states = tuple(PartitionState("t", p, 1, epoch, (1,), 0, (1, 2), CONTROLLER_EPOCH) for p in range(partitions))
    return LeaderAndIsrRequest(9, CONTROLLER_EPOCH, 0, states, ())


def checkpoint(world: SimWorld, partition: int) -> bytes | None:
    return world.disk("b").durable_contents(f"/d/{partition_dir_name('t', partition)}/{EPOCH_CHECKPOINT_FILE}")


def test_every_chunk_is_durable_before_the_answer(world: SimWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_manager, "LEADER_AND_ISR_CHUNK", 4)
    replicas = manager(world)
    response = world.run(replicas.handle_leader_and_isr(lead(10, 7)))
    assert [e.error for e in response.partition_errors] == [None] * 10
    assert all(replicas.partitions[("t", p)].is_leader for p in range(10))
    assert checkpoint(world, 9) is None  # no file per partition on the way to leading
    durable = parse_journal(JOURNAL, world.disk("b").durable_contents(JOURNAL) or b"")
    assert durable == {partition_dir_name("t", p): (EpochEntry(7, 0),) for p in range(10)}


def test_the_checkpoint_loop_brings_the_checkpoint_files_up_to_date_in_steps(
        world: SimWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_manager, "EPOCH_COMPACTION_STEP", 3)
    replicas = manager(world)
    world.run(replicas.handle_leader_and_isr(lead(10, 7)))
    assert replicas.log_dirs.epoch_checkpoints_behind() == 10
    steps = 0

    async def compact_counting_steps() -> None:
        nonlocal steps
        compaction = asyncio.ensure_future(replicas.compact_epoch_journals())
        while not compaction.done():
            steps += 1
            await asyncio.sleep(0)
    world.run(compact_counting_steps())
    assert steps >= 4  # 10 files, 3 a step: it yielded in between
    assert replicas.log_dirs.epoch_checkpoints_behind() == 0
    for p in range(10):
        assert (checkpoint(world, p) or b"").splitlines()[-1] == b"7 0"  # epoch 7 from offset 0, durable


def test_compaction_waits_for_roles_to_be_still_and_yields_to_a_leader_and_isr(
        world: SimWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    # Rewriting checkpoint files is housekeeping: it must not sit on the path to leading.
    monkeypatch.setattr(replica_manager, "EPOCH_COMPACTION_STEP", 3)
    monkeypatch.setattr(replica_manager, "LEADER_AND_ISR_CHUNK", 2)
    replicas = manager(world)
    world.run(replicas.handle_leader_and_isr(lead(10, 7)))
    now = world.now()
    assert not replicas.compaction.due(now)  # roles changed just now
    assert replicas.compaction.due(now + replicas.compaction.quiet)

    async def compaction_meets_a_leader_and_isr() -> None:
        handling = asyncio.ensure_future(replicas.handle_leader_and_isr(lead(10, 8)))
        await asyncio.sleep(0)  # the LeaderAndIsr is being applied (it holds the lock) ...
        await replicas.compact_epoch_journals()  # ... so compaction leaves everything for later
        await handling
    world.run(compaction_meets_a_leader_and_isr())
    assert replicas.log_dirs.epoch_checkpoints_behind() == 10
    world.run(replicas.compact_epoch_journals())
    assert replicas.log_dirs.epoch_checkpoints_behind() == 0


def test_compaction_runs_anyway_when_roles_never_stay_still() -> None:
    schedule = CompactionSchedule(quiet=1.0, longest_wait=30.0)
    due = []
    for second in range(70):
        schedule.role_changes_applied(float(second))  # a LeaderAndIsr every second
        if second % 5 == 0:  # the checkpoint loop asks every 5 s
            due.append((second, schedule.due(second + 0.5)))
    assert [s for s, d in due if d] == [30, 65]  # waited its longest, then again


def test_other_work_runs_between_chunks_and_a_newer_controller_stops_the_rest(
        world: SimWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_manager, "LEADER_AND_ISR_CHUNK", 2)
    replicas = manager(world)
    newer = StopReplicaRequest(9, CONTROLLER_EPOCH + 1, 0, (), delete=False)

    async def both() -> LeaderAndIsrResponse:
        handling = asyncio.ensure_future(replicas.handle_leader_and_isr(lead(6, 7)))
        await asyncio.sleep(0)  # the first chunk is applied, then the handler yields
        assert replicas.handle_stop_replica(newer).error is None  # served between two chunks
        return await handling
    response = world.run(both())
    assert [e.error for e in response.partition_errors] == [None, None] + [Errors.STALE_CONTROLLER_EPOCH] * 4
    assert sorted(replicas.partitions) == [("t", 0), ("t", 1)]


def test_the_partitions_it_now_leads_are_applied_before_those_it_follows(
        world: SimWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """As Kafka's becomeLeaderOrFollower: after a failover the new leaders take writes again
    before the broker starts its new followers' truncations, whatever order the request has."""
    monkeypatch.setattr(replica_manager, "LEADER_AND_ISR_CHUNK", 3)
    replicas = manager(world)
    states = tuple(PartitionState("t", p, 1 if p % 2 else 2, 4, (1, 2), 0, (1, 2), CONTROLLER_EPOCH)
                   for p in range(8))
    response = world.run(replicas.handle_leader_and_isr(LeaderAndIsrRequest(9, CONTROLLER_EPOCH, 0, states, ())))
    replicas.fetchers.stop_all()  # its followers would fetch from broker 2, which does not exist, forever
    assert sorted(e.partition for e in response.partition_errors if e.error is None) == list(range(8))
    roles = [(e.kind, e.body.partition) for e in world.events("b")  # type: ignore[union-attr]
             if e.kind in ("became_leader", "became_follower")]
    assert roles == [("became_leader", p) for p in (1, 3, 5, 7)] + [("became_follower", p) for p in (0, 2, 4, 6)]


@pytest.mark.parametrize(("sync_seconds", "chunks"), [(0.0, 28), (0.03, 10), (0.5, 3)])
def test_a_chunk_works_as_long_as_the_last_sync_took(world: SimWorld, monkeypatch: pytest.MonkeyPatch,
                                                     sync_seconds: float, chunks: int) -> None:
    """Real time: each partition takes 1 ms here and each group commit ``sync_seconds``. On a
    busy disk a sync takes tens of milliseconds: 10 ms chunks would spend most of the time
    syncing, so a chunk works as long as the last sync took (up to 0.1 s)."""
    replicas = manager(world)
    clock = [0.0]

    def monotonic() -> float:
        clock[0] += 0.001
        return clock[0]

    commit = replicas.log_dirs.complete_syncs
    syncs = [0]

    def slow_commit() -> list[OSError]:
        syncs[0] += 1
        clock[0] += sync_seconds
        return commit()

    monkeypatch.setattr(replicas.runtime, "monotonic", monotonic)
    monkeypatch.setattr(replicas.log_dirs, "complete_syncs", slow_commit)
    response = world.run(replicas.handle_leader_and_isr(lead(300, 7)))
    assert [e.error for e in response.partition_errors] == [None] * 300
    assert syncs[0] == pytest.approx(chunks, abs=2)
