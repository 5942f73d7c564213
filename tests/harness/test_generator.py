"""Tests for floodmark.harness.generator: rate, concurrency and the process rules."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from floodmark.contracts.history import pair_ops, read_history
from floodmark.harness.generator import (
    LAST_SLOT_GRACE,
    Completion,
    Generator,
    Invocation,
    OpDeadline,
    ProcessNumbers,
    RateLimiter,
)
from floodmark.harness.recorder import Recorder
from floodmark.reference.sim.loop import VirtualTimeLoop


class FakeWorker:
    """A worker whose ops end as a script says (test double for a workload's worker)."""

    def __init__(self, outcomes: list[str], delay: float = 0.0) -> None:
        self.outcomes = outcomes
        self.delay = delay
        self.count = 0
        self.reopened = 0
        self.closed = False
        self.in_flight = 0
        self.max_in_flight = 0

    def next_op(self) -> Invocation:
        self.count += 1
        return Invocation("write" if self.count % 2 else "read", self.count)

    async def invoke(self, op: Invocation) -> Completion:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            outcome = self.outcomes[(op.value - 1) % len(self.outcomes)]
            if outcome == "hang":
                await asyncio.sleep(3600)
            if outcome == "raise":
                raise RuntimeError("boom")
            await asyncio.sleep(self.delay)
            return Completion(outcome, {"v": op.value}, error=None if outcome == "ok" else "x")  # type: ignore[arg-type]
        finally:
            self.in_flight -= 1

    def timeout_type(self, f: str):
        return "fail" if f == "read" else "info"

    async def reopen(self) -> None:
        self.reopened += 1

    async def close(self) -> None:
        self.closed = True


def run(tmp_path: Path, workers, rate=1000.0, duration=0.3, op_timeout=1.0, virtual=False):
    """Run the generator on a real event loop, or (``virtual``) on the simulator's, whose
    time moves only as the tasks wait: counts and spacings are then exact, whatever the
    machine's load."""
    recorder = Recorder(tmp_path / "history.jsonl")
    generator = Generator(recorder, workers, rate=rate, op_timeout=op_timeout)
    if virtual:
        loop = VirtualTimeLoop()
        try:
            loop.run_until_complete(generator.run(duration))
        finally:
            loop.close()
    else:
        asyncio.run(generator.run(duration))
    recorder.close()
    return generator, read_history(tmp_path / "history.jsonl")


def test_every_invoke_completes_and_processes_alternate(tmp_path: Path) -> None:
    workers = [FakeWorker(["ok"], delay=0.001) for _ in range(3)]
    generator, ops = run(tmp_path, workers)
    pairs = pair_ops(ops)
    invokes = [op for op in ops if op.type == "invoke"]
    assert invokes and len(pairs) == len(invokes)  # nothing left open
    for invoke in invokes:
        completion = ops[pairs[invoke.index]]
        assert completion.process == invoke.process and completion.f == invoke.f
        assert completion.time >= invoke.time
    # One op at a time per process; times nondecreasing.
    open_: set = set()
    for op in ops:
        if op.type == "invoke":
            assert op.process not in open_
            open_.add(op.process)
        else:
            open_.remove(op.process)
    assert [op.time for op in ops] == sorted(op.time for op in ops)
    assert all(w.closed and w.max_in_flight == 1 for w in workers)
    assert {op.process for op in ops} == {0, 1, 2}


def test_info_retires_the_process_and_worker_continues(tmp_path: Path) -> None:
    workers = [FakeWorker(["ok", "info", "fail"]), FakeWorker(["ok"])]
    generator, ops = run(tmp_path, workers, rate=200, duration=0.3)
    by_process: dict = {}
    for op in ops:
        by_process.setdefault(op.process, []).append(op)
    # Worker 0 is processes 0, 2, 4, ...: each ends with its info op, never acts after it.
    worker0 = sorted(p for p in by_process if p % 2 == 0)
    assert len(worker0) >= 2 and worker0[:3] == [0, 2, 4][: len(worker0[:3])]
    for process in worker0[:-1]:
        completions = [op for op in by_process[process] if op.type != "invoke"]
        assert completions[-1].type == "info"
        assert all(op.type != "info" for op in completions[:-1])
    assert workers[0].reopened == len(worker0) - 1 == generator.numbers.retired
    assert set(by_process) - set(worker0) == {1}


def test_timeouts_are_info_for_writes_fail_for_reads(tmp_path: Path) -> None:
    workers = [FakeWorker(["hang"]), FakeWorker(["raise"])]
    _, ops = run(tmp_path, workers, rate=50, duration=0.05, op_timeout=0.1)
    completions = [op for op in ops if op.type != "invoke"]
    hung = [op for op in completions if op.process % 2 == 0]
    assert hung[0].f == "write" and hung[0].type == "info" and hung[0].error == "timeout"
    raised = [op for op in completions if op.process % 2 == 1]
    assert raised[0].type == "info" and "boom" in raised[0].error


def test_read_timeout_is_fail_and_keeps_the_process(tmp_path: Path) -> None:
    worker = FakeWorker(["ok", "hang"])  # op 1 write ok, op 2 read hangs
    _, ops = run(tmp_path, [worker, FakeWorker(["ok"])], rate=100, duration=0.25, op_timeout=0.05)
    reads = [op for op in ops if op.f == "read" and op.type != "invoke" and op.process % 2 == 0]
    assert reads and all(op.type == "fail" for op in reads)
    assert worker.reopened == 0


def test_rate_limit_bounds_throughput(tmp_path: Path) -> None:
    """At 100 ops/s over 0.5 s of (virtual) time: the slots at 0, 0.01, ..., 0.5, whichever
    of the four workers takes each."""
    workers = [FakeWorker(["ok"]) for _ in range(4)]
    _, ops = run(tmp_path, workers, rate=100, duration=0.5, virtual=True)
    invokes = sum(1 for op in ops if op.type == "invoke")
    assert 50 <= invokes <= 51


def test_rate_limit_never_bursts_on_a_real_loop(tmp_path: Path) -> None:
    """The same on a real loop: a loaded machine may run fewer ops, never more."""
    workers = [FakeWorker(["ok"]) for _ in range(4)]
    _, ops = run(tmp_path, workers, rate=100, duration=0.5)
    assert 1 <= sum(1 for op in ops if op.type == "invoke") <= 60


def test_rate_limiter_spaces_slots_without_banking() -> None:
    clock = [0.0]
    limiter = RateLimiter(10, clock=lambda: clock[0])

    async def go() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for _ in range(3):
            await limiter.acquire()
        return loop.time() - start

    def virtually(elapsed: Callable[[], Coroutine[Any, Any, float]]) -> float:
        loop = VirtualTimeLoop()
        try:
            return loop.run_until_complete(elapsed())
        finally:
            loop.close()

    # Slots at 0, 0.1 and 0.2 of the limiter's clock, which stands still: the waits, each
    # counted from 0, are 0, 0.1 and 0.2 of loop time.
    assert virtually(go) == pytest.approx(0.3)
    clock[0] = 100.0  # idle for a long time: the next acquire is immediate, but no burst after it
    assert virtually(go) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        RateLimiter(0)


def test_a_slot_far_past_the_end_is_not_waited_for(tmp_path: Path) -> None:
    """At one op every two seconds over four workers, the last slot of a 0.3 s workload was
    six seconds in: the run waited for it (a simulated run at --rate 0.01 overran its budget
    of virtual time). Now no worker waits more than LAST_SLOT_GRACE past the end."""
    workers = [FakeWorker(["ok"]) for _ in range(4)]
    started = time.monotonic()
    _, ops = run(tmp_path, workers, rate=0.5, duration=0.3)
    assert time.monotonic() - started < 0.3 + LAST_SLOT_GRACE + 1.0
    assert [op.type for op in ops] == ["invoke", "ok"]  # only the slot at 0 was before the end


def test_process_numbers() -> None:
    numbers = ProcessNumbers(4)
    assert numbers.first(3) == 3
    assert numbers.next(3) == 7 and numbers.next(7) == 11 and numbers.retired == 2


class InstantWorker(FakeWorker):
    """Completes without ever awaiting: must not starve the loop (the stop timer included)."""

    async def invoke(self, op: Invocation) -> Completion:
        return Completion("ok", op.value)


def test_ops_that_never_wait_do_not_starve_the_loop(tmp_path: Path) -> None:
    started = time.monotonic()
    _, ops = run(tmp_path, [InstantWorker(["ok"]) for _ in range(2)], rate=1e6, duration=0.3)
    assert time.monotonic() - started < 5
    assert len(ops) > 100


# ------------------------------------------------------------------ the op deadline


def _outcome_under(deadline: str, body: str) -> tuple[str, int, bool]:
    """Run ``body`` under ``asyncio.timeout`` or :class:`OpDeadline` (0.05 s); returns how it
    ended, the task's cancelling count afterwards and whether the loop still holds a timer."""

    async def scenario() -> tuple[str, int, bool]:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        async def work() -> str:
            if body == "quick":
                await asyncio.sleep(0.01)
                return "done"
            if body == "hang":
                await asyncio.sleep(10)
            if body == "swallow":  # the deadline's cancel is caught and the work carries on
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    return "swallowed"
            if body == "outer-cancel":  # someone else cancels the task first
                loop.call_later(0.01, task.cancel)
                await asyncio.sleep(10)
            if body == "raise":
                await asyncio.sleep(0.01)
                raise ValueError("boom")
            return "unreachable"

        try:
            if deadline == "asyncio":
                async with asyncio.timeout(0.05):
                    result = await work()
            else:
                with OpDeadline(task, 0.05):
                    result = await work()
        except BaseException as e:  # noqa: BLE001 (the kind of ending is what is compared)
            result = type(e).__name__
        pending = any(not h.cancelled() for h in loop._scheduled)  # type: ignore[attr-defined]
        return result, task.cancelling(), pending

    return asyncio.run(scenario())


@pytest.mark.parametrize("body", ["quick", "hang", "swallow", "outer-cancel", "raise"])
def test_the_op_deadline_ends_every_op_as_asyncio_timeout_does(body: str) -> None:
    # The generator's deadline replaces asyncio.timeout on the hot path: every way an op can
    # end must come out the same (the simulator's runs depend on it, byte for byte).
    ours = _outcome_under("op-deadline", body)
    assert ours == _outcome_under("asyncio", body)
    assert ours[0] == {"quick": "done", "hang": "TimeoutError", "swallow": "swallowed",
                       "outer-cancel": "CancelledError", "raise": "ValueError"}[body]
