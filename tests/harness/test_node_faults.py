"""Applying plans to real nodes: iptables, signals, libfaketime and chmod, each undone on heal.

The unit tests drive the applier over fake nodes that record the commands run on them; the
integration tests apply planned faults to real clusters (network namespaces and containers)
whose brokers are stand-ins, and check from the outside that each fault did what it says.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from cluster_fixtures import (
    BACKENDS,
    FakeCluster,
    ask,
    can_connect,
    standin_cluster,
    ticks,
    view_of,
)

from floodmark.backends.node_faults import NodeFaultApplier, floodmark_rules, refuses
from floodmark.backends.readiness import wait_for_port
from floodmark.harness.cluster import BROKER_USER, ExecResult
from floodmark.harness.faults import (
    ClockSkew,
    ClockStrobe,
    DiskFault,
    FaultPlan,
    NetworkCut,
    ProcessCrash,
    ProcessPause,
)
from floodmark.nemesis.compose import Composite
from floodmark.nemesis.partition import grudge_for


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def planned(cluster: Any, kind: str, shape: str, seed: int, duration: float = 5.0,
            controller: int | None = None) -> tuple[FaultPlan, dict[str, Any]]:
    return Composite([kind]).plan(kind, random.Random(seed), view_of(cluster, controller), shape, duration)


# ---------------------------------------------------------------------- over fake nodes


def test_a_cut_adds_one_rule_per_grudging_node_and_heal_deletes_exactly_those() -> None:
    cluster = FakeCluster(5)
    applier = NodeFaultApplier(cluster)
    plan, _ = planned(cluster, "partition", "halves", 42)
    assert isinstance(plan, NetworkCut)
    evidence = run(applier.apply(plan))
    assert set(evidence["rules"]) == {node for node, _ in plan.drops}
    healed = run(applier.heal(plan))
    assert healed["removed"] == evidence["rules"]
    for name, rule in evidence["rules"].items():
        commands = [argv for argv, _ in cluster.node(name).commands if argv[0] == "iptables"]
        assert commands == [["iptables", "-w", "-A", *rule], ["iptables", "-w", "-D", *rule]]
    # The fake nodes answer every probe alike, so the cut is not proven: said, not assumed.
    assert evidence["probe"]["verified"] is False and "cut" in evidence["probe"]


def test_two_identical_cuts_in_force_at_once_each_remove_their_own_rule() -> None:
    cluster = FakeCluster(5)
    applier = NodeFaultApplier(cluster)
    plan = NetworkCut((("n1", ("n2",)),))
    first, second = run(applier.apply(plan)), run(applier.apply(plan))
    assert first["rules"] == second["rules"]  # the same rule, added twice to n1's chain
    assert run(applier.heal(plan))["removed"] == first["rules"]
    assert run(applier.heal(plan))["removed"] == second["rules"]  # not left until heal-all
    assert run(applier.heal(plan))["removed"] == {}
    rule = first["rules"]["n1"]
    iptables = [argv[2] for argv, _ in cluster.node("n1").commands if argv[0] == "iptables"]
    assert iptables == ["-A", "-A", "-D", "-D"] and all(
        argv[3:] == rule for argv, _ in cluster.node("n1").commands if argv[0] == "iptables")


def test_a_cut_proves_a_kept_path_that_no_other_cut_in_force_severs() -> None:
    cluster = FakeCluster(5)
    applier = NodeFaultApplier(cluster)
    names = [node.name for node in cluster.nodes]
    other = NetworkCut(tuple((name, (names[0],)) for name in names[1:]))  # everyone drops the first node
    run(applier.apply(other))
    evidence = run(applier.apply(NetworkCut(((names[-1], (names[-2],)),))))
    kept = evidence["probe"]["kept"]
    # Without the other cut, the first node would have been probed: its paths are severed.
    assert names[0] not in (kept["from"], kept["to"]), kept
    assert {kept["from"], kept["to"]} != {names[-1], names[-2]}, kept


def test_kill_and_restart_signal_the_planned_node() -> None:
    cluster = FakeCluster()
    applier = NodeFaultApplier(cluster)
    evidence = run(applier.apply(ProcessCrash("n2", "kill")))
    assert evidence == {"pid": 100, "signal": "SIGKILL", "running": False}
    assert run(applier.heal(ProcessCrash("n2", "kill"))) == {"restarted": {"n2": 100}}
    assert cluster.node("n2").signals == ["KILL", "START"]
    assert run(applier.apply(ProcessCrash("n1", "terminate")))["signal"] == "SIGTERM"


def test_bumps_write_the_planned_offsets_and_heal_resets_them() -> None:
    cluster = FakeCluster(5)
    applier = NodeFaultApplier(cluster, clock_watch=0.3)
    plan = ClockSkew((("n1", -12.5, 1.0), ("n3", 40.0, 1.0)))
    assert run(applier.apply(plan)) == {"written": {"n1": "-12.500 x1", "n3": "+40.000 x1"}}
    assert cluster.node("n1").files["/etc/floodmark/faketime"] == "-12.500 x1\n"
    assert not cluster.node("n2").files
    healed = run(applier.heal(plan))
    assert healed["reset"] == {"n1": "+0.000 x1", "n3": "+0.000 x1"}
    # These nodes write no events, so nothing shows the clock moved.
    assert {name: seen["verified"] for name, seen in healed["clock_seen"].items()} == {"n1": False, "n3": False}
    assert healed["clock_seen"]["n1"]["expected"] == -12.5


def test_chmod_fault_records_the_mode_it_restores() -> None:
    cluster = FakeCluster()
    for node in cluster.brokers:
        node.exec_result = ExecResult(0, "755\n", "")
    applier = NodeFaultApplier(cluster)
    plan = DiskFault("n1", "/data/logdir1", "chmod")
    assert run(applier.apply(plan)) == {"previous_mode": "755"}
    argv, user = cluster.node("n1").commands[-1]
    assert user == BROKER_USER and "chmod 000" in argv[2] and argv[-1] == "/data/logdir1"
    healed = run(applier.heal(plan))
    assert healed["restored_mode"] == "755" and healed["restarted"]["node"] == "n1"
    chmod = next(argv for argv, _ in reversed(cluster.node("n1").commands) if "chmod" in argv[2])
    assert chmod[-2:] == ["/data/logdir1", "755"]


def test_a_directory_replaced_already_is_left_to_the_fault_that_replaced_it(tmp_path: Path) -> None:
    """Two replace-with-file faults on one log directory: the second's mv moved the file in
    the directory's place into the displaced directory, and healing brought the log
    directory back holding a stray file named after it (the broker's own, to it)."""
    import subprocess

    cluster = FakeCluster()
    node = cluster.node("n1")

    def exec_here(argv, user=None, timeout=30.0):  # type: ignore[no-untyped-def]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return ExecResult(done.returncode, done.stdout, done.stderr)

    node.exec = exec_here  # type: ignore[method-assign]
    log_dir = tmp_path / "logdir0"
    log_dir.mkdir()
    (log_dir / "segment").write_text("kept")
    applier = NodeFaultApplier(cluster)
    first, second = DiskFault("n1", str(log_dir), "replace-with-file"), DiskFault("n1", str(log_dir), "replace-with-file")
    assert run(applier.apply(first)) == {"moved_to": f"{log_dir}.floodmark-displaced"}
    assert run(applier.apply(second)) == {"skipped": f"{log_dir} of n1 is replaced by a file already"}
    run(applier.heal(first))
    assert sorted(p.name for p in log_dir.iterdir()) == ["segment"] and not (tmp_path / "logdir0.floodmark-displaced").exists()


def test_overlapping_pauses_of_one_process_resume_it_when_the_last_heals() -> None:
    """The first pause to heal sent SIGCONT while another pause of the same process was
    still in force: that one ended early, its account still saying it lasted (the
    simulator already held the process until the last)."""
    cluster = FakeCluster()
    node = cluster.node("n1")
    node.exec_result = ExecResult(0, "100 (broker) T 1\n", "")  # /proc/100/stat: seen stopped
    applier = NodeFaultApplier(cluster)
    longer, shorter = ProcessPause("n1", 3.0, 6.0), ProcessPause("n1", 1.0, 6.0)
    twin = ProcessPause("n1", 1.0, 6.0)  # equal to `shorter`: each heal ends one of them
    for plan in (longer, shorter, twin):
        run(applier.apply(plan))
    assert node.signals == ["STOP", "STOP", "STOP"]
    assert run(applier.heal(shorter))["resumed"]["still_paused"] is True
    assert run(applier.heal(twin))["resumed"]["still_paused"] is True
    assert node.signals == ["STOP", "STOP", "STOP"]  # the longer pause holds it yet
    assert "still_paused" not in run(applier.heal(longer))["resumed"]
    assert node.signals[-1] == "CONT"


def test_heal_all_runs_every_kind_even_when_one_fails_and_restarts_last() -> None:
    cluster = FakeCluster()
    cluster.brokers[0].running = False
    for node in cluster.nodes:
        node.exec_result = ExecResult(1, "", "iptables: broken")
    report = run(NodeFaultApplier(cluster).heal_all(("disk", "kill", "partition")))
    assert "iptables: broken" in report["partition"]["error"]
    assert "error" in report["disk"]
    assert report["kill"] == {"restarted": {"n1": 100}}
    assert list(report) == ["disk", "partition", "kill"]


def test_real_clusters_refuse_what_only_the_simulator_can_do() -> None:
    assert refuses("partition", "halves") is None
    for kind in ("power", "session", "message", "stall"):
        assert "only the simulator" in (refuses(kind, "random") or "")


# ---------------------------------------------------------------------- on real clusters


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request):  # type: ignore[no-untyped-def]
    with standin_cluster(request.param) as running:
        yield running


def connectivity(cluster: Any) -> dict[tuple[str, str], bool]:
    return {(a.name, b.name): can_connect(a, b) for a, b in itertools.permutations(cluster.nodes, 2)}


def test_isolating_a_node_cuts_exactly_its_traffic_and_heals(cluster) -> None:  # type: ignore[no-untyped-def]
    applier = NodeFaultApplier(cluster)
    plan, how = planned(cluster, "partition", "isolate-one", 7)
    assert all(connectivity(cluster).values())
    evidence = run(applier.apply(plan))
    isolated = how["node"]
    try:
        # The applier proved its own cut: a path into the isolated node timed out, another answered.
        probe = evidence["probe"]
        assert probe["verified"] is True and probe["cut"]["result"] == "timeout", probe
        assert isolated in (probe["cut"]["from"], probe["cut"]["to"]), probe
        assert isolated not in (probe["kept"]["from"], probe["kept"]["to"]), probe
        assert probe["kept"]["result"] in ("open", "refused"), probe
        for (a, b), ok in connectivity(cluster).items():
            assert ok == (isolated not in (a, b)), f"{a}->{b} connected={ok} with {isolated} isolated"
        assert ask(cluster.node(isolated).address) is not None, "the harness must still reach it"
    finally:
        run(applier.heal(plan))
    assert all(connectivity(cluster).values())
    assert all(floodmark_rules(node) == [] for node in cluster.nodes)


def test_zookeeper_cut_leaves_brokers_talking_to_each_other(cluster) -> None:  # type: ignore[no-untyped-def]
    applier = NodeFaultApplier(cluster)
    plan, how = planned(cluster, "partition", "zookeeper-cut", 11)
    run(applier.apply(plan))
    try:
        cut = set(how["brokers"])
        for (a, b), ok in connectivity(cluster).items():
            severed = (a == "zk" and b in cut) or (b == "zk" and a in cut)
            assert ok == (not severed), f"{a}->{b} connected={ok}, cut={cut}"
    finally:
        run(applier.heal(plan))


def test_heal_all_removes_rules_a_lost_applier_left(cluster) -> None:  # type: ignore[no-untyped-def]
    plan, _ = planned(cluster, "partition", "halves", 3)
    run(NodeFaultApplier(cluster).apply(plan))  # its heal never runs
    assert any(floodmark_rules(node) for node in cluster.nodes)
    healed = run(NodeFaultApplier(cluster).heal_all(("partition",)))
    assert healed["partition"]["removed"]
    assert all(floodmark_rules(node) == [] for node in cluster.nodes)
    assert all(connectivity(cluster).values())


def test_a_one_way_cut_puts_rules_only_on_the_deaf_node(cluster) -> None:  # type: ignore[no-untyped-def]
    applier = NodeFaultApplier(cluster)
    grudge, how = grudge_for(random.Random(12), view_of(cluster), "one-way")
    plan, _ = planned(cluster, "partition", "one-way", 12)
    deaf, unheard = how["deaf"], set(how["unheard"])
    assert set(grudge) == {deaf}
    run(applier.apply(plan))
    try:
        for node in cluster.nodes:
            rules = floodmark_rules(node)
            assert bool(rules) == (node.name == deaf), (node.name, rules)
        # iptables stores "-s a,b" as one rule per source.
        sources = {rule[rule.index("-s") + 1] for rule in floodmark_rules(cluster.node(deaf))}
        assert sources == {f"{cluster.node(n).ip}/32" for n in unheard}
        for (a, b), ok in connectivity(cluster).items():
            # TCP needs both directions, so a one-way drop stalls connections either way.
            involved = {a, b} & {deaf} and {a, b} & unheard
            assert ok == (not involved), f"{a}->{b} connected={ok}"
    finally:
        run(applier.heal(plan))
    assert all(floodmark_rules(node) == [] for node in cluster.nodes)


@pytest.mark.parametrize("shape", ["random", "clean-restart"])
def test_kill_ends_the_process_and_restart_keeps_its_data(cluster, shape: str) -> None:  # type: ignore[no-untyped-def]
    for broker in cluster.brokers:
        marker = f"{broker.log_dirs[0]}/marker"
        assert broker.exec(["sh", "-c", f"echo {broker.name} > {marker}"], user=BROKER_USER).ok
    applier = NodeFaultApplier(cluster, stop_timeout=4.0)
    plan, how = planned(cluster, "kill", shape, 5)
    evidence = run(applier.apply(plan))
    node = cluster.node(how["node"])
    assert evidence["running"] is False and not node.is_running() and node.pid() is None
    assert ask(node.address, timeout=0.5) is None
    assert node.exec(["sh", "-c", f"kill -0 {evidence['pid']}"]).exit_code != 0
    restarted = run(applier.heal(plan))
    new_pid = restarted["restarted"][node.name]
    assert new_pid is not None and new_pid != evidence["pid"] and node.pid() == new_pid
    wait_for_port(node.address, 10)
    assert ask(node.address)[1] == new_pid  # type: ignore[index]
    assert node.exec(["cat", f"{node.log_dirs[0]}/marker"]).stdout == f"{node.name}\n"


def test_heal_all_restarts_whatever_is_down(cluster) -> None:  # type: ignore[no-untyped-def]
    victim = cluster.brokers[-1]
    victim.kill()
    assert not victim.is_running()
    healed = run(NodeFaultApplier(cluster).heal_all(("kill",)))
    assert list(healed["kill"]["restarted"]) == [victim.name]
    assert victim.is_running()
    # The next test on this module's cluster asks it at once: a restarted stand-in still
    # starting refused every ask (a clean-clone CI run's clock test failed so on n3).
    wait_for_port(victim.address, 10)
    assert ask(victim.address) is not None


def test_a_paused_process_makes_no_progress_until_healed(cluster) -> None:  # type: ignore[no-untyped-def]
    applier = NodeFaultApplier(cluster)
    plan, how = planned(cluster, "pause", "random-long", 2, duration=20.0)
    evidence = run(applier.apply(plan))
    node = cluster.node(how["node"])
    try:
        assert evidence["pid"] == node.pid() and evidence["stopped"] is True
        time.sleep(0.2)
        frozen = ticks(node)
        time.sleep(0.5)
        assert ticks(node) == frozen, "a paused process kept ticking"
        assert ask(node.address, timeout=0.5) is None, "a paused process answered"
        other = next(b for b in cluster.brokers if b.name != node.name)
        before = ticks(other)
        time.sleep(0.2)
        assert ticks(other) > before, "only the chosen process is paused"
    finally:
        healed = run(applier.heal(plan))
    assert healed["resumed"]["paused_for"] >= 0.7
    time.sleep(0.2)
    assert ticks(node) > frozen
    assert ask(node.address) is not None


def skew(node: Any) -> tuple[float, float]:
    """Bounds on the node's wall clock minus ours: its answer was stamped between our asking
    and our hearing it. (Taking our clock after the answer alone counted the round trip, which
    under CI's load once took 0.76 s, and once no answer came within 2 s while a Spark suite
    and two other test processes loaded both cores: each try gives its own bounds, so a slow
    one is asked again, for up to 15 s: a refusal comes back at once.)"""
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline:
        before = time.time()
        answer = ask(node.address)
        after = time.time()
        if answer is not None:
            return answer[0] - after, answer[0] - before
        time.sleep(0.1)
    raise AssertionError(f"{node.name} did not answer for 15 s")


def near(bounds: tuple[float, float], expected: float, within: float = 0.5) -> bool:
    low, high = bounds
    return low - within <= expected <= high + within


def test_bump_moves_each_chosen_broker_by_its_planned_offset(cluster) -> None:  # type: ignore[no-untyped-def]
    applier = NodeFaultApplier(cluster)
    plan, _ = planned(cluster, "clock", "bump-forward", 5)
    assert isinstance(plan, ClockSkew)
    offsets = {name: offset for name, offset, _ in plan.clocks}
    run(applier.apply(plan))
    try:
        for broker in cluster.brokers:
            expected = offsets.get(broker.name, 0.0)
            assert near(skew(broker), expected), f"{broker.name}: expected {expected}"
    finally:
        healed = run(applier.heal(plan))
    for broker in cluster.brokers:
        assert near(skew(broker), 0.0)
    # The stand-ins' own events showed each planned offset before the heal.
    assert sorted(healed["clock_seen"]) == sorted(offsets)
    for name, seen in healed["clock_seen"].items():
        assert seen["verified"] is True, (name, seen)
        low, high = seen["skew_between"]
        assert low - 0.3 <= offsets[name] <= high + 0.3


def test_rate_change_is_continuous_and_runs_at_the_new_rate(cluster) -> None:  # type: ignore[no-untyped-def]
    applier = NodeFaultApplier(cluster)
    plan = ClockSkew(((cluster.brokers[0].name, 0.0, 2.0),))
    node = cluster.brokers[0]
    run(applier.apply(plan))
    try:
        first, t0 = ask(node.address), time.time()
        assert first is not None and abs(first[0] - t0) < 0.5, "the clock jumped at the change"
        time.sleep(2.0)
        second, t1 = ask(node.address), time.time()
        assert second is not None
        rate = (second[0] - first[0]) / (t1 - t0)
        assert abs(rate - 2.0) < 0.35, rate
    finally:
        healed = run(applier.heal(plan))
    assert near(skew(node), 0.0)
    seen = healed["clock_seen"][node.name]
    assert seen["verified"] is True and seen["expected"] >= 1.5, seen  # drifted ~2 s by the heal


def test_strobe_flips_between_true_time_and_the_planned_offset(cluster) -> None:  # type: ignore[no-untyped-def]
    node = cluster.brokers[0]
    plan = ClockStrobe((node.name,), 60.0, 0.1)

    async def watch() -> tuple[list[tuple[float, float]], dict[str, Any]]:
        applier = NodeFaultApplier(cluster)
        await applier.apply(plan)
        seen = []
        try:
            for _ in range(30):
                seen.append(await asyncio.to_thread(skew, node))
                await asyncio.sleep(0.04)
        finally:
            healed = await applier.heal(plan)
        return seen, healed

    seen, healed = run(watch())
    assert any(near(s, 0.0) for s in seen) and any(near(s, 60.0) for s in seen), seen
    assert near(skew(node), 0.0)
    assert healed["clock_seen"][node.name]["verified"] is True, healed


def test_a_clock_fault_that_never_reached_the_process_is_not_verified(cluster) -> None:  # type: ignore[no-untyped-def]
    """The file is written but the process is paused: it writes no event, so nothing shows
    the moved clock, and the heal says so instead of taking the write for the effect."""
    node = cluster.brokers[1]
    plan = ClockSkew(((node.name, 90.0, 1.0),))
    applier = NodeFaultApplier(cluster, clock_watch=1.0)
    node.pause()
    try:
        run(applier.apply(plan))
        healed = run(applier.heal(plan))
    finally:
        node.resume()
    assert healed["clock_seen"][node.name]["verified"] is False, healed


def as_broker(node: Any, script: str) -> ExecResult:
    return node.exec(["sh", "-c", script], user=BROKER_USER)  # type: ignore[no-any-return]


@pytest.mark.parametrize("shape,error", [("chmod", "Permission denied"),
                                         ("replace-with-file", "Not a directory")])
def test_the_broker_user_loses_its_log_dir_until_healed(cluster, shape: str, error: str) -> None:  # type: ignore[no-untyped-def]
    for broker in cluster.brokers:
        for log_dir in broker.log_dirs:
            assert as_broker(broker, f"echo kept > {log_dir}/segment").ok
    applier = NodeFaultApplier(cluster)
    plan, _ = planned(cluster, "disk", shape, 6)
    assert isinstance(plan, DiskFault)
    run(applier.apply(plan))
    node, log_dir = cluster.node(plan.node), plan.directory
    try:
        for script in (f"ls {log_dir}/", f"cat {log_dir}/segment", f"touch {log_dir}/new"):
            denied = as_broker(node, script)
            assert not denied.ok and error in denied.stderr, (script, denied)
        other = next(d for d in node.log_dirs if d != log_dir)
        assert as_broker(node, f"cat {other}/segment").stdout == "kept\n"
    finally:
        healed = run(applier.heal(plan))
    # ... and the broker restarts, to bring the directory back online (KIP-112).
    assert healed["restarted"]["node"] == node.name and healed["restarted"]["pid"] == node.pid()
    assert healed["restarted"]["pid"] != healed["restarted"]["pid_before"] and node.is_running()
    assert as_broker(node, f"cat {log_dir}/segment").stdout == "kept\n"
    assert as_broker(node, f"touch {log_dir}/new && rm {log_dir}/new").ok


def test_heal_all_repairs_disk_faults_nobody_remembers(cluster) -> None:  # type: ignore[no-untyped-def]
    broker = cluster.brokers[0]
    run(NodeFaultApplier(cluster).apply(DiskFault(broker.name, broker.log_dirs[0], "chmod")))
    run(NodeFaultApplier(cluster).apply(DiskFault(broker.name, broker.log_dirs[1], "replace-with-file")))
    healed = run(NodeFaultApplier(cluster).heal_all(("disk",)))
    assert sum(len(lines) for lines in healed["disk"]["healed"].values()) >= 2
    assert healed["disk"]["restarted"][broker.name]["pid"] == broker.pid()
    for node in cluster.brokers:
        for log_dir in node.log_dirs:
            assert as_broker(node, f"ls {log_dir}").ok


def test_a_pause_plan_names_the_process_it_froze(cluster) -> None:  # type: ignore[no-untyped-def]
    node = cluster.brokers[1]
    applier = NodeFaultApplier(cluster)
    plan = ProcessPause(node.name, 1.0, 6.0)
    evidence = run(applier.apply(plan))
    healed = run(applier.heal(plan))
    assert evidence["pid"] == healed["resumed"]["pid"] == node.pid()
