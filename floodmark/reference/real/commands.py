"""Command-line tools of the reference implementation, shaped like Kafka's ZooKeeper-era tools.

    floodmark broker --id N --zookeeper H:P --log-dirs A,B --listen H:P ...
    floodmark topics --zookeeper H:P --create --topic T --partitions N --replication-factor R
                     [--config min.insync.replicas=2] | --replica-assignment 1:2,2:3
    floodmark topics --zookeeper H:P --describe [--topic T] [--json]
    floodmark topics --zookeeper H:P --alter --topic T --partitions N
    floodmark topics --zookeeper H:P --delete --topic T
    floodmark topics --zookeeper H:P --list
    floodmark reassign-partitions --zookeeper H:P --execute|--verify --reassignment-json-file F
    floodmark reassign-partitions --zookeeper H:P --cancel [--reassignment-json-file F]
    floodmark preferred-replica-election --zookeeper H:P [--path-to-json-file F]
    floodmark log-dirs --bootstrap H:P[,H:P] --describe [--broker-list 1,2] [--json]

Admin tools write their requests to ZooKeeper, where the controller picks them up, exactly as
Kafka's did; only ``log-dirs`` talks to brokers. Exit codes: 0 done, 1 the cluster refused
(topic exists, reassignment already running), 2 the cluster could not be reached, 254 bad
arguments or an unreadable JSON file.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from floodmark.errors import EXIT_BAD_ARGUMENTS, EXIT_INVALID, EXIT_UNKNOWN, UsageError
from floodmark.reference.client.admin import (
    Admin,
    AdminError,
    TopicDescription,
    describe_log_dirs_at,
)
from floodmark.reference.protocol import zk_layout as zk
from floodmark.reference.protocol.messages import DescribeLogDirsResponse, TopicPartition
from floodmark.reference.runtime import CoordinationError, Runtime


def register(subparsers: Any) -> None:
    _register_broker(subparsers)

    topics = subparsers.add_parser("topics", help="create, describe, alter, delete and list topics",
                                   description="Manage topics (like kafka-topics.sh --zookeeper).")
    topics.add_argument("--zookeeper", required=True, metavar="HOST:PORT")
    action = topics.add_mutually_exclusive_group(required=True)
    for name in ("create", "describe", "alter", "delete", "list"):
        action.add_argument(f"--{name}", action="store_true")
    topics.add_argument("--topic")
    topics.add_argument("--partitions", type=int)
    topics.add_argument("--replication-factor", type=int)
    topics.add_argument("--replica-assignment", metavar="1:2,2:3",
                        help="explicit replicas, partitions separated by ',' and brokers by ':' "
                             "(instead of --partitions/--replication-factor)")
    topics.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    topics.add_argument("--json", action="store_true", help="describe as JSON")
    topics.set_defaults(func=_topics)

    reassign = subparsers.add_parser("reassign-partitions", help="move replicas between brokers",
                                     description="Execute, verify or cancel (KIP-236) a replica reassignment.")
    reassign.add_argument("--zookeeper", required=True, metavar="HOST:PORT")
    action = reassign.add_mutually_exclusive_group(required=True)
    for name in ("execute", "verify", "cancel"):
        action.add_argument(f"--{name}", action="store_true")
    reassign.add_argument("--reassignment-json-file", metavar="FILE",
                          help='{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}')
    reassign.set_defaults(func=_reassign)

    preferred = subparsers.add_parser("preferred-replica-election", help="move leadership back to preferred replicas")
    preferred.add_argument("--zookeeper", required=True, metavar="HOST:PORT")
    preferred.add_argument("--path-to-json-file", metavar="FILE",
                           help='{"partitions": [{"topic": "t", "partition": 0}]}; default: every partition')
    preferred.set_defaults(func=_preferred)

    log_dirs = subparsers.add_parser("log-dirs", help="describe brokers' log directories")
    log_dirs.add_argument("--bootstrap", "--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]")
    log_dirs.add_argument("--describe", action="store_true", required=True)
    log_dirs.add_argument("--broker-list", metavar="ID[,ID]")
    log_dirs.add_argument("--json", action="store_true")
    log_dirs.set_defaults(func=_log_dirs)


def _register_broker(subparsers: Any) -> None:
    broker = subparsers.add_parser("broker", help="run one broker of the reference implementation",
                                   description="Run a broker (every broker is a controller candidate); "
                                               "SIGTERM shuts it down cleanly.")
    if importlib.util.find_spec("floodmark.reference.real.process") is None:
        broker.set_defaults(func=lambda args: _unavailable("floodmark.reference.real.process is not installed"))
        return
    process: Any = importlib.import_module("floodmark.reference.real.process")
    process.add_broker_arguments(broker)
    broker.set_defaults(func=process.main)


def _unavailable(why: str) -> int:
    print(f"floodmark broker: {why}", file=sys.stderr)
    return EXIT_BAD_ARGUMENTS


# ----------------------------------------------------------------------------- running


def _run_admin(zookeeper: str, work: Callable[[Admin], Awaitable[int]]) -> int:
    """Open a ZooKeeper session, run ``work``, close everything; map errors to exit codes."""
    from floodmark.reference.real.runtime import client_runtime

    async def main() -> int:
        runtime = client_runtime("admin", 0, zookeeper_hosts=zookeeper)
        try:
            try:
                admin = await Admin.connect(cast(Runtime, runtime), session_timeout=10.0)
            except (CoordinationError, OSError, TimeoutError, RuntimeError) as e:
                print(f"error: cannot reach ZooKeeper at {zookeeper}: {e}", file=sys.stderr)
                return EXIT_UNKNOWN
            async with admin:
                return await work(admin)
        finally:
            await runtime.close()

    try:
        return asyncio.run(main())
    except AdminError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID
    except zk.LayoutError as e:
        raise UsageError(str(e)) from None
    except CoordinationError as e:
        print(f"error: ZooKeeper: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_UNKNOWN


def _parse_config(items: list[str]) -> dict[str, str]:
    config = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--config expects KEY=VALUE, got {item!r}")
        config[key] = value
    return config


def _parse_assignment(text: str) -> dict[int, tuple[int, ...]]:
    result: dict[int, tuple[int, ...]] = {}
    for partition, part in enumerate(text.split(",")):
        try:
            replicas = tuple(int(b) for b in part.split(":"))
        except ValueError:
            raise UsageError(f"--replica-assignment: partition {partition} is {part!r}, "
                             "expected broker ids separated by ':'") from None
        if len(set(replicas)) != len(replicas):
            raise UsageError(f"--replica-assignment: partition {partition} lists a broker twice")
        result[partition] = replicas
    if len({len(r) for r in result.values()}) != 1:
        raise UsageError("--replica-assignment: every partition needs the same number of replicas")
    return result


def _read_json_file(path: str | None, what: str) -> bytes:
    if path is None:
        raise UsageError(f"{what} needs --reassignment-json-file")
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


# ----------------------------------------------------------------------------- topics


def _topics(args: argparse.Namespace) -> int:
    config = _parse_config(args.config)
    if (args.create or args.alter or args.delete) and not args.topic:
        raise UsageError("--topic is required with --create, --alter and --delete")
    explicit = _parse_assignment(args.replica_assignment) if args.replica_assignment else None
    if args.create and explicit is None and (args.partitions is None or args.replication_factor is None):
        raise UsageError("--create needs --partitions and --replication-factor, or --replica-assignment")
    if args.alter and args.partitions is None:
        raise UsageError("--alter needs --partitions")

    async def work(admin: Admin) -> int:
        if args.create:
            if explicit is not None:
                rf = len(explicit[0])
                await admin.create_topic(args.topic, len(explicit), rf, config, assignment=explicit)
            else:
                await admin.create_topic(args.topic, args.partitions, args.replication_factor, config)
            print(f'Created topic "{args.topic}".')
        elif args.alter:
            await admin.alter_partitions(args.topic, args.partitions)
            print(f'Topic "{args.topic}" now has {args.partitions} partitions.')
        elif args.delete:
            await admin.delete_topic(args.topic)
            print(f'Topic "{args.topic}" is marked for deletion.')
        elif args.list:
            for topic in await admin.list_topics():
                print(topic)
        else:
            described = await admin.describe_topics([args.topic] if args.topic else None)
            print(json.dumps([_topic_json(t) for t in described], indent=2) if args.json
                  else "\n".join(_topic_text(t) for t in described))
        return 0

    return _run_admin(args.zookeeper, work)


def _topic_json(t: TopicDescription) -> dict[str, Any]:
    return {"topic": t.topic, "config": dict(t.config), "marked_for_deletion": t.marked_for_deletion,
            "partitions": [{"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                            "replicas": list(p.replicas), "isr": list(p.isr),
                            "offline_replicas": list(p.offline_replicas)} for p in t.partitions]}


def _topic_text(t: TopicDescription) -> str:
    config = ",".join(f"{k}={v}" for k, v in sorted(t.config.items()))
    lines = [f"Topic: {t.topic}\tPartitionCount: {len(t.partitions)}\tConfigs: {config}"
             + ("\tMarkedForDeletion: true" if t.marked_for_deletion else "")]
    for p in t.partitions:
        lines.append(f"\tTopic: {t.topic}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}"
                     f"\tLeaderEpoch: {p.leader_epoch}\tReplicas: {zk.replica_list_str(p.replicas)}"
                     f"\tIsr: {zk.replica_list_str(p.isr)}"
                     f"\tOffline: {zk.replica_list_str(p.offline_replicas)}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- reassignment


def _reassign(args: argparse.Namespace) -> int:
    entries = []
    if args.reassignment_json_file or not args.cancel:
        data = _read_json_file(args.reassignment_json_file, "--execute/--verify")
        try:
            entries = zk.decode_reassignments(data, path=args.reassignment_json_file)
        except zk.LayoutError as e:
            raise UsageError(str(e)) from None

    async def work(admin: Admin) -> int:
        if args.execute:
            started = await admin.reassign_execute(entries)
            print("Current partition replica assignment (save it to roll back):")
            print(json.dumps({"version": 1, "partitions": [
                {"topic": e.topic, "partition": e.partition, "replicas": list(e.original_replicas)}
                for e in started]}))
            print(f"Successfully started reassignment of {len(started)} partitions.")
            return 0
        if args.cancel:
            await admin.reassign_cancel([e.tp for e in entries])
            print("Successfully requested cancellation of the reassignment.")
            return 0
        status = await admin.reassign_verify(entries)
        for tp, state in sorted(status.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            print(f"Reassignment of partition {tp.topic}-{tp.partition} is {state}.")
        return 0 if all(s == "complete" for s in status.values()) else EXIT_INVALID

    return _run_admin(args.zookeeper, work)


def _preferred(args: argparse.Namespace) -> int:
    partitions: list[TopicPartition] = []
    if args.path_to_json_file:
        try:
            partitions = zk.decode_partition_list(args.path_to_json_file, Path(args.path_to_json_file).read_bytes())
        except OSError as e:
            raise UsageError(f"cannot read {args.path_to_json_file}: {e.strerror}") from None
        except (zk.LayoutError, KeyError) as e:
            raise UsageError(str(e)) from None

    async def work(admin: Admin) -> int:
        await admin.preferred_replica_election(partitions)
        print("Successfully started preferred replica election"
              + (f" for {len(partitions)} partitions." if partitions else " for all partitions."))
        return 0

    return _run_admin(args.zookeeper, work)


# ----------------------------------------------------------------------------- log dirs


def _log_dirs(args: argparse.Namespace) -> int:
    from floodmark.reference.real.runtime import client_runtime

    bootstrap = [a for a in args.bootstrap.split(",") if a]
    brokers: list[int] | None = None
    if args.broker_list:
        try:
            brokers = [int(b) for b in args.broker_list.split(",") if b]
        except ValueError:
            raise UsageError(f"--broker-list expects comma-separated ids, got {args.broker_list!r}") from None

    async def main() -> dict[int, DescribeLogDirsResponse | str]:
        runtime = client_runtime("admin", 0)
        try:
            return await describe_log_dirs_at(cast(Runtime, runtime), bootstrap, brokers)
        finally:
            await runtime.close()

    try:
        result = asyncio.run(main())
    except AdminError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_UNKNOWN
    out: list[dict[str, Any]] = []
    for broker, answer in sorted(result.items()):
        if isinstance(answer, str):
            out.append({"broker": broker, "error": answer, "logDirs": []})
            continue
        out.append({"broker": broker, "error": None, "logDirs": [
            {"logDir": d.path, "error": d.error, "partitions": [
                {"partition": f"{r.topic}-{r.partition}", "size": r.size, "logEnd": r.log_end} for r in d.replicas]}
            for d in answer.dirs]})
    if args.json:
        print(json.dumps({"version": 1, "brokers": out}, indent=2))
    else:
        for b in out:
            print(f"Broker {b['broker']}" + (f": {b['error']}" if b["error"] else ""))
            for d in b["logDirs"]:
                print(f"\t{d['logDir']}\t{'error: ' + d['error'] if d['error'] else 'online'}\t"
                      f"{len(d['partitions'])} partitions")
    return 0
