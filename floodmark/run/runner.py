"""The run: one chaos test from start to verdict.

A run goes through fixed steps, and the ones that undo things happen whatever went wrong:

1. pick the seed (or take the given one), create the run directory, save ``test.yaml`` and
   print the seed, so that even a run that crashes can be repeated;
2. remove what crashed runs left behind (containers, namespaces, iptables rules);
3. start the cluster (ZooKeeper and the brokers) and create the test's topics;
4. the *fault phase*: the workload's clients run for ``time_limit`` seconds while the fault
   driver executes the schedule; a progress line shows ops/s, outcomes and the current fault;
5. heal everything (``heal-all``), *even if an earlier step failed*; wait for the cluster to
   recover (every partition led, its ISR whole again); run the workload's final reads (the
   queue workload's drain of every partition from offset 0);
6. tear the cluster down, collecting node logs and event files into the run directory;
7. run the checkers, write ``results.json`` and the HTML report, print the verdict.

Ctrl-C (or SIGTERM) during steps 3-5 stops the clients, heals, tears down and exits (130)
without checking; a second Ctrl-C skips the heal but still tears down. The run directory
keeps what was recorded up to the interrupt, and says, before the teardown begins, that the
run was interrupted and where (``interrupted.json``, and a ``results.json`` of verdict
unknown giving that reason): ``floodmark check`` can still judge the partial history, but
never as valid. A harness that is killed
outright leaves a readable history (every op is flushed as it happens) and its resources are
removed by step 2 of the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from floodmark.backends import cleanup
from floodmark.checkers.convergence import AWAIT_FULL_ISR
from floodmark.contracts.history import NEMESIS, Op, read_history
from floodmark.contracts.results import Validity, build_results, mark_interrupted, write_results
from floodmark.errors import SourceError, UsageError, exit_code, first_few, printable
from floodmark.harness.cluster import ClusterSpec
from floodmark.harness.code_version import code_version
from floodmark.harness.config import TestConfig, dump_config, recorded_settings
from floodmark.harness.generator import Generator
from floodmark.harness.progress import Progress
from floodmark.harness.recorder import Recorder
from floodmark.harness.run_identity import resource_id, run_id_for
from floodmark.harness.schedule import Schedule, ScheduleLog
from floodmark.harness.seeds import Seeds, new_seed
from floodmark.nemesis.compose import Composite
from floodmark.owners import owner_token
from floodmark.run import digest
from floodmark.run.admin_faults import AdminFaults, FaultRouter
from floodmark.run.assemble import (
    broker_args,
    deterministic,
    draw_schedule,
    kind_without_shapes,
    make_backend,
    make_nemeses,
    refusal,
)
from floodmark.run.backend import Backend
from floodmark.run.fault_driver import FaultDriver
from floodmark.run_dirs import rundir, unfinished_runs
from floodmark.workloads.clients import LibraryClients, problem_lines
from floodmark.workloads.registry import final_reads, make_workers

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 130
MISSED_SHOWN = 3  # faults that did not take effect named beside the verdict, per kind
PAST_SHOWN = 3  # faults lasting past the time limit named before the run


@dataclass
class RunOutcome:
    """What a run produced: where, its verdict and how long the steps took."""

    run_dir: rundir.RunDir
    config: TestConfig
    valid: Validity | None = None  # None when interrupted before a verdict
    interrupted: bool = False
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    digest: dict[str, str] | None = None  # a simulated run's digests, for replays (see run.digest)
    interruption: unfinished_runs.Interruption | None = None  # where an interrupt stopped the run

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return exit_code(self.valid if self.valid is not None else "unknown")


class Runner:
    def __init__(
        self, config: TestConfig, store: str | Path, schedule: Schedule | None = None,
        out: TextIO | None = None, check: bool = True, report: bool = True, partial: bool = False,
    ) -> None:
        seed = config.seed if config.seed is not None else new_seed()
        self.config = config.replace(seed=seed)
        self.seeds = Seeds(seed)
        self.store = Path(store)
        self.planned_schedule = schedule
        self.out = out or sys.stderr
        self.check = check
        self.report = report  # exploration writes reports only for the runs it keeps
        self.started = time.monotonic()
        # partial (an exploration's, a shrink's run): made where no reader sees it, until
        # its maker publishes it whole (publish), or removed if its maker is killed.
        self.run_dir = rundir.create_run_dir(self.store, self.config.name, seed,
                                             owner=owner_token() if partial else None)
        if not partial:  # (a partial run's name says who makes it) readers see who does, until it is whole
            unfinished_runs.claim_run(self.run_dir)
        self.outcome = RunOutcome(self.run_dir, self.config)
        self.step = "starting the cluster"  # what the run is doing, for an interrupt to record
        self.fault_phase_began: float | None = None  # the history's clock when it began

    def say(self, message: str) -> None:
        # (a line says one thing: a file or directory name's newline must not end it)
        print(f"floodmark: {printable(message)}", file=self.out, flush=True)

    def mark(self, step: str) -> None:
        self.outcome.timings[step] = round(time.monotonic() - self.started, 3)

    # ------------------------------------------------------------------ the lifecycle

    def plan_schedule(self, nemeses: Composite) -> Schedule:
        """The given schedule, or one drawn from the seed; refused if the backend cannot apply it."""
        config = self.config
        unusable = None if self.planned_schedule is not None else kind_without_shapes(config, nemeses)
        if unusable is not None:
            raise UsageError(unusable)
        schedule = self.planned_schedule or draw_schedule(config, nemeses, self.seeds.schedule())
        problem = refusal(config.cluster, schedule, nemeses, config.nodes, config.zk_session_timeout,
                          config.time_limit, config.replication_factor)
        if problem is not None:
            raise UsageError((f"{schedule.source}: " if schedule.source else "") + problem)
        # schedule.json records the test that ran: a given schedule's own time limit (or,
        # unstated, its last fault's end) is not the test's when --time-limit or -f said
        # otherwise, and `run --schedule RUN/schedule.json` would replay another length.
        return dataclasses.replace(schedule, time_limit=config.time_limit, time_limit_stated=True)

    def _say_faults_past_the_limit(self, schedule: Schedule) -> None:
        """One line naming the faults the final heal-all will end before their planned end
        (a hand-written schedule's: a drawn one ends each by the time limit), so that none is
        cut short unseen (see floodmark.harness.schedule)."""
        past, limit = schedule.past(self.config.time_limit), self.config.time_limit
        if not past:
            return
        if len(past) == 1:
            first = past[0]
            what = (f"fault {first.number} ({first.kind} {first.shape}) is planned to end at {first.end:g} s, "
                    f"after the test's time limit of {limit:g} s: the final heal-all ends it")
        else:
            named = first_few([f"fault {f.number} ({f.kind} {f.shape}) at {f.end:g} s" for f in past], PAST_SHOWN)
            what = (f"{len(past)} faults are planned to end after the test's time limit of {limit:g} s ({named}): "
                    "the final heal-all ends them")
        self.say(f"{schedule.source or 'the schedule'}: {what} instead, once the clients' last operations "
                 "complete (schedule.json's stopped_at says when)")

    def run(self) -> RunOutcome:
        # What the run promised is read back from test.yaml by the checkers: record it.
        self.config = config = recorded_settings(dataclasses.replace(self.config, code_version=code_version()))
        self.outcome.config = config
        nemeses = make_nemeses(config)
        try:  # refused or interrupted before the cluster starts: the run leaves nothing
            schedule = self.plan_schedule(nemeses)
            # Its own id, whatever the test file or replayed test.yaml said: the brokers name it
            # in their events, and readers hold the events to it.
            run_id = run_id_for(config, schedule, deterministic(config))
            self.config = config = config.replace(run_id=run_id)
            self.outcome.config = config
            dump_config(config, self.run_dir.config)
            self.say(f"seed {config.seed}  (repeat with: floodmark run --seed {config.seed} ... or {rundir.repro_command(self.run_dir.path)})")
            self.say(f"run directory {self.run_dir.path}")
            self._say_faults_past_the_limit(schedule)
            spec = ClusterSpec(
                brokers=config.nodes, variant=config.variant, run_id=resource_id(run_id),
                seed=self.seeds.node("cluster"), broker_args=broker_args(config),
            )
            backend = make_backend(config, spec)
            removed = backend.remove_leftovers()
            if removed:
                self.say(f"removed {len(removed)} resources left by crashed runs")
            # A deterministic backend's run replays from its seed: its history need not reach the
            # file op by op (see the recorder's docstring); _finish closes, and so flushes, it.
            recorder = Recorder(self.run_dir.history, clock_ns=backend.clock_ns, durable=not backend.deterministic)
            schedule_log = ScheduleLog(self.run_dir.schedule, self.seeds.seed, schedule)
            schedule_log.save()
            applier = FaultRouter(backend.faults, AdminFaults(backend.client_host))
            driver = FaultDriver(recorder, nemeses, applier, backend.observe, schedule_log)
        except (UsageError, KeyboardInterrupt):
            rundir.discard(self.store, self.run_dir)
            raise
        healed = False
        try:
            self.say(f"starting a {config.cluster} cluster of {config.nodes} brokers (run id {spec.run_id})")
            backend.setup()
            self.mark("cluster_ready")
            healed = backend.run(self._phases(backend, recorder, driver))
        except KeyboardInterrupt as e:
            self.outcome.interrupted = True
            self._record_interruption(e, recorder)
            self.say("interrupted: healing and tearing down")
        except (Exception, asyncio.CancelledError) as e:  # a cancellation that escaped the run's tasks too
            self.outcome.error = f"{type(e).__name__}: {e}"
            self.say(f"run failed: {self.outcome.error}")
            log.debug("run failed\n%s", traceback.format_exc())
        finally:
            self._finish(backend, recorder, driver, healed)
        if self.outcome.interruption is not None:
            self.say(f"{self.outcome.interruption.describe()}; what it recorded is kept in {self.run_dir.path} "
                     "(floodmark check judges it, unknown at best)")
        if not self.outcome.interrupted:
            # Every run records what it left (check refuses a run directory changed since); a
            # simulated run's digests are also what a replay must reproduce byte for byte.
            saved = digest.save(self.run_dir)
            if backend.deterministic:
                self.outcome.digest = saved
        # Whole, or marked interrupted: no longer being made (a harness killed before this
        # line leaves its name there, and readers call the run abandoned).
        unfinished_runs.release_run(self.run_dir)
        if not self.outcome.interrupted and self.check:
            self._check()
        return self.outcome

    def publish(self, before: Callable[[Path], None] = lambda final: None) -> None:
        """Rename a finished partial run into place, where readers see it
        (rundir.publish_run_dir, which tells ``before`` each name it tries)."""
        self.run_dir = self.outcome.run_dir = rundir.publish_run_dir(self.store, self.run_dir, before)

    async def _phases(self, backend: Backend, recorder: Recorder, driver: FaultDriver) -> bool:
        clients = LibraryClients(self.config, backend.client_host(), backend.cluster.bootstrap_addresses)
        try:
            return await self._workload(clients, recorder, driver)
        finally:
            await clients.close()

    async def _workload(self, clients: LibraryClients, recorder: Recorder, driver: FaultDriver) -> bool:
        config = self.config
        await clients.create_topics()
        self.mark("topics_ready")
        self.step = "the fault phase"
        # The clients give up on their own at op_timeout; this hard deadline catches a hung one.
        generator = Generator(recorder, make_workers(config, clients, self.seeds), config.rate,
                              config.op_timeout + 2.0, on_first_op=lambda: self.mark("first_op"))
        stop = asyncio.Event()
        started_at = self.fault_phase_began = recorder.seconds()
        progress = Progress(recorder, config.time_limit, driver.current, self.out)
        progress_task = asyncio.create_task(progress.run(started_at))
        faults_task = asyncio.create_task(driver.run(started_at, stop))
        try:
            await generator.run(config.time_limit)
        finally:
            stop.set()
            await faults_task
            progress_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await progress_task
        if not progress.last_line:
            self.say("workload done")
        elif progress.last_line != progress.shown:  # the final state, unless just printed
            self.say(progress.last_line)
        timings = self.outcome.timings
        self.say(f"cluster ready after {timings.get('cluster_ready', 0):.1f} s, topics after "
                 f"{timings.get('topics_ready', 0):.1f} s, first op after {timings.get('first_op', 0):.1f} s")
        self.say("healing every fault")
        self.step = "healing"
        await driver.heal_all()
        self.say("waiting for the cluster to recover")
        self.step = "waiting for recovery"
        unrecovered = await clients.wait_for_recovery(config.recovery_time)
        if unrecovered:
            self.say(f"the cluster had not fully recovered after {config.recovery_time:.0f} s; reading anyway. "
                     f"Not serving: {_first_few(unrecovered)}")
        self.step = "the final reads"
        failures = await final_reads(config, clients, recorder, generator.highest_process + 1)
        if failures:
            self.say(f"the final drain could not read {failures} partitions to their end")
        self.mark("final_reads_done")
        if config.cluster == "sim":  # (virtual time: the wait costs nothing; see README)
            await self._await_full_isr(clients, recorder)
        return True

    async def _await_full_isr(self, clients: LibraryClients, recorder: Recorder) -> None:
        """Wait for every replica to be in sync again, recorded for the convergence checker."""
        self.step = "waiting for every replica to be in sync"
        timeout = self.config.recovery_time
        recorder.record("invoke", NEMESIS, AWAIT_FULL_ISR, {"timeout": timeout})
        found = await clients.await_full_isr(timeout)
        recorder.record("ok", NEMESIS, AWAIT_FULL_ISR, found.value())
        if found.short:
            self.say(f"not every replica was in sync {timeout:.0f} s after the final reads: "
                     f"{_first_few(problem_lines(found.short))}")

    def _record_interruption(self, interrupt: KeyboardInterrupt, recorder: Recorder) -> None:
        """Say in the run directory, atomically and at once (a second interrupt may cut the
        teardown short), that the run was interrupted and where; its results.json says the
        verdict is unknown for that reason until a check judges what was recorded."""
        began = self.fault_phase_began
        now = recorder.seconds()
        interruption = unfinished_runs.Interruption(
            step=self.step, seconds=round(now, 3), fault_phase_seconds=None if began is None else round(now - began, 3),
            time_limit=self.config.time_limit, signal=_signal_name(interrupt),
        )
        self.outcome.interruption = interruption
        results = build_results({}, seed=self.config.seed, config=self.config.to_dict(), variant=self.config.variant)
        mark_interrupted(results, interruption.describe())
        try:
            unfinished_runs.write_interruption(self.run_dir, interruption)
            write_results(self.run_dir.results, results)
        except OSError as e:
            self.say(f"could not record the interruption in {self.run_dir.path}: {e}")

    def _interrupted_late(self, interrupt: KeyboardInterrupt, recorder: Recorder) -> None:
        """An interrupt after the phases (while healing or tearing down): the first one
        makes the run an interrupted one, as it would have earlier."""
        if not self.outcome.interrupted:
            self.outcome.interrupted = True
            self._record_interruption(interrupt, recorder)

    def _finish(self, backend: Backend, recorder: Recorder, driver: FaultDriver, healed: bool) -> None:
        """Heal (if the phases did not), tear down and collect; never raises. An interrupt
        here is not swallowed: a run that had not been interrupted is marked so (its node
        events may be cut short), and whoever runs it (a shrink, an exploration) stops."""
        try:
            if not healed:
                try:
                    backend.run(driver.heal_all(each=False))
                except KeyboardInterrupt as e:
                    self._interrupted_late(e, recorder)
                    self.say(f"heal-all after a failure did not complete: {e!r}")
                except Exception as e:
                    self.say(f"heal-all after a failure did not complete: {e!r}")
            self.say("tearing down the cluster and collecting logs")
            self.step = unfinished_runs.TEARDOWN
            backend.teardown(collect_into=self.run_dir)
        except (Exception, KeyboardInterrupt) as e:
            if isinstance(e, KeyboardInterrupt):
                self._interrupted_late(e, recorder)
            self.say(f"teardown failed ({type(e).__name__}: {e}); removing the run's resources by force")
            with contextlib.suppress(Exception):
                backend.force_cleanup()
        finally:
            recorder.close()
            driver.schedule_log.flush()  # what was executed since it was last written
            self.mark("torn_down")

    def _check(self) -> None:
        """Run the checkers (and the report) on the run directory; print the verdict."""
        if self.outcome.error is not None:
            self._unknown(f"the run failed: {self.outcome.error}")
            return
        from floodmark.checkers.registry import check_run

        try:
            # Read once for the checkers and the fault coverage.
            ops = read_history(self.run_dir.history, check_pairs=True)
            checked: Any = check_run(self.run_dir.path, ops=ops)
        except SourceError as e:
            # What the run recorded breaks a contract its readers hold it to: a bug of the
            # harness or the reference, never the user's input (exit 254). The run is kept
            # and its seed replays it.
            self.outcome.error = f"its own record was refused: {e}"
            self._unknown(self.outcome.error)
            return
        valid = checked.get("valid", "unknown") if isinstance(checked, dict) else checked
        self.outcome.valid = valid
        self.mark("checked")
        self._report()
        word = {True: "VALID", False: "INVALID"}.get(valid, "UNKNOWN") if isinstance(valid, bool) else "UNKNOWN"
        self.say(f"verdict: {word}  (results {self.run_dir.results})")
        self._say_fault_coverage(ops)

    def _unknown(self, why: str) -> None:
        results = build_results({}, seed=self.config.seed, config=self.config.to_dict(), variant=self.config.variant)
        results["valid"] = "unknown"
        results["error"] = self.outcome.error
        write_results(self.run_dir.results, results)
        self.outcome.valid = "unknown"
        self._report()
        self.say(f"verdict: UNKNOWN ({why})")

    def _say_fault_coverage(self, ops: list[Op]) -> None:
        """Next to the verdict: which faults took effect (a verdict is worth what they did)."""
        from floodmark.checkers.fault_coverage import fault_coverage, verdict_lines

        try:
            coverage = fault_coverage(ops)
        except ValueError as e:
            self.say(f"fault coverage unknown: {e}")
            return
        for line in verdict_lines(coverage, MISSED_SHOWN):
            self.say(line)

    def _report(self) -> None:
        if not self.report:
            return
        from floodmark.reports.report import write_report

        try:
            path = write_report(self.run_dir.path)
            self.say(f"report {path}")
        except Exception as e:  # a broken report must not hide the verdict
            self.say(f"the report could not be written: {type(e).__name__}: {e}")


def _signal_name(interrupt: KeyboardInterrupt) -> str:
    """The signal an interrupt came from: SIGTERM and a Ctrl-C caught inside a backend's loop
    say theirs ("signal 15", see backends.interrupts); a plain Ctrl-C says nothing."""
    words = str(interrupt).split()
    if len(words) == 2 and words[0] == "signal" and words[1].isdigit():
        try:
            return signal.Signals(int(words[1])).name
        except ValueError:
            pass
    return "SIGINT"


def run_test(config: TestConfig, store: str | Path, schedule: Schedule | None = None) -> RunOutcome:
    """Run one test; SIGTERM is handled like Ctrl-C so teardown always runs."""
    with cleanup.interruptible():
        return Runner(config, store, schedule).run()


def _first_few(lines: list[str], shown: int = 8) -> str:
    """The first ``shown`` lines, joined for one line of output, and "..." if there are more."""
    return "; ".join(lines[:shown]) + (" ..." if len(lines) > shown else "")
