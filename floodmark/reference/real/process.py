"""A broker process: ``floodmark broker --id N --zookeeper HOST:PORT --log-dirs A,B --listen ...``.

This is where the reference meets the operating system. It reads the command line, builds a
:class:`BrokerConfig`, a :class:`RealRuntime` (TCP, kazoo, files, node events) and a
:class:`Broker`, starts it (registration in ZooKeeper, serving, controller candidacy) and
runs until SIGTERM or SIGINT. Then it shuts down *cleanly*: a controlled shutdown moves
leadership away first, logs are flushed and the HW checkpointed, the ZooKeeper session is
closed so its ephemerals vanish at once. ``kill -9`` is the unclean path, and the one the
chaos tests use to simulate crashes.

The process's cyclic garbage collector is told to run less often (:func:`tune_collector`): a
broker holding thousands of replicas has hundreds of thousands of long-lived objects, and
with Python's default thresholds the burst of allocations a failover brings (decoding a
10,000-partition LeaderAndIsr, then acting on it) set off a full collection about every
second, 0.2-0.3 s each, on the path to leading. Reference counting frees nearly everything
a broker drops anyway; only cycles wait for the collector.

Exit codes: 0 after a clean shutdown, 1 if the broker could not start or failed, 254 for
bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from floodmark.contracts.run_ids import run_id_problem
from floodmark.reference.broker.broker import START_GRACE, Broker
from floodmark.reference.broker.config import BrokerConfig
from floodmark.reference.protocol.variants import VARIANTS, get_variant
from floodmark.reference.real.files import FileStorage
from floodmark.reference.real.runtime import RealRuntime
from floodmark.reference.real.transport import split_address

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_ARGUMENTS = 254
SHUTDOWN_TIMEOUT = 60.0

log = logging.getLogger("floodmark.broker")

# Command-line tunables: option -> (BrokerConfig field, type, help).
TUNABLES: dict[str, tuple[str, type, str]] = {
    "--zk-session-timeout": ("zk_session_timeout", float, "ZooKeeper session timeout, seconds"),
    "--startup-timeout": ("startup_timeout", float,
                          "seconds start-up keeps trying to reach ZooKeeper before it gives up (exit 1)"),
    "--min-insync-replicas": ("min_insync_replicas", int, "default min.insync.replicas"),
    "--replica-lag-time-max": ("replica_lag_time_max", float, "seconds a follower may lag before leaving the ISR"),
    "--heartbeat-interval": ("heartbeat_interval", float, "seconds between heartbeats to the controller"),
    "--broker-fence-timeout": ("broker_fence_timeout", float, "seconds without controller contact before self-fencing"),
    "--request-timeout": ("request_timeout", float, "seconds before a request to another broker times out"),
    "--segment-records": ("segment_records", int, "records per log segment"),
    "--log-flush-interval": ("log_flush_interval", float, "seconds between log fsyncs (default: on HW checkpoint)"),
    "--inter-broker-protocol": ("inter_broker_protocol", str,
                                "inter-broker protocol version: legacy, heartbeats (default), kip-343 or truncate-on-fetch"),
}


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id", type=int, required=True, dest="broker_id", metavar="N", help="broker id")
    parser.add_argument("--zookeeper", required=True, metavar="HOST:PORT[,HOST:PORT]",
                        help="ZooKeeper connection string")
    parser.add_argument("--log-dirs", required=True, metavar="DIR[,DIR]",
                        help="comma-separated log directories (JBOD)")
    parser.add_argument("--listen", required=True, metavar="HOST:PORT", help="address to serve on")
    parser.add_argument("--advertise", metavar="HOST:PORT",
                        help="address other nodes use to reach this broker (default: --listen)")
    parser.add_argument("--events", metavar="FILE", help="append node events (JSONL) to this file")
    parser.add_argument("--variant", default="default", choices=sorted(VARIANTS),
                        help="protocol variant (default: every fix on)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the broker's random generator")
    parser.add_argument("--run-id", metavar="ID",
                        help="the chaos run this broker is started for, named in its started events")
    parser.add_argument("--node-name", metavar="NAME", help="node name for events and logs (default: n<id>)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    for option, (_, kind, help_text) in TUNABLES.items():
        parser.add_argument(option, type=kind, help=help_text)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    """The broker's configuration from parsed arguments; ValueError says what is wrong."""
    log_dirs = tuple(d.strip() for d in args.log_dirs.split(",") if d.strip())
    if not log_dirs:
        raise ValueError("--log-dirs: name at least one directory")
    split_address(args.listen)
    if args.advertise:
        split_address(args.advertise)
    overrides: dict[str, Any] = {}
    for option, (field_name, _, _) in TUNABLES.items():
        value = getattr(args, option.lstrip("-").replace("-", "_"), None)
        if value is not None:
            overrides[field_name] = value
    bad_run_id = None if args.run_id is None else run_id_problem(args.run_id)
    if bad_run_id is not None:
        raise ValueError(f"--run-id: {bad_run_id}")
    return BrokerConfig(broker_id=args.broker_id, log_dirs=log_dirs, variant=get_variant(args.variant),
                        run_id=args.run_id, **overrides)


# Young collections every 100,000 allocations instead of 700 (a full one is considered every
# 20 young collections x 10, and runs only once the objects that survived since the last grew
# by a quarter, as by default).
COLLECTOR_THRESHOLDS = (100_000, 20, 10)


def tune_collector() -> None:
    """Fewer garbage collections in this broker process (see the module docstring)."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


def main(args: argparse.Namespace | Sequence[str] | None = None) -> int:
    """Run a broker until SIGTERM/SIGINT. Accepts parsed arguments or a command line."""
    if not isinstance(args, argparse.Namespace):
        parser = argparse.ArgumentParser(prog="floodmark broker", description=__doc__.splitlines()[0])
        add_broker_arguments(parser)
        try:
            args = parser.parse_args(args)
        except SystemExit as e:
            return EXIT_BAD_ARGUMENTS if e.code else EXIT_OK
    try:
        config = build_config(args)
    except ValueError as e:
        print(f"floodmark broker: error: {e}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    node = args.node_name or f"n{config.broker_id}"
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format=f"%(asctime)s {node} %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    tune_collector()
    try:
        return asyncio.run(run_broker(config, args, node))
    except KeyboardInterrupt:
        return EXIT_FAILED


async def run_broker(config: BrokerConfig, args: argparse.Namespace, node: str) -> int:
    runtime = RealRuntime(node=node, advertised_address=args.advertise or args.listen, listen=args.listen,
                          zookeeper_hosts=args.zookeeper, events_path=args.events,
                          storage=FileStorage(), seed=args.seed)
    broker = Broker(runtime, config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _request_stop, stop, sig)
    status = EXIT_OK
    try:
        starting = asyncio.ensure_future(broker.start())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            # Told to stop while starting: let the start finish, briefly, so that the broker
            # can shut down cleanly; give up on a start that is stuck (ZooKeeper unreachable).
            await asyncio.wait([starting], timeout=START_GRACE)
            if not starting.done() or starting.exception() is not None:
                log.info("broker %d stopped before it finished starting", config.broker_id)
                starting.cancel()
                await asyncio.gather(starting, return_exceptions=True)
                return EXIT_OK
        elif starting.exception() is not None:
            e = starting.exception()
            log.error("broker %d could not start", config.broker_id, exc_info=e)
            print(f"floodmark broker: could not start: {type(e).__name__}: {e}", file=sys.stderr)
            stopping.cancel()
            return EXIT_FAILED
        log.info("broker %d serving on %s (variant %s)", config.broker_id, args.listen, config.variant.name)
        await stopping  # (already done if the stop came during the start)
        log.info("broker %d shutting down", config.broker_id)
        try:
            await asyncio.wait_for(broker.stop(), SHUTDOWN_TIMEOUT)
        except Exception:
            log.exception("broker %d did not shut down cleanly", config.broker_id)
            status = EXIT_FAILED
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await runtime.close()
    return status


def _request_stop(stop: asyncio.Event, sig: signal.Signals) -> None:
    if stop.is_set():
        log.warning("%s received again; already shutting down", sig.name)
    stop.set()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
