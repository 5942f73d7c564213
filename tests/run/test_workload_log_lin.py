"""Tests for the log-lin workload: append/read shapes and read results against a known log."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from pathlib import Path

from workload_fixtures import FakeLogs

from floodmark.checkers.api import CheckInput
from floodmark.checkers.linearizability.checker import LinearizableChecker
from floodmark.contracts.history import Op, read_history
from floodmark.harness.config import TestConfig
from floodmark.harness.generator import Generator
from floodmark.harness.recorder import Recorder
from floodmark.harness.seeds import Seeds
from floodmark.workloads.clients import FetchOutcome, SendOutcome
from floodmark.workloads.log_lin import LogLinWorker
from floodmark.workloads.registry import final_reads, make_workers

CONFIG = TestConfig(workload="log-lin", topics=1, partitions=2, concurrency=2, nemesis=())


def run_ops(worker: LogLinWorker, count: int):
    """Run ops one by one; each read is returned with the log's length when it ran."""
    done = []
    for _ in range(count):
        op = worker.next_op()
        length = len(worker.clients.logs.get((op.value["topic"], op.value["partition"]), []))
        done.append((op, asyncio.run(worker.invoke(op)), length))
    return done


def test_shapes_and_read_results_match_the_log() -> None:
    logs = FakeLogs()
    worker = LogLinWorker(CONFIG, logs, 0, random.Random(4))
    results = run_ops(worker, 300)
    appends = [(op, c) for op, c, _ in results if op.f == "append"]
    reads = [(op, c, length) for op, c, length in results if op.f == "read"]
    assert appends and reads
    for op, c in appends:
        assert set(op.value) == {"topic", "partition", "value"}
        assert c.type == "ok" and c.value == {**op.value, "offset": c.value["offset"]}
        assert logs.logs[(op.value["topic"], op.value["partition"])][c.value["offset"]] == op.value["value"]
    empty = 0
    for op, c, length in reads:
        assert set(op.value) == {"topic", "partition", "offset"}
        log = logs.logs.get((op.value["topic"], op.value["partition"]), [])
        if c.type == "fail":  # nothing there: no proof of anything in Kafka's contract
            empty += 1
            assert op.value["offset"] >= length and c.value == op.value and "no recency" in (c.error or "")
        else:
            assert c.type == "ok" and set(c.value) == {"topic", "partition", "offset", "value"}
            assert c.value["value"] is not None and log[op.value["offset"]] == c.value["value"]
    assert 0 < empty < len(reads)  # reads probe around the end of the log


def test_a_read_that_finds_nothing_fails_and_asserts_nothing() -> None:
    # A new leader whose HW lags, or a deposed one, answers "nothing yet" at the HW for a
    # committed record: recorded as an empty ok read, the model took it for a stale read
    # and found a correct run nonlinearizable.
    logs = FakeLogs(logs={("t0", 0): ["a", "b"], ("t0", 1): []}, hidden_tail=1)
    worker = LogLinWorker(CONFIG, logs, 0, random.Random(0))
    from floodmark.harness.generator import Invocation

    done = asyncio.run(worker.invoke(Invocation("read", {"topic": "t0", "partition": 0, "offset": 1})))
    assert done.type == "fail" and done.value == {"topic": "t0", "partition": 0, "offset": 1}
    assert done.error == "nothing visible at offset 1 (the serving leader's HW is 1): Kafka promises consumers no recency"
    done = asyncio.run(worker.invoke(Invocation("read", {"topic": "t0", "partition": 0, "offset": 0})))
    assert done.value["value"] == "a"


def test_errors() -> None:
    logs = FakeLogs(send_errors=[SendOutcome("info", error="REQUEST_TIMED_OUT")],
                    fetch_errors=[FetchOutcome(error="NOT_LEADER_OR_FOLLOWER")])
    worker = LogLinWorker(CONFIG, logs, 0, random.Random(0))
    from floodmark.harness.generator import Invocation

    sent = asyncio.run(worker.invoke(Invocation("append", {"topic": "t0", "partition": 0, "value": "x"})))
    assert sent.type == "info" and sent.value == {"topic": "t0", "partition": 0, "value": "x"}
    read = asyncio.run(worker.invoke(Invocation("read", {"topic": "t0", "partition": 0, "offset": 0})))
    assert read.type == "fail" and read.error == "NOT_LEADER_OR_FOLLOWER"
    assert worker.timeout_type("append") == "info" and worker.timeout_type("read") == "fail"
    asyncio.run(worker.reopen())
    assert logs.closed == 1 and worker.session is None


def test_a_run_ends_with_a_final_read_of_every_partition_which_the_log_model_judges(tmp_path: Path) -> None:
    # Without final reads an acknowledged append lost at the tail of a log, which no later
    # append took the offset of and no read reached, went unseen (Jepsen's log workloads end
    # with final reads after healing for this).
    logs = FakeLogs()
    recorder = Recorder(tmp_path / "history.jsonl")
    generator = Generator(recorder, make_workers(CONFIG, logs, Seeds(1)), rate=500, op_timeout=1)
    asyncio.run(generator.run(0.4))
    failures = asyncio.run(final_reads(CONFIG, logs, recorder, generator.highest_process + 1))
    recorder.close()
    ops = read_history(tmp_path / "history.jsonl")
    assert failures == 0
    finals = [op for op in ops if op.f == "final-read" and op.type == "ok"]
    assert [(op.value["topic"], op.value["partition"]) for op in finals] == list(CONFIG.topic_partitions)
    assert min(op.process for op in finals) > max(op.process for op in ops if op.f != "final-read")
    for op in finals:
        log = logs.logs.get((op.value["topic"], op.value["partition"]), [])
        assert op.value["records"] == [[o, v] for o, v in enumerate(log)] and op.value["high_watermark"] == len(log)
    assert LinearizableChecker().check(CheckInput(ops, config=CONFIG)).valid is True
    # The same run, had the log lost its last acknowledged append before the final read:
    tail = max((op for op in ops if op.f == "append" and op.type == "ok"), key=lambda op: op.value["offset"])
    key = (tail.value["topic"], tail.value["partition"])

    def cut(op: Op) -> Op:
        if op.f != "final-read" or op.type != "ok" or (op.value["topic"], op.value["partition"]) != key:
            return op
        return dataclasses.replace(op, value={**op.value, "records": op.value["records"][:tail.value["offset"]]})

    assert LinearizableChecker().check(CheckInput([cut(op) for op in ops], config=CONFIG)).valid is False
