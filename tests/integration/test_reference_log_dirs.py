"""KIP-112 with real processes: chmod 000 one log directory of a broker without DAC override.

The broker runs under ``setpriv`` without ``dac_override``/``dac_read_search`` so the
permission fault really denies it (root ignores chmod otherwise). It notices the fault at
its next open in that directory (the HW checkpoint is rewritten every second), takes the
directory offline and notifies the controller; the replicas on it go offline and their
leaderships move, while the replicas on its other directory keep serving.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from reference_processes import ProcessCluster, no_dac_override_reason, run_client, skip_reason

from floodmark.reference.client.producer import Producer

REASON = skip_reason() or no_dac_override_reason()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(REASON is not None, reason=str(REASON))]


def replica_dirs(cluster: ProcessCluster, broker: int) -> dict[str, list[int]]:
    """Which partitions of topic t each of the broker's log directories holds."""
    result: dict[str, list[int]] = {}
    for d in cluster.log_dirs(broker):
        result[str(d)] = sorted(int(e.name.rsplit("-", 1)[1]) for e in d.iterdir()
                                if e.is_dir() and e.name.startswith("t-"))
    return result


@pytest.mark.timeout(300)
def test_failed_log_dir_takes_only_its_replicas_offline(tmp_path: Path) -> None:
    with ProcessCluster(tmp_path, 3, no_dac_override=True) as cluster:
        victim = next(b for b in (1, 2, 3) if b != cluster.controller())
        # Every partition has a replica on the victim, which leads half of them.
        cluster.admin_call(lambda a: a.create_topic("t", 6, 3, {"min.insync.replicas": "2"}))
        cluster.wait_for(lambda: all((s := cluster.state("t", p)) is not None and len(s.isr) == 3 for p in range(6)),
                         60.0, "topic t in sync")
        dirs = replica_dirs(cluster, victim)
        bad_dir, good_dir = sorted(dirs, key=lambda d: -len(dirs[d]))
        lost, kept = dirs[bad_dir], dirs[good_dir]
        assert lost and kept, dirs
        os.chmod(bad_dir, 0)
        try:
            cluster.wait_for(lambda: all(victim not in cluster.state("t", p).isr for p in lost),  # type: ignore[union-attr]
                             60.0, f"replicas on {bad_dir} out of the ISR")
            for p in lost:
                state = cluster.state("t", p)
                assert state is not None and state.leader not in (victim, -1)
            for p in kept:
                state = cluster.state("t", p)
                assert state is not None and victim in state.isr
            (described,) = cluster.admin_call(lambda a: a.describe_topics(["t"]))
            offline = {p.partition for p in described.partitions if victim in p.offline_replicas}
            assert offline == set(lost)
            log_dirs = cluster.admin_call(lambda a: a.describe_log_dirs([victim]))[victim]
            errors = {d.path: d.error for d in log_dirs.dirs}  # type: ignore[union-attr]
            assert errors[bad_dir] is not None and errors[good_dir] is None
            cli = subprocess.run([sys.executable, "-m", "floodmark", "log-dirs", "--bootstrap",
                                  ",".join(cluster.bootstrap()), "--describe", "--broker-list", str(victim), "--json"],
                                 capture_output=True, text=True, timeout=60)
            assert cli.returncode == 0, cli.stderr
            (shown,) = json.loads(cli.stdout)["brokers"]
            assert {d["logDir"]: d["error"] is not None for d in shown["logDirs"]} == {bad_dir: True, good_dir: False}

            async def produce(runtime: Any) -> list[str]:
                producer = Producer(runtime, cluster.bootstrap())
                return [(await producer.send("t", p, f"after-{p}", timeout=20.0)).status for p in range(6)]
            assert run_client(produce) == ["ok"] * 6  # every partition still writable
            events = [e for e in cluster.events(victim) if e["kind"] == "log_dir_offline"]
            assert events and events[0]["dir"] == bad_dir
        finally:
            os.chmod(bad_dir, 0o755)
