"""The ``floodmark run`` and ``floodmark repro`` commands.

``run`` builds a test configuration from options and/or a YAML file, runs it and exits with
the verdict (0 valid, 1 invalid, 2 unknown, 254 bad arguments, 130 interrupted).
``repro`` runs a stored run again: the same configuration, seed and fault schedule.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from floodmark import rundir
from floodmark.backends import cleanup
from floodmark.errors import UsageError
from floodmark.harness.config import (
    CLUSTERS,
    NEMESIS_KINDS,
    WORKLOADS,
    ConfigError,
    TestConfig,
    load_config,
    make_config,
)
from floodmark.harness.schedule import ScheduleError, load_schedule
from floodmark.reference.protocol.variants import VARIANTS

DEFAULT_STORE = "store"

RUN_DESCRIPTION = """\
Run one chaos test: start a cluster of the reference implementation, drive producers and
consumers against it while injecting faults, then heal, drain, check and report.

The run directory (store/<test>/<time>-s<seed>/) receives test.yaml, schedule.json,
history.jsonl, node events and logs, results.json and report.html. The seed is printed
first; `floodmark repro RUN_DIR` runs the same test, seed and fault schedule again.

Options override the values of a test file (-f). Defaults give a 60-second queue test on
Docker under every fault kind with 3 brokers, 2 topics of 3 partitions, replication
factor 3, min.insync.replicas 2 and acks=all.
"""

RUN_EXAMPLES = """\
examples:
  floodmark run --cluster local --nemesis none --time-limit 20        # a quick smoke test
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
)


def register(subparsers: Any) -> None:
    run = subparsers.add_parser(
        "run", help="run a chaos test", description=RUN_DESCRIPTION,
        epilog=RUN_EXAMPLES.format(variants=", ".join(VARIANTS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("-f", "--file", metavar="TEST.yaml", help="read the test configuration from a YAML file")
    test = run.add_argument_group("the test")
    test.add_argument("--name", help="test name (default: <workload>-<nemesis>-<variant>)")
    test.add_argument("--cluster", choices=CLUSTERS, help="where the nodes run (default docker; local needs root)")
    test.add_argument("--nodes", type=int, metavar="N", help="number of brokers, 1-9 (default 3)")
    test.add_argument("--workload", choices=WORKLOADS,
                      help="queue: producers and consumers (default); log-lin: appends and reads at offsets")
    test.add_argument("--nemesis", metavar="KINDS",
                      help=f"fault kinds, comma-separated from {','.join(NEMESIS_KINDS)}, or all, or none (default all)")
    test.add_argument("--time-limit", type=float, metavar="SECONDS", help="length of the fault phase (default 60)")
    test.add_argument("--seed", type=int, help="the seed deciding every choice of the harness (default: random, printed)")
    test.add_argument("--variant", metavar="NAME", help="protocol variant of the reference (default: default)")
    load = run.add_argument_group("load and layout")
    load.add_argument("--rate", type=float, metavar="OPS", help="client ops per second in total (default 200)")
    load.add_argument("--concurrency", type=int, metavar="N", help="client workers (default 8)")
    load.add_argument("--topics", type=int, metavar="N", help="number of topics t0..tN-1 (default 2)")
    load.add_argument("--partitions", type=int, metavar="N", help="partitions per topic (default 3)")
    load.add_argument("--replication-factor", type=int, metavar="N", help="replicas per partition (default 3)")
    load.add_argument("--min-insync-replicas", type=int, metavar="N", help="min.insync.replicas (default 2)")
    load.add_argument("--acks", choices=("all", "1", "0"), help="producer acks (default all)")
    run.add_argument("--store", default=None, metavar="DIR", help=f"where run directories go (default ./{DEFAULT_STORE})")
    run.set_defaults(func=run_command)

    repro = subparsers.add_parser(
        "repro", help="run a stored run again with the same config, seed and fault schedule",
        description="Run a stored test again: the same test.yaml (seed included) and the same "
                    "fault schedule from schedule.json. The new run gets its own run directory.",
        epilog="exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 130 interrupted.",
    )
    repro.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (or store/latest)")
    repro.add_argument("--store", default=None, metavar="DIR",
                       help="where the new run directory goes (default: the store RUN_DIR is in)")
    repro.set_defaults(func=repro_command)

    images = subparsers.add_parser(
        "images", help="build the Docker images the docker cluster uses (if missing)",
        description="Build floodmark/base (debootstrap + docker import, or FLOODMARK_BASE_IMAGE), "
                    "floodmark/zookeeper and floodmark/broker. Images whose content is unchanged "
                    "are reused; the broker image is rebuilt when the reference sources change.",
    )
    images.set_defaults(func=images_command)

    cleanup_parser = subparsers.add_parser(
        "cleanup", help="remove what crashed runs left behind (containers, namespaces, rules)",
        description="Remove the containers, networks, network namespaces, bridges, iptables rules "
                    "and processes of runs whose harness is no longer alive. Live runs are untouched. "
                    "Every run does this at start; this command does it on demand.",
    )
    cleanup_parser.set_defaults(func=cleanup_command)


def config_from_args(args: argparse.Namespace) -> TestConfig:
    """The configuration the options (and -f file) describe; bad values raise UsageError."""
    overrides = {key: getattr(args, key) for key in CONFIG_OPTIONS if getattr(args, key, None) is not None}
    try:
        if args.file:
            return load_config(args.file, overrides)
        return make_config(overrides, "command line")
    except ConfigError as e:
        raise UsageError(str(e)) from None


def run_command(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    from floodmark.run.runner import run_test

    return run_test(config, args.store or DEFAULT_STORE).exit_code


def repro_command(args: argparse.Namespace) -> int:
    path = Path(args.run_dir).resolve()
    run = rundir.RunDir(path)
    if not run.config.is_file():
        raise UsageError(f"{args.run_dir}: not a run directory (no {rundir.CONFIG})")
    try:
        config = load_config(run.config)
        seed, schedule = load_schedule(run.schedule) if run.schedule.is_file() else (None, None)
    except (ConfigError, ScheduleError) as e:
        raise UsageError(str(e)) from None
    if config.seed is None:
        raise UsageError(f"{run.config}: no seed recorded; cannot reproduce")
    if seed is not None and seed != config.seed:
        raise UsageError(f"{run.schedule}: seed {seed} differs from test.yaml's seed {config.seed}")
    from floodmark.run.runner import run_test

    store = args.store or str(path.parent.parent)
    return run_test(config, store, schedule).exit_code


def images_command(args: argparse.Namespace) -> int:
    from floodmark.backends.images import main as build_images

    return build_images()


def cleanup_command(args: argparse.Namespace) -> int:
    removed = cleanup.remove_stale_runs(docker_too=True)
    for item in removed:
        print(f"removed {item}")
    print(f"{len(removed)} stale resource(s) removed")
    return 0
