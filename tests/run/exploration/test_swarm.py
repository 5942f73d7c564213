"""Swarm testing: the test each explored seed draws, and the workload an exploration picks."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from floodmark.cli import main
from floodmark.harness.config import ALL_KINDS
from floodmark.run import explore_store, swarm
from floodmark.run.explore import run_seed
from floodmark.run.swarm import exploration_key, swarm_config


def test_each_seed_draws_its_own_test_inside_the_durability_contract() -> None:
    shapes = {swarm_config(seed) for seed in range(40)}
    assert len(shapes) == 40
    for config in shapes:
        assert config.cluster == "sim" and config.acks == "all" and config.min_insync_replicas >= 2
        assert 3 <= config.nodes <= 5 and config.replication_factor <= config.nodes
        assert config.nemesis and set(config.nemesis) <= set(ALL_KINDS)
    assert swarm_config(7) == swarm_config(7)
    assert {len(c.nemesis) for c in shapes} > {1}  # swarm: different subsets of kinds
    assert swarm_config(7, "truncate-to-hw").variant == "truncate-to-hw"


def test_some_seeds_pause_brokers_under_long_sessions_without_restarting_them() -> None:
    configs = [swarm_config(seed) for seed in range(200)]
    long = [c for c in configs if c.zk_session_timeout > 10.0]
    assert 0.15 < len(long) / len(configs) < 0.5
    for config in long:
        assert config.zk_session_timeout in (18.0, 30.0) and "pause" in config.nemesis
        assert not {"kill", "power", "disk"} & set(config.nemesis)
    assert all(c.zk_session_timeout in (4.0, 6.0, 8.0) for c in configs if c not in long)


def test_later_kinds_and_the_protocol_come_from_their_own_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """Admin faults, stalls and the inter-broker protocol joined the swarm after seeds were
    pinned in the corpus: a seed's other draws are what they were without them."""
    monkeypatch.setattr(swarm, "FOCUS_SHARE", 0.0)  # (groups alone came later still: see test_failover_focus)
    configs = [swarm_config(seed) for seed in range(300)]
    protocols = [c.inter_broker_protocol for c in configs]
    assert set(protocols) == {"heartbeats", "kip-343", "truncate-on-fetch", "legacy"}
    assert 0.35 < protocols.count("heartbeats") / len(configs) < 0.65
    # truncate-on-fetch came last: it takes about half the seeds that drew kip-343 and no other.
    newest = protocols.count("truncate-on-fetch") / (protocols.count("truncate-on-fetch") + protocols.count("kip-343"))
    assert 0.35 < newest < 0.65
    assert 0.2 < (protocols.count("kip-343") + protocols.count("truncate-on-fetch")) / len(configs) < 0.4
    for kind, share in (("admin", 0.5), ("stall", 0.3)):
        drawn = sum(kind in c.nemesis for c in configs) / len(configs)
        assert abs(drawn - share) < 0.1, (kind, drawn)
    # Seed 1's first draws, as pinned before those joined: ... clock and kill.
    assert {"clock", "kill"} <= set(swarm_config(1).nemesis) <= {"clock", "kill", "admin", "stall", "failover"}


# What seeds 1..200 drew before the linger joined the swarm: a SHA-256 of these fields of
# each seed's test, computed with the code before it (7490fcd).
SWARM_BEFORE_LINGER = "f7d4306c8d95cfbbfabf7dbd3e72944560c88da74e48af223f83afd95838c9b6"
DRAWN_BEFORE_LINGER = ("nodes", "replication_factor", "min_insync_replicas", "topics", "partitions", "nemesis",
                       "fault_duration", "quiet_period", "time_limit", "rate", "concurrency", "zk_session_timeout",
                       "inter_broker_protocol", "acks", "seed", "name")


def test_the_linger_comes_from_its_own_stream_and_every_other_draw_is_what_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(swarm, "FOCUS_SHARE", 0.0)  # (groups alone came later still: see test_failover_focus)
    configs = [swarm_config(seed) for seed in range(1, 201)]
    lingers = [c.linger for c in configs]
    assert set(lingers) == {0.0, *swarm.LINGERS} == {0.0, 0.005, 0.02}
    assert 0.4 < lingers.count(0.0) / len(configs) < 0.6
    rows = [[getattr(c, f) for f in DRAWN_BEFORE_LINGER] for c in configs]
    assert hashlib.sha256(json.dumps(rows).encode()).hexdigest() == SWARM_BEFORE_LINGER
    # The pinned corpus seeds that now linger (see tests/chaos/corpus.json): still caught.
    assert [seed for seed in (1, 3, 14, 24, 63, 57, 48, 21, 22, 83) if swarm_config(seed).linger] == [3, 24, 63, 57, 48, 22, 83]


def test_the_workload_changes_no_draw_of_the_seed() -> None:
    # A seed that fails under one workload can be tried under the other as it is.
    for seed in range(1, 60):
        queue, log_lin = swarm_config(seed), swarm_config(seed, workload="log-lin")
        assert (queue.workload, log_lin.workload) == ("queue", "log-lin")
        assert dataclasses.replace(log_lin, workload="queue", name=queue.name) == queue
    assert swarm_config(3, "truncate-to-hw", workload="log-lin").name == "explore-truncate-to-hw-log-lin"
    with pytest.raises(ValueError, match="unknown workload 'bank'"):
        swarm_config(3, workload="bank")


def test_each_variant_and_workload_is_its_own_exploration_in_the_store() -> None:
    # The queue workload keeps the name every exploration had before there was a choice.
    assert exploration_key("default") == exploration_key("default", "queue") == "default"
    keys = {exploration_key(v, w) for v in ("default", "truncate-to-hw") for w in swarm.SWARM_WORKLOADS}
    assert len(keys) == 4
    assert explore_store.test_folder("s", exploration_key("default", "log-lin")).name == swarm_config(1, workload="log-lin").name


def test_a_log_lin_seed_is_judged_for_linearizability(tmp_path: Path) -> None:
    found = run_seed(2, "default", str(tmp_path / "store"), keep_all=True, workload="log-lin")
    assert found.valid is True and found.run_dir is not None
    results = json.loads((Path(found.run_dir) / "results.json").read_text())
    assert "linearizable" in results["checkers"] and "queue" not in results["checkers"]
    assert Path(found.run_dir).parent.name == "explore-default-log-lin"


def test_explore_log_lin_catches_a_variant_and_keeps_its_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    code = main(["explore", "--workload", "log-lin", "--variant", "truncate-to-hw", "--runs", "1", "--seed", "1",
                 "--jobs", "1", "--no-shrink", "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "variant truncate-to-hw, log-lin workload" in err and "seed 1 INVALID" in err
    kept = list((store / "explore-truncate-to-hw-log-lin").iterdir())
    assert kept and all((run / "results.json").exists() for run in kept)


def test_explore_refuses_a_workload_it_cannot_explore(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["explore", "--workload", "bank", "--runs", "1"])
    assert exit_.value.code == 254
    assert "--workload" in capsys.readouterr().err


def test_failover_focus_runs_groups_alone_for_a_share_of_their_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A share of the seeds that draw failover groups run them alone over the longest time
    limit; every other draw of every seed is what it was without that."""
    seeds = range(1, 401)
    focused = [swarm_config(seed) for seed in seeds]
    share, limit = swarm.FOCUS_SHARE, swarm.FOCUS_TIME_LIMIT
    monkeypatch.setattr(swarm, "FOCUS_SHARE", 0.0)
    plain = [swarm_config(seed) for seed in seeds]
    grouped = 0
    alone = 0
    for now, before in zip(focused, plain, strict=True):
        grouped += "failover" in before.nemesis
        if now == before:
            continue
        alone += 1
        assert "failover" in before.nemesis  # only seeds that drew groups
        assert now.nemesis == ("failover",) and now.time_limit == limit
        assert dataclasses.replace(now, nemesis=before.nemesis, time_limit=before.time_limit) == before
    assert abs(alone / grouped - share) < 0.1, (alone, grouped)
