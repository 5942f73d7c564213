"""The chaos regression suite: the gate a protocol change must pass (``make test-chaos``).

Two kinds of runs, each a real cluster under real faults:

* the ``default`` variant (every fix on) under each nemesis alone must be **valid**;
* variants that bring back a historical flaw, under faults that expose it, must be
  **invalid**: the harness must catch the flaw.

Runs are short (tens of seconds of faults) so the whole matrix fits in about 25 minutes on
Docker. The backend is Docker unless ``FLOODMARK_CHAOS_CLUSTER=local``. Each run's
directory stays under ``FLOODMARK_CHAOS_STORE`` (default: pytest's temporary directory) so
a failure can be read in its report and reproduced with ``floodmark repro``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from runner_fixtures import needs_docker, needs_local_cluster

from floodmark.contracts.node_event_kinds import BecameFollower, BecameLeader, Fenced
from floodmark.contracts.node_events import NodeEvent, read_events_dir
from floodmark.harness.config import NEMESIS_KINDS, TestConfig
from floodmark.harness.schedule import Fault, Schedule
from floodmark.run.runner import Runner

CLUSTER = os.environ.get("FLOODMARK_CHAOS_CLUSTER", "docker")
needs_cluster = needs_local_cluster() if CLUSTER == "local" else needs_docker()
pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.docker if CLUSTER == "docker" else pytest.mark.root, needs_cluster]

# Shared by every run: short, brisk, with quiet periods long enough for the cluster to heal.
BASE = TestConfig(
    cluster=CLUSTER, time_limit=30, rate=150, concurrency=8,
    fault_duration=(3.0, 10.0), quiet_period=(2.0, 5.0), recovery_time=30, drain_timeout=45,
)


def store(tmp_path: Path) -> Path:
    return Path(os.environ["FLOODMARK_CHAOS_STORE"]) if "FLOODMARK_CHAOS_STORE" in os.environ else tmp_path


def verdict(config: TestConfig, tmp_path: Path, schedule: Schedule | None = None) -> tuple[object, str]:
    outcome = Runner(config, store(tmp_path), schedule).run()
    assert outcome.error is None, f"the run itself failed: {outcome.error} ({outcome.run_dir.path})"
    results = json.loads(outcome.run_dir.results.read_text())
    summary = {name: (c["valid"], c.get("anomaly_counts")) for name, c in results["checkers"].items()}
    # CI keeps only its log, not the run directory: say what was found there.
    found = [f"{name}: {a.get('type')}: {a.get('explanation')}"
             for name, c in results["checkers"].items() for a in (c.get("anomalies") or [])[:3]]
    unjudged = [f"{name}: {c['stats'].get('unjudged_because')}" for name, c in results["checkers"].items()
                if c["valid"] == "unknown" and isinstance(c.get("stats"), dict)]
    return outcome.valid, "\n".join([f"{outcome.run_dir.path}: {summary}", *found, *unjudged])


@pytest.mark.parametrize("kind", NEMESIS_KINDS)
def test_default_variant_survives(kind: str, tmp_path: Path) -> None:
    valid, where = verdict(BASE.replace(nemesis=(kind,), seed=100 + NEMESIS_KINDS.index(kind)), tmp_path)
    assert valid is True, where


def test_default_variant_survives_every_fault_together(tmp_path: Path) -> None:
    valid, where = verdict(BASE.replace(nemesis=NEMESIS_KINDS, seed=7), tmp_path)
    assert valid is True, where


# An upgrade from legacy to KIP-343 by a double roll, with a leader isolated while the roll
# restarts brokers and a leader killed later: seed 21 draws exactly that within 45 seconds.
UPGRADE = BASE.replace(nemesis=("upgrade", "kill", "partition"), inter_broker_protocol="legacy",
                       seed=21, time_limit=45)


def test_default_variant_survives_an_upgrade_among_kills_and_partitions(tmp_path: Path) -> None:
    valid, where = verdict(UPGRADE, tmp_path)
    assert valid is True, where
    run_dir = Path(where.split(": ", 1)[0])  # verdict's account starts with the run directory
    executed = json.loads((run_dir / "schedule.json").read_text())["executed"]
    upgrade = next(e for e in executed if e["kind"] == "upgrade")
    steps = upgrade["stop_result"]["steps"]
    assert [s["registration"]["info_version"] if s.get("registration") else None for s in steps] == [4] * 3 + [5] * 3, where
    assert all(s["seen"] for s in steps), (where, steps)


# Truncating to the HW on becoming follower (before KIP-101) loses committed records when
# leadership moves right after a follower restarted: repeated kills of leaders and the
# controller, with short quiet periods, make that happen within a short run.
TRUNCATE_TO_HW = BASE.replace(
    variant="truncate-to-hw", nemesis=("kill",), seed=11, time_limit=40,
    fault_duration=(1.0, 3.0), quiet_period=(0.5, 2.0),
)

# Unclean election: a replica that fell out of the ISR while cut off is elected leader when
# the ISR's members are gone, losing what only they had. The scenario is written out rather
# than left to a random schedule, because it needs two faults in a precise order: broker X is
# isolated long enough to leave the ISRs (replica lag 10 s) while the other replica Y of its
# partitions goes on acknowledging alone (replication factor 2, min.insync.replicas 1); then
# Y, now the leader, is killed; then X's partition heals while Y is still down. With unclean
# election X becomes leader without Y's records; with the default variant the partitions wait
# offline for Y and lose nothing.
UNCLEAN_ELECTION = BASE.replace(
    variant="unclean-election", nemesis=("partition", "kill"), seed=21, time_limit=35,
    replication_factor=2, min_insync_replicas=1,
)
UNCLEAN_SCHEDULE = Schedule(
    (Fault(0, "partition", "isolate-one", start=3.0, duration=16.0, seed=1),
     Fault(1, "kill", "leader", start=17.0, duration=13.0, seed=2)),
    time_limit=35,
)

# acks=all with an ISR of the leader alone (Jepsen 2013): ZooKeeper and one broker on one side
# of a partition, the other two brokers on the other. Their sessions expire, the broker that
# still sees ZooKeeper leads every partition with an ISR of itself, and clients still reach it.
# The default refuses acks=all there (NOT_ENOUGH_REPLICAS); the variant acknowledges, which
# the white-box invariants see in the leader's own events even when nothing is lost.
ACKS_ALL_ISR_OF_ONE = BASE.replace(variant="acks-all-isr-of-one", nemesis=("partition",), seed=31, time_limit=35)
HALVES_SCHEDULE = Schedule((Fault(0, "partition", "halves", start=3.0, duration=20.0, seed=1),), time_limit=35)

# ISR admission below the leader's epoch start (KAFKA-7128): a follower admitted to a new
# leader's ISR once it reaches that leader's HW, which may still lag what the old epoch
# committed. One partition on three brokers. Follower A stops hearing the leader (its fetches
# arrive, their responses do not), so it lags inside the ISR and holds the HW at its log end X
# while the other follower B keeps copying what producers send. Just before the leader drops A
# (replica lag 10 s) B stops hearing the leader too, with the HW it knows still X; then the
# leader drops A, commits up to B's log end Y > X, and is killed before it could drop B. B
# leads with an HW of X, which stays there (its ISR is below min.insync.replicas), and A, at X,
# fetches from it. The variant admits A at once although it lacks X..Y, which the old epoch
# committed; the default waits until A reaches Y, B's epoch start. Roles are resolved when
# each fault starts, so whoever leads and whichever follower A is, the sequence is the same;
# legacy brokers keep heartbeat self-fencing out of it (a follower that hears no leader which
# is also the controller would fence itself 9 s in). The faults' margins, at least 2.5 s each
# (applying a fault on a loaded machine takes up to a second): the leader drops A 9.5-11 s
# after A's cut (at 12.5-14 s), after B's cut (10 s) and before the kill (17 s), which comes
# before the leader could drop B (19.5 s at the earliest).
ISR_ADMISSION_BELOW_EPOCH = BASE.replace(
    variant="isr-admission-below-epoch", nemesis=("partition", "kill"), seed=41, time_limit=35,
    topics=1, partitions=1, inter_broker_protocol="legacy",
)
ISR_ADMISSION_SCHEDULE = Schedule(
    (Fault(0, "partition", "follower-deaf", start=3.0, duration=16.0, seed=1),
     Fault(1, "partition", "followers-deaf", start=10.0, duration=9.0, seed=2),
     Fault(2, "kill", "leader", start=17.0, duration=13.0, seed=3)),
    time_limit=35,
)

# Unconditional ISR writes: a leader that never heard the controller move its partition on
# writes its ISR over the controller's newer leader epoch. Legacy brokers write the ISR to
# ZooKeeper themselves and neither heartbeat nor fence themselves while they keep their
# ZooKeeper session. The leader of a partition the controller does not lead is cut from the
# controller only; then every partition is reassigned (a rebalance: each keeps its leader in a
# new epoch). The cut-off leader misses the new epoch, its followers fetch in it and are
# refused, and 10 s later it drops them from the ISR: the variant's write lands, taking
# ZooKeeper back to the old epoch (the leader checker); the default's conditional write fails
# and the leader stands down until the cut heals and the controller's LeaderAndIsr arrives.
# Three partitions on three brokers, so that each broker leads one and the controller, wherever
# it is, leaves two partitions to aim at. The variant's stale write stays in ZooKeeper (an ISR
# below min.insync.replicas that nobody rewrites), so its cluster never looks recovered: the
# recovery wait and the drain are kept short enough for the default to need, not longer.
UNCONDITIONAL_ISR_WRITE = BASE.replace(
    variant="unconditional-isr-write", nemesis=("partition", "admin"), seed=51, time_limit=30,
    topics=1, partitions=3, inter_broker_protocol="legacy", recovery_time=15, drain_timeout=20,
)
CONTROLLER_CUT_SCHEDULE = Schedule(
    (Fault(0, "partition", "leader-controller-cut", start=3.0, duration=20.0, seed=1),
     Fault(1, "admin", "reassign-all", start=5.0, duration=3.0, seed=2)),
    time_limit=30,
)

CAUGHT = [(TRUNCATE_TO_HW, None), (UNCLEAN_ELECTION, UNCLEAN_SCHEDULE), (ACKS_ALL_ISR_OF_ONE, HALVES_SCHEDULE),
          (ISR_ADMISSION_BELOW_EPOCH, ISR_ADMISSION_SCHEDULE), (UNCONDITIONAL_ISR_WRITE, CONTROLLER_CUT_SCHEDULE)]


@pytest.mark.parametrize(("config", "schedule"), CAUGHT, ids=[
    "truncate-to-hw", "unclean-election", "acks-all-isr-of-one", "isr-admission-below-epoch", "unconditional-isr-write"])
def test_flawed_variants_are_caught(config: TestConfig, schedule: Schedule | None, tmp_path: Path) -> None:
    valid, where = verdict(config, tmp_path, schedule)
    assert valid is False, f"the {config.variant} flaw went unnoticed: {where}"


def test_the_unclean_scenario_is_harmless_with_the_default_variant(tmp_path: Path) -> None:
    valid, where = verdict(UNCLEAN_ELECTION.replace(variant="default"), tmp_path, UNCLEAN_SCHEDULE)
    assert valid is True, where


def test_the_isr_of_one_scenario_is_harmless_with_the_default_variant(tmp_path: Path) -> None:
    valid, where = verdict(ACKS_ALL_ISR_OF_ONE.replace(variant="default"), tmp_path, HALVES_SCHEDULE)
    assert valid is True, where


def run_events(where: str) -> list[NodeEvent]:
    """Every node's events of the run ``verdict`` described (its account starts with the run directory)."""
    return [e for events in read_events_dir(Path(where.split(": ", 1)[0]) / "events").values() for e in events]


def test_the_isr_admission_scenario_is_harmless_with_the_default_variant(tmp_path: Path) -> None:
    valid, where = verdict(ISR_ADMISSION_BELOW_EPOCH.replace(variant="default"), tmp_path, ISR_ADMISSION_SCHEDULE)
    assert valid is True, where
    # Not harmless by missing the point: the flaw's window opened. A new leader whose ISR was
    # below min.insync.replicas (so its HW stood still) had a follower, out of that ISR, whose
    # log ended at or above the leader's HW but below its epoch start (KAFKA-7128).
    events = run_events(where)
    leaders = {(e.body.topic, e.body.partition, e.body.leader_epoch): e.body for e in events
               if isinstance(e.body, BecameLeader) and len(e.body.isr) < ISR_ADMISSION_BELOW_EPOCH.min_insync_replicas}
    window = [(e.node, e.body.leader_epoch) for e in events if isinstance(e.body, BecameFollower)
              and (leader := leaders.get((e.body.topic, e.body.partition, e.body.leader_epoch))) is not None
              and leader.high_watermark <= e.body.log_end < leader.log_end]
    assert window, f"no follower fell between a new leader's HW and its epoch start: {where}"


def test_the_controller_cut_scenario_is_harmless_with_the_default_variant(tmp_path: Path) -> None:
    valid, where = verdict(UNCONDITIONAL_ISR_WRITE.replace(variant="default"), tmp_path, CONTROLLER_CUT_SCHEDULE)
    assert valid is True, where
    # The stale leader did write its ISR, and ZooKeeper's version check refused it.
    refused = [e for e in run_events(where)
               if isinstance(e.body, Fenced) and e.body.why.startswith("lost the conditional ISR write")]
    assert refused, f"no leader lost a conditional ISR write: the scenario did not happen: {where}"
