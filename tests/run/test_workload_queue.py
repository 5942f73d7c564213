"""Tests for the queue workload: op shapes exactly as the checkers expect, roles, drain."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from workload_fixtures import FakeLogs

from floodmark.contracts.history import read_history
from floodmark.harness.config import TestConfig
from floodmark.harness.generator import Completion, Generator
from floodmark.harness.recorder import Recorder
from floodmark.harness.seeds import Seeds
from floodmark.workloads.clients import FetchOutcome, SendOutcome
from floodmark.workloads.queue import QueueWorker, drain_partition, roles
from floodmark.workloads.registry import final_reads, make_workers

CONFIG = TestConfig(topics=2, partitions=2, concurrency=4, nemesis=())


def producer(logs: FakeLogs, seed: int = 1) -> QueueWorker:
    return QueueWorker(CONFIG, logs, 0, random.Random(seed), "producer")


def consumer(logs: FakeLogs, seed: int = 1) -> QueueWorker:
    return QueueWorker(CONFIG, logs, 1, random.Random(seed), "consumer")


def test_roles_split_producers_and_consumers() -> None:
    assert roles(2) == ["producer", "consumer"]
    assert roles(5) == ["producer"] * 3 + ["consumer"] * 2


def test_send_shapes() -> None:
    logs = FakeLogs()
    worker = producer(logs)
    op = worker.next_op()
    assert op.f == "send" and set(op.value) == {"topic", "partition", "value"}
    assert op.value["topic"] in ("t0", "t1") and op.value["partition"] in (0, 1)
    done = asyncio.run(worker.invoke(op))
    assert done.type == "ok" and done.value == {**op.value, "offset": 0}
    values = {worker.next_op().value["value"] for _ in range(100)}
    assert len(values) == 100  # unique values


def test_send_errors_keep_the_invoke_value() -> None:
    logs = FakeLogs(send_errors=[SendOutcome("info", error="REQUEST_TIMED_OUT"),
                                 SendOutcome("fail", error="NOT_LEADER_OR_FOLLOWER")])
    worker = producer(logs)
    for expected in ("info", "fail"):
        op = worker.next_op()
        done = asyncio.run(worker.invoke(op))
        assert done.type == expected and done.value == op.value and done.error
    assert worker.timeout_type("send") == "info" and worker.timeout_type("poll") == "fail"


def test_consumer_assigns_then_polls_from_remembered_offsets() -> None:
    logs = FakeLogs(logs={("t0", 0): ["a", "b", "c"], ("t0", 1): ["d"], ("t1", 0): [], ("t1", 1): ["e", "f"]})
    worker = consumer(logs)
    first = worker.next_op()
    assert first.f == "assign"
    assert all(set(d) == {"topic", "partition", "offset"} and d["offset"] == 0 for d in first.value)
    assert asyncio.run(worker.invoke(first)).value == first.value
    poll = worker.next_op()
    while poll.f != "poll":
        asyncio.run(worker.invoke(poll))
        poll = worker.next_op()
    done = asyncio.run(worker.invoke(poll))
    assert done.type == "ok"
    for entry, position in zip(done.value, poll.value):
        assert set(entry) == {"topic", "partition", "offset", "records", "high_watermark"}
        assert entry["offset"] == position["offset"]
        log = logs.logs[(entry["topic"], entry["partition"])]
        assert entry["records"] == [[o, log[o]] for o in range(entry["offset"], len(log))]
        assert entry["high_watermark"] == len(log)
    # The next poll starts where this one ended.
    again = worker.next_op()
    if again.f == "poll":
        for d in again.value:
            assert d["offset"] == len(logs.logs[(d["topic"], d["partition"])])


def test_consumer_reassigns_sometimes_and_keeps_positions() -> None:
    logs = FakeLogs(logs={tp: ["x"] * 3 for tp in CONFIG.topic_partitions})
    worker = consumer(logs, seed=3)
    kinds = []
    for _ in range(300):
        op = worker.next_op()
        kinds.append(op.f)
        asyncio.run(worker.invoke(op))
    assert 2 <= kinds.count("assign") <= 60
    assert set(worker.positions.values()) == {3}


def test_poll_failure_and_out_of_range_reset() -> None:
    logs = FakeLogs(logs={tp: ["x"] for tp in CONFIG.topic_partitions})
    worker = consumer(logs)
    asyncio.run(worker.invoke(worker.next_op()))  # assign
    logs.fetch_errors = [FetchOutcome(error="OFFSET_OUT_OF_RANGE", out_of_range=True)] * len(worker.assigned)
    worker.positions = {tp: 5 for tp in worker.assigned}
    poll = worker.next_op()
    if poll.f == "poll":
        done = asyncio.run(worker.invoke(poll))
        assert done.type == "fail" and done.value == poll.value and "OFFSET_OUT_OF_RANGE" in done.error
        reset = worker.next_op()
        assert reset.f == "assign" and all(d["offset"] == 0 for d in reset.value)


def test_drain_reads_to_the_high_watermark_and_fails_when_it_cannot() -> None:
    logs = FakeLogs(logs={("t0", 0): [f"v{i}" for i in range(1234)]})
    session = asyncio.run(logs.open("d"))
    done = asyncio.run(drain_partition(session, "t0", 0, time.monotonic() + 5, time.monotonic))
    entry = done.value[0]
    assert done.type == "ok" and entry["offset"] == 0 and entry["high_watermark"] == 1234
    assert [o for o, _ in entry["records"]] == list(range(1234))
    logs.fetch_errors = [FetchOutcome(error="NOT_LEADER_OR_FOLLOWER")] * 1000
    failed = asyncio.run(drain_partition(session, "t0", 0, time.monotonic() + 0.6, time.monotonic))
    assert failed.type == "fail" and "NOT_LEADER" in failed.error


def test_drain_waits_for_a_lagging_high_watermark_to_cover_the_log() -> None:
    # A new leader's HW can sit below records the old leader acknowledged until its ISR
    # fetches; the drain must not stop there and report them lost.
    logs = FakeLogs(logs={("t0", 0): [f"v{i}" for i in range(10)]})
    logs.hidden_tail = 3
    session = asyncio.run(logs.open("d"))

    async def drain_while_the_high_watermark_catches_up() -> Completion:
        async def catch_up() -> None:
            await asyncio.sleep(0.5)
            logs.hidden_tail = 0
        catching_up = asyncio.create_task(catch_up())
        done = await drain_partition(session, "t0", 0, time.monotonic() + 5, time.monotonic)
        await catching_up
        return done

    done = asyncio.run(drain_while_the_high_watermark_catches_up())
    assert done.type == "ok"
    assert [v for _, v in done.value[0]["records"]] == [f"v{i}" for i in range(10)]
    logs.hidden_tail = 3  # never catches up: the drain cannot vouch for the partition
    stuck = asyncio.run(drain_partition(session, "t0", 0, time.monotonic() + 0.6, time.monotonic))
    assert stuck.type == "fail" and "below the leader's log end 10" in (stuck.error or "")


def test_a_whole_run_against_the_fake_log(tmp_path: Path) -> None:
    logs = FakeLogs(send_errors=[SendOutcome("info", error="REQUEST_TIMED_OUT")])
    recorder = Recorder(tmp_path / "history.jsonl")
    workers = make_workers(CONFIG, logs, Seeds(1))
    generator = Generator(recorder, workers, rate=500, op_timeout=1)
    asyncio.run(generator.run(0.4))
    failures = asyncio.run(final_reads(CONFIG, logs, recorder, generator.highest_process + 1))
    recorder.close()
    ops = read_history(tmp_path / "history.jsonl")
    assert failures == 0
    assert {op.f for op in ops} >= {"send", "poll", "assign", "drain"}
    drains = [op for op in ops if op.f == "drain" and op.type == "ok"]
    assert len(drains) == len(CONFIG.topic_partitions)
    worker_processes = {op.process for op in ops if op.f != "drain"}
    assert min(op.process for op in drains) > max(worker_processes)
    acked = {op.value["value"] for op in ops if op.f == "send" and op.type == "ok"}
    drained = {v for op in drains for _, v in op.value[0]["records"]}
    assert acked <= drained
    # The info send retired its process and the worker opened new clients.
    assert generator.numbers.retired == 1 and logs.opened >= CONFIG.concurrency + 1
    assert logs.closed == logs.opened


def test_each_role_splits_the_partitions_and_covers_every_one() -> None:
    from floodmark.workloads.queue import roles, worker_partitions

    parts = [("t0", p) for p in range(3)] + [("t1", p) for p in range(3)]
    for concurrency in range(2, 20):
        workers = roles(concurrency)
        shares = worker_partitions(parts, workers)
        assert len(shares) == concurrency and all(shares)
        for role in ("producer", "consumer"):
            members = [w for w, r in enumerate(workers) if r == role]
            covered = [tp for w in members for tp in shares[w]]
            assert sorted(set(covered)) == sorted(parts), (concurrency, role)
            if len(members) <= len(parts):  # a share each, never overlapping
                assert len(covered) == len(parts)
    assert worker_partitions(parts, roles(8))[0] == [("t0", 0), ("t1", 1)]
