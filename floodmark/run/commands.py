"""The ``floodmark run`` and ``floodmark repro`` commands, and every command's options.

``run`` builds a test configuration from options and/or a YAML file, runs it and exits with
the verdict (0 valid, 1 invalid, 2 unknown, 254 bad arguments, 130 interrupted).
``repro`` runs a stored run again: the same configuration, seed and fault schedule.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from floodmark.backends import cleanup
from floodmark.errors import UsageError, given_text, printable
from floodmark.harness.config import (
    CLUSTERS,
    NEMESIS_KINDS,
    SIMULATED_KINDS,
    WORKLOADS,
    ConfigError,
    TestConfig,
    load_config,
    make_config,
)
from floodmark.harness.schedule import ScheduleError, load_schedule
from floodmark.reference.protocol.variants import VARIANTS
from floodmark.run.argument_checks import DEFAULT_STORE, given_run_dir, store_of_run, usable_store
from floodmark.run.explore_commands import EXPLORE_DESCRIPTION, explore_command, shrink_command
from floodmark.run.replayed_test import Replayed, replayed_test
from floodmark.run.scheduled_test import say_another_test, scheduled_config
from floodmark.run.swarm import SWARM_WORKLOADS
from floodmark.run_dirs import rundir

RUN_DESCRIPTION = """\
Run one chaos test: start a cluster of the reference implementation, drive producers and
consumers against it while injecting faults, then heal, drain, check and report.

The run directory (store/<test>/<time>-s<seed>/) receives test.yaml, schedule.json,
history.jsonl, node events and logs, results.json and report.html. The seed is printed
first; `floodmark repro RUN_DIR` runs the same test, seed and fault schedule again.

Options override the values of a test file (-f). Defaults give a 60-second queue test on
Docker under every fault kind with 3 brokers, 2 topics of 3 partitions, replication
factor 3, min.insync.replicas 2 and acks=all.

--cluster sim runs everything in one process on virtual time (no root, Docker or Java
needed): a 60-second test takes seconds, the same seed gives the same run byte for byte,
and it adds faults no real cluster can apply (power loss, ZooKeeper session expiry, message
faults). Start there.

--schedule FILE replays an exact sequence of faults (the format of a run's schedule.json:
{"time_limit": 30, "faults": [{"number": 0, "kind": "partition", "shape": "isolate-leader",
"start": 5.0, "duration": 8.0, "seed": 1}, ...]}); the backend refuses, before anything
starts, a fault it cannot apply, and so is a fault that starts at or after the time limit
(it would never run), one the cluster's layout leaves nothing to do (a bridge on two
brokers, a follower's fetches with replication factor 1) and a cut, pause, clock, disk,
message or stall fault lasting 0 s (or under a nanosecond); a fault lasting past the time limit is ended by the
final heal-all, once the clients' last operations have completed (or by its own end, if
that comes first), which the run says before it starts (schedule.json's stopped_at says when).
The schedule's seed and time limit (a run's schedule.json states both) are the test's, over
a -f file's, unless --seed or --time-limit says otherwise (the same faults under other client
interleavings), which stderr then says. Nothing else of a run comes with its schedule (nodes,
backend, load: the options and -f say those, and stderr says when they are not the run's):
`run -f RUN/test.yaml --schedule RUN/schedule.json` of a simulated run replays it byte for
byte, as `floodmark repro RUN` does.
"""

RUN_EXAMPLES = """\
examples:
  floodmark run --cluster sim --time-limit 60                        # start here: seconds, no setup
  floodmark run --cluster local --nemesis none --time-limit 20        # a quick smoke test (root)
  floodmark run --cluster docker --workload queue --nemesis all --time-limit 60 --seed 42
  floodmark run --cluster local --nemesis kill,partition --variant truncate-to-hw
  floodmark run -f tests/my-test.yaml --seed 7

a test file (-f) uses the same keys, with underscores or dashes, plus the harness's timing
keys (recovery_time, fault_duration [min, max], quiet_period [min, max], op_timeout,
drain_timeout, check_time_limit, zk_session_timeout):

  name: partitions-only
  cluster: local
  nemesis: [partition]
  time_limit: 30
  fault_duration: [5, 15]

variants: {variants}
exit codes: 0 valid, 1 invalid (an anomaly was found), 2 unknown, 254 bad arguments,
130 interrupted.
"""

# Options that map one-to-one onto configuration keys (dest -> key).
CONFIG_OPTIONS = (
    "name", "seed", "cluster", "nodes", "workload", "nemesis", "time_limit", "variant", "topics",
    "partitions", "replication_factor", "min_insync_replicas", "acks", "rate", "concurrency",
    "inter_broker_protocol", "linger", "poll_max_records",
)


def register(subparsers: Any) -> None:
    run = _add_command(
        subparsers, "run", run_command, help="run a chaos test", description=RUN_DESCRIPTION,
        epilog=RUN_EXAMPLES.format(variants=", ".join(VARIANTS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("-f", "--file", metavar="TEST.yaml", help="read the test configuration from a YAML file")
    test = run.add_argument_group("the test")
    test.add_argument("--name", help="test name (default: <workload>-<nemesis>-<variant>)")
    test.add_argument("--cluster", choices=CLUSTERS,
                      help="where the nodes run: docker (default), local (needs root) or sim (the simulator)")
    test.add_argument("--nodes", type=int, metavar="N", help="number of brokers, 1-9 (default 3)")
    test.add_argument("--workload", choices=WORKLOADS,
                      help="queue: producers and consumers (default); log-lin: appends and reads at offsets")
    test.add_argument("--nemesis", metavar="KINDS",
                      help=f"fault kinds, comma-separated from {','.join(NEMESIS_KINDS)} (and, on sim, "
                           f"{','.join(SIMULATED_KINDS)}), or all, or none (default all); upgrade (a "
                           "double roll to kip-343, on every backend) only when named, and with it brokers "
                           "start at legacy unless --inter-broker-protocol says otherwise")
    test.add_argument("--time-limit", type=float, metavar="SECONDS", help="length of the fault phase (default 60)")
    test.add_argument("--seed", type=int, help="the seed deciding every choice of the harness (default: random, printed)")
    test.add_argument("--variant", metavar="NAME", help="protocol variant of the reference (default: default)")
    load = run.add_argument_group("load and layout")
    load.add_argument("--rate", type=float, metavar="OPS", help="client ops per second in total (default 200)")
    load.add_argument("--concurrency", type=int, metavar="N", help="client workers (default 8)")
    load.add_argument("--linger", type=float, metavar="SECONDS",
                      help="how long the producer waits for more sends to a partition before sending "
                           "them together as one request (Kafka's linger.ms, in seconds: 0.005 is 5 ms, "
                           "Kafka 4.0's default); at most 1 (default 0: only sends made at the same "
                           "moment share a request)")
    load.add_argument("--poll-max-records", type=int, metavar="N",
                      help="the most records a consumer's poll takes of each partition (Kafka's "
                           "max.poll.records; default 100: a few make consumers lag behind)")
    load.add_argument("--topics", type=int, metavar="N", help="number of topics t0..tN-1 (default 2)")
    load.add_argument("--partitions", type=int, metavar="N", help="partitions per topic (default 3)")
    load.add_argument("--replication-factor", type=int, metavar="N", help="replicas per partition (default 3)")
    load.add_argument("--min-insync-replicas", type=int, metavar="N", help="min.insync.replicas (default 2)")
    load.add_argument("--acks", choices=("all", "1", "0"), help="producer acks (default all)")
    load.add_argument("--inter-broker-protocol", metavar="VERSION",
                      help="what every broker speaks: legacy (no heartbeats; ISR written to ZooKeeper "
                           "by the leader), heartbeats (default: KIP-343's heartbeats and self-fencing) "
                           "or kip-343 (ISR changes proposed to the controller); with the upgrade "
                           "fault the default is legacy, and kip-343 is refused (nothing to upgrade)")
    run.add_argument("--schedule", metavar="FILE",
                     help="replay this fault schedule (schedule.json format) instead of drawing one; its "
                          "seed and time_limit are the test's unless --seed or --time-limit is given")
    run.add_argument("--store", default=None, metavar="DIR", help=f"where run directories go (default ./{DEFAULT_STORE})")

    repro = _add_command(
        subparsers, "repro", repro_command, help="run a stored run again with the same config, seed and fault schedule",
        description="Run a stored test again: the same test.yaml (seed included) and the same "
                    "fault schedule from schedule.json. The new run gets its own run directory. A "
                    "simulated run's replay is compared with the run's digest.json and said to be "
                    "identical or to differ (naming the files). test.yaml must be as the run wrote it "
                    "(edited, it is refused: the checkers judged the run by it); schedule.json may be "
                    "edited (a fault removed, the time limit cut short) and is replayed as it now is, "
                    "its time_limit over test.yaml's, and said to be edited.",
        epilog="exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 130 interrupted.",
    )
    repro.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (or store/latest)")
    repro.add_argument("--store", default=None, metavar="DIR",
                       help="where the new run directory goes (default: the store RUN_DIR is in)")

    explore = _add_command(
        subparsers, "explore", explore_command, help="run many seeds on the simulator, each its own test; report what fails",
        description=EXPLORE_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 1 if any run was invalid, else 2 if any was unknown, else 0; 254 bad arguments; "
               "130 interrupted (failing runs found so far kept, unfinished ones removed).",
    )
    explore.add_argument("--runs", type=int, default=100, metavar="N", help="seeds to run (default 100)")
    explore.add_argument("--seed", type=int, default=None, metavar="S",
                         help="the first seed; seeds S, S+1, ... (default: random, printed)")
    explore.add_argument("--variant", default="default", metavar="NAME",
                         help=f"protocol variant: {', '.join(VARIANTS)} (default: default)")
    explore.add_argument("--workload", default="queue", choices=SWARM_WORKLOADS,
                         help="what the clients do: queue (sends and polls, judged for loss, order and "
                              "duplicates) or log-lin (appends and reads, judged for linearizability) "
                              "(default: queue)")
    explore.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                         help="start no new seed after this long")
    explore.add_argument("--stop-on-first", action="store_true", help="stop at the first invalid run")
    explore.add_argument("--jobs", type=int, default=None, metavar="N",
                         help="worker processes (default: one per core)")
    explore.add_argument("--master", default=None, metavar="URL",
                         help="run the seeds as Spark tasks on this master (local[*], spark://...)")
    explore.add_argument("--keep-all", action="store_true", help="keep every run directory, not only failing ones")
    explore.add_argument("--no-shrink", action="store_true", help="do not shrink what fails")
    explore.add_argument("--shrink-budget", type=int, default=40, metavar="N",
                         help="runs the shrinker may spend per failure (default 40)")
    explore.add_argument("--store", default=None, metavar="DIR", help=f"where runs go (default ./{DEFAULT_STORE})")

    shrink = _add_command(
        subparsers, "shrink", shrink_command, help="reduce a failing simulated run to a minimal one that fails the same way",
        description="Run smaller and smaller versions of a failing simulated run (fewer faults, "
                    "shorter, shorter faults, fewer brokers, lighter load), keeping each that is "
                    "still invalid with one of the original anomaly types. The smallest becomes a "
                    "run directory of its own; floodmark repro replays it. A run whose schedule.json "
                    "was edited since is refused (what failed was the schedule before the edit): "
                    "replay it with floodmark repro and shrink that run.",
        epilog="exit codes: 0 shrunk (or already minimal), 254 bad arguments, 130 interrupted (the smallest "
               "failing run so far kept).",
    )
    shrink.add_argument("run_dir", metavar="RUN_DIR", help="a failing run directory of --cluster sim")
    shrink.add_argument("--budget", type=int, default=60, metavar="N", help="at most this many runs (default 60)")
    shrink.add_argument("--store", default=None, metavar="DIR",
                        help="where the candidate runs go (default: the store RUN_DIR is in)")

    _add_command(
        subparsers, "images", images_command, help="build the Docker images the docker cluster uses (if missing)",
        description="Build floodmark/base (debootstrap + docker import, or FLOODMARK_BASE_IMAGE), "
                    "floodmark/zookeeper and floodmark/broker. Images whose content is unchanged "
                    "are reused; the broker image is rebuilt when the reference sources change.",
    )

    _add_command(
        subparsers, "cleanup", cleanup_command, help="remove what crashed runs left behind (containers, namespaces, rules)",
        description="Remove the containers, networks, network namespaces, bridges, iptables rules "
                    "and processes of runs whose harness is no longer alive. Live runs are untouched. "
                    "Every run does this at start; this command does it on demand.",
    )


def _add_command(subparsers: Any, name: str, func: Callable[[argparse.Namespace], int],
                 **options: Any) -> argparse.ArgumentParser:
    """The subcommand ``name``, which runs ``func``; ``options`` go to ``add_parser`` (help, ...)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, **options)
    parser.set_defaults(func=func)
    return parser


def config_from_args(args: argparse.Namespace) -> TestConfig:
    """The configuration the options (and -f file) describe; bad values raise UsageError."""
    overrides = {key: getattr(args, key) for key in CONFIG_OPTIONS if getattr(args, key, None) is not None}
    given_text("-f/--file", args.file, "file name")  # named, but nothing: never the defaults in its place
    given_text("--name", args.name, "test name")  # "" would be the derived name, unasked
    try:
        if args.file is not None:
            return load_config(args.file, overrides)
        return make_config(overrides, "command line")
    except ConfigError as e:
        raise UsageError(str(e)) from None


def run_command(args: argparse.Namespace) -> int:
    given_text("--schedule", args.schedule, "file name")  # named, but nothing: never the seed's schedule
    config = config_from_args(args)
    schedule = None
    if args.schedule is not None:
        try:
            seed, schedule = load_schedule(args.schedule)
        except ScheduleError as e:
            raise UsageError(str(e)) from None
        config = scheduled_config(args, config, seed, schedule)
        say_another_test(args, config)
        try:
            schedule.check_starts_within(config.time_limit, args.schedule)
        except ScheduleError as e:
            raise UsageError(str(e)) from None
    from floodmark.run.runner import run_test

    return run_test(config, usable_store(args.store), schedule).exit_code


def repro_command(args: argparse.Namespace) -> int:
    """Replay a stored run: its test.yaml, its schedule.json and, on the simulator, a proof
    that the replay was byte-identical (digest.json). Whatever of these is there but cannot
    be read refuses the replay, naming the file: a replay of something else must not pass
    for this run's (see :func:`replay_inputs`). A schedule.json edited since the run (its
    time limit, its faults) is replayed as it now is, and said to be, before and after: a
    replay that differs then differs by the edit, not by nondeterminism."""
    path = given_run_dir(args.run_dir)
    run = rundir.RunDir(path)
    replayed, original = replay_inputs(run, args.run_dir)
    config = replayed.config
    from floodmark.run import digest
    from floodmark.run.runner import run_test
    from floodmark.run_dirs.unfinished_runs import unfinished_reason

    if replayed.edited is not None:
        print(printable(f"floodmark: {run.schedule}: edited since the run ({replayed.edited}); replaying it as it "
                        "is now"), file=sys.stderr)
    record_change = replayed.record_change()
    if record_change is not None:  # not an edit of what is replayed: said as what it is
        print(printable(f"floodmark: {run.schedule}: {record_change}"), file=sys.stderr)
    if original is None and config.cluster == "sim":
        unfinished = unfinished_reason(run)  # (a run that never finished was never digested)
        print(printable(f"floodmark: {run.digest}: no such file: whether the replay is byte-identical cannot be "
                        "compared" + (f"; the run did not finish ({unfinished}): the replay runs it whole"
                                      if unfinished is not None else "")), file=sys.stderr)
    store = usable_store(args.store) if args.store is not None else store_of_run(path)
    outcome = run_test(config, store, replayed.schedule)
    if original is not None and outcome.digest is not None:
        # The history and node events, not test.yaml: the replay's names the code it ran.
        differ = digest.differences(original, outcome.digest, configuration=False)
        if differ:
            recorded, now = config.code_version, outcome.config.code_version
            why = (f"{rundir.SCHEDULE} edited since the run: {replayed.edited}" if replayed.edited is not None
                   else f"the code changed since: recorded with {recorded}, replayed with {now}" if recorded != now
                   else f"{replayed.unrecorded_cause()}nondeterminism, or uncommitted changes: code {now} both "
                   "times")
            print(printable(f"floodmark: replay DIFFERS from {path}: {', '.join(differ)} ({why})"), file=sys.stderr)
        else:
            print(printable(f"floodmark: replay identical to {path} (digest {outcome.digest['run'][:16]})"),
                  file=sys.stderr)
    return outcome.exit_code


def replay_inputs(run: rundir.RunDir, named: str) -> tuple[Replayed, dict[str, str] | None]:
    """A run's configuration and fault schedule (as its schedule.json now says, see
    :mod:`floodmark.run.replayed_test`) and digests, for replaying it; UsageError naming
    the file when one cannot be used.

    Every run records its schedule in schedule.json before it starts, so a run without one is
    refused too: drawing the schedule from the seed again would replay a different test if
    the run had replayed a hand-written one (``floodmark run -f RUN/test.yaml`` runs the
    seed's own schedule, knowingly)."""
    from floodmark.run import digest

    if not os.path.lexists(run.config):
        raise UsageError(f"{named}: not a run directory (no {rundir.CONFIG})")
    replayed = replayed_test(run)
    try:
        return replayed, digest.load(run)
    except digest.DigestError as e:
        raise UsageError(str(e)) from None


def images_command(args: argparse.Namespace) -> int:
    from floodmark.backends.images import main as build_images

    return build_images()


def cleanup_command(args: argparse.Namespace) -> int:
    removed = cleanup.remove_stale_runs(docker_too=True)
    for item in removed:
        print(f"removed {item}")
    print(f"{len(removed)} stale resource(s) removed")
    return 0
