"""Applying fault plans to real nodes (containers or network namespaces) through ``Node``.

Every real backend offers the node-control interface (:class:`~floodmark.harness.cluster.Node`),
so one applier serves them all:

- a network cut is one iptables rule per grudging node, in its own INPUT chain,
  ``-s <peer ips> -j DROP`` tagged with a ``floodmark`` comment, so only traffic between exactly
  the chosen nodes stops (the harness, on the host, still reaches everyone); a probe then
  proves it: a TCP connection along a cut path must time out, one along a kept path must be
  answered;
- a kill is SIGKILL (or SIGTERM for a clean restart), healed by starting the process again on
  the same machine with the same data;
- a pause is SIGSTOP, healed by SIGCONT of the same pid (a process killed and restarted
  meanwhile was never paused);
- a clock fault rewrites the broker's libfaketime timestamp file (see ``backends.faketime``),
  and before it is healed the broker's own event times must show the moved clock (see
  ``backends.clock_evidence``);
- a disk fault runs ``chmod 000`` or moves the directory aside and puts a file in its place,
  as the broker's own user; healing undoes it and restarts the broker cleanly (SIGTERM, then
  start), because a broker keeps a failed log directory offline until it restarts;
- an upgrade rewrites each broker's ``--inter-broker-protocol`` and restarts it cleanly, one
  at a time, twice (``backends.rolling_upgrade``, ``backends.node_upgrade``); never undone.

Node commands block, so they run in worker threads while the clients keep going on the event
loop. Heal-all finds what to undo on the nodes themselves (floodmark's iptables rules, stopped
processes, displaced directories), whether or not this applier remembers applying it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from floodmark.backends.clock_evidence import WATCH, ExpectedSkew, watch_clocks
from floodmark.backends.faketime import process_start_time, write_clock
from floodmark.backends.node_upgrade import NodeUpgradeHands, OutOfIsr, Registration
from floodmark.backends.process_state import is_stopped, seen_stopped
from floodmark.backends.rolling_upgrade import RollingUpgrades
from floodmark.harness.cluster import BROKER_USER, Cluster, ClusterError, Node
from floodmark.harness.faults import (
    ClockSkew,
    ClockStrobe,
    DiskFault,
    DoubleRoll,
    Evidence,
    FaultPlan,
    NetworkCut,
    ProcessCrash,
    ProcessPause,
)

T = TypeVar("T")
COMMENT = "floodmark"
DISPLACED = ".floodmark-displaced"
REAL_KINDS = ("partition", "clock", "pause", "disk", "kill", "upgrade")


Registered = Callable[[int], bool | None]
"""Whether a broker id is registered in ZooKeeper now (None: ZooKeeper did not answer)."""


def session_expired(plan: ProcessPause, registered: bool | None) -> Evidence:
    """A pause meant to outlast the session proves it did: the broker's ephemeral
    registration is gone by the time it resumes. Read just before resuming."""
    if plan.seconds <= plan.session_timeout:
        return {}
    return {"session_expired": None if registered is None else not registered}


def refuses(kind: str, shape: str) -> str | None:
    """Why a real cluster cannot apply a fault of this kind and shape (None: it can)."""
    if kind not in REAL_KINDS:
        return f"only the simulator can apply {kind} faults"
    return None


def iptables_rule(sources: Iterable[str]) -> list[str]:
    """The INPUT rule (without -A/-D) dropping packets from ``sources`` (ip addresses)."""
    return ["INPUT", "-s", ",".join(sorted(sources)), "-m", "comment", "--comment", COMMENT,
            "-j", "DROP"]


def floodmark_rules(node: Node) -> list[list[str]]:
    """The floodmark rules currently in the node's INPUT chain (as -D arguments)."""
    result = node.exec(["iptables", "-w", "-S", "INPUT"])
    if not result.ok:
        raise ClusterError(f"{node.name}: iptables -S INPUT failed: {result.stderr.strip()}")
    rules = []
    for line in result.stdout.splitlines():
        words = line.split()
        if words[:2] == ["-A", "INPUT"] and COMMENT in words:
            rules.append(words[1:])
    return rules


def _iptables(node: Node, args: list[str]) -> None:
    result = node.exec(["iptables", "-w", *args])
    if not result.ok:
        raise ClusterError(f"{node.name}: iptables {' '.join(args)} failed: {result.stderr.strip()}")


def _as_broker(node: Node, script: str, *args: str) -> str:
    result = node.exec(["sh", "-c", script, "disk", *args], user=BROKER_USER)
    if not result.ok:
        raise ClusterError(f"{node.name}: disk fault command failed: {result.stderr.strip()}")
    return result.stdout.strip()


PROBE_TIMEOUT = 1.0  # seconds a probe waits for a connection through a cut path

_PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
    print("open")
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print("error", e.errno)
"""


def _connect(src: Node, dst: Node) -> str:
    """What a TCP connection from ``src`` to ``dst``'s service port meets: open, refused
    (the path works, nothing listens), timeout (dropped), or why no probe could run."""
    host, _, port = dst.address.rpartition(":")
    done = src.exec(["python3", "-c", _PROBE, host, port, str(PROBE_TIMEOUT)], timeout=PROBE_TIMEOUT + 10)
    if not done.ok:
        return f"no probe ({done.stderr.strip()[-80:] or f'exit {done.exit_code}'})"
    return done.stdout.strip() or "no answer"


class NodeFaultApplier:
    """Applies plans to a real cluster's nodes, remembering what each plan changed."""

    def __init__(self, cluster: Cluster, stop_timeout: float = 12.0,
                 registered: Registered = lambda broker_id: None, clock_watch: float = WATCH,
                 registration: Registration = lambda broker_id: None,
                 out_of_isr: OutOfIsr = lambda broker_id: []) -> None:
        self.cluster = cluster
        self.upgrades = RollingUpgrades(NodeUpgradeHands(cluster, stop_timeout, registration, out_of_isr))
        self.clock_watch = clock_watch  # seconds a skewed broker gets to show it in its events
        self.stop_timeout = stop_timeout  # SIGTERM grace of a clean restart
        self.registered = registered  # a long pause is confirmed by the registration it cost
        # Per cut in force, the rule it added on each node; a list per plan, because two
        # identical cuts in force at once add a rule each and each heal removes one.
        self._rules: dict[NetworkCut, list[dict[str, list[str]]]] = {}
        self._undo: dict[FaultPlan, dict[str, Any]] = {}
        # Per pause in force, the process it froze and when, oldest first: two pauses of one
        # process may overlap, and the process runs again only when the last of them heals.
        self._paused: dict[ProcessPause, list[dict[str, Any]]] = {}
        self._strobes: dict[FaultPlan, asyncio.Task[None]] = {}

    def refuses(self, kind: str, shape: str) -> str | None:
        return refuses(kind, shape)

    async def apply(self, plan: FaultPlan) -> Evidence:
        if isinstance(plan, ClockStrobe):
            return self._start_strobe(plan)
        if isinstance(plan, DoubleRoll):
            return self.upgrades.start(plan)
        return await asyncio.to_thread(self._apply, plan)

    async def heal(self, plan: FaultPlan) -> Evidence:
        if isinstance(plan, DoubleRoll):
            return await self.upgrades.finish(plan)  # an upgrade is not undone
        seen = await asyncio.to_thread(self._watch_clocks, plan) if isinstance(plan, ClockSkew | ClockStrobe) else {}
        await stop_strobe(self._strobes, plan)
        return {**await asyncio.to_thread(self._heal, plan), **seen}

    async def heal_all(self, kinds: tuple[str, ...]) -> dict[str, Evidence]:
        for task in self._strobes.values():
            task.cancel()
        await asyncio.gather(*self._strobes.values(), return_exceptions=True)
        self._strobes.clear()
        self._rules.clear()
        self._undo.clear()
        self._paused.clear()
        # A roll first: when it ends, every broker it stopped runs again; crashes come after.
        upgraded = {"upgrade": await self.upgrades.finish_all()} if "upgrade" in kinds else {}
        return {**upgraded, **await asyncio.to_thread(self._heal_all, kinds)}

    # ------------------------------------------------------------------ apply

    def _apply(self, plan: FaultPlan) -> Evidence:
        if isinstance(plan, NetworkCut):
            return self._cut(plan)
        if isinstance(plan, ProcessCrash):
            return self._crash(plan)
        if isinstance(plan, ProcessPause):
            return self._pause(plan)
        if isinstance(plan, ClockSkew):
            return self._skew(plan)
        if isinstance(plan, DiskFault):
            return self._disk(plan)
        raise ClusterError(f"a real cluster cannot apply {type(plan).__name__}")

    def _cut(self, plan: NetworkCut) -> Evidence:
        added: dict[str, list[str]] = {}
        self._rules.setdefault(plan, []).append(added)
        for name, sources in plan.drops:
            node = self.cluster.node(name)
            rule = iptables_rule(self.cluster.node(src).ip for src in sources)
            _iptables(node, ["-A", *rule])
            added[name] = rule
        return {"rules": dict(added), "probe": self._probe(plan)}

    def _probe(self, plan: NetworkCut) -> Evidence:
        """Prove the cut: a path it cut must time out, a path no cut in force touches must
        answer (a refused connection answers too: the peer's process may be down, its
        network is not). A path another cut severed proves nothing about this one."""
        severed = {link for cut_in_force in self._rules for link in cut_in_force.links()}
        names = [n.name for n in self.cluster.nodes]
        cut = next(((src, dst) for dst, sources in plan.drops for src in sources), None)
        kept = next(((src, dst) for dst in names for src in names
                     if src != dst and (src, dst) not in severed and (dst, src) not in severed), None)
        evidence: Evidence = {}
        for label, pair in (("cut", cut), ("kept", kept)):
            if pair is not None:
                evidence[label] = {"from": pair[0], "to": pair[1],
                                   "result": _connect(self.cluster.node(pair[0]), self.cluster.node(pair[1]))}
        cut_result = evidence.get("cut", {}).get("result")
        kept_result = evidence.get("kept", {}).get("result")
        evidence["verified"] = cut_result == "timeout" and kept_result in (None, "open", "refused")
        return evidence

    def _crash(self, plan: ProcessCrash) -> Evidence:
        node = self.cluster.node(plan.node)
        pid = node.pid()
        if pid is None:
            return {"skipped": f"{node.name} is not running"}
        if plan.mode == "terminate":
            node.stop(timeout=self.stop_timeout)
        elif plan.mode == "kill":
            node.kill()
        else:
            raise ClusterError(f"a real cluster cannot apply {plan.mode}")
        return {"pid": pid, "signal": "SIGTERM" if plan.mode == "terminate" else "SIGKILL",
                "running": node.is_running()}

    def _pause(self, plan: ProcessPause) -> Evidence:
        node = self.cluster.node(plan.node)
        pid = node.pid()
        if pid is None:
            return {"skipped": f"{node.name} is not running"}
        node.pause()
        self._paused.setdefault(plan, []).append({"pid": pid, "paused_at": time.monotonic()})
        return {"pid": pid, "stopped": seen_stopped(node, pid)}

    def _skew(self, plan: ClockSkew) -> Evidence:
        written = {}
        for name, offset, rate in plan.clocks:
            node = self.cluster.node(name)
            if rate == 1.0:
                written[name] = write_clock(node, offset)
            else:
                # libfaketime: wall = start + (now - start) * rate + offset, so to run at
                # ``rate`` from now without a jump the file's offset must absorb the past.
                elapsed = time.time() - process_start_time(node)
                written[name] = write_clock(node, round(offset - elapsed * (rate - 1.0), 3), rate)
        self._undo[plan] = {"applied_at": time.time()}
        return {"written": written}

    def _watch_clocks(self, plan: ClockSkew | ClockStrobe) -> Evidence:
        """While the fault is still in force, the brokers' own events must show it."""
        expected: dict[str, ExpectedSkew] = {}
        if isinstance(plan, ClockStrobe):
            for name in plan.targets:
                expected[name] = functools.partial(strobed_skew, plan.delta)
        else:
            applied_at = self._undo.pop(plan, {}).get("applied_at")
            if applied_at is None:
                return {}
            for name, offset, rate in plan.clocks:
                expected[name] = functools.partial(drifted_skew, offset, rate, applied_at)
        return watch_clocks([(self.cluster.node(name), skew) for name, skew in expected.items()],
                            watch=self.clock_watch)

    def _start_strobe(self, plan: ClockStrobe) -> Evidence:
        nodes = [self.cluster.node(name) for name in plan.targets]

        async def flip() -> None:
            skewed = False
            while True:
                await asyncio.sleep(plan.period)
                skewed = not skewed
                for node in nodes:
                    await asyncio.to_thread(write_clock, node, plan.delta if skewed else 0.0)

        self._strobes[plan] = asyncio.get_running_loop().create_task(flip(), name="clock-strobe")
        return {"strobing": list(plan.targets), "via": "libfaketime"}

    def _disk(self, plan: DiskFault) -> Evidence:
        node = self.cluster.node(plan.node)
        if plan.mode == "chmod":
            mode = _as_broker(node, 'stat -c %a "$1" && chmod 000 "$1"', plan.directory)
            self._undo[plan] = {"mode": mode}
            return {"previous_mode": mode}
        # A directory another fault replaced already is left as it is: mv would move the file
        # in its place into the displaced directory, which the heal then brings back with it.
        moved = _as_broker(node, 'if [ -e "$1$2" ]; then echo taken; else mv "$1" "$1$2" && touch "$1"; fi',
                           plan.directory, DISPLACED)
        if moved == "taken":
            return {"skipped": f"{plan.directory} of {plan.node} is replaced by a file already"}
        return {"moved_to": plan.directory + DISPLACED}

    # ------------------------------------------------------------------ heal

    def _heal(self, plan: FaultPlan) -> Evidence:
        if isinstance(plan, NetworkCut):
            removed = {}
            in_force = self._rules.get(plan, [])
            added = in_force.pop(0) if in_force else {}
            if not in_force:
                self._rules.pop(plan, None)
            for name, rule in sorted(added.items()):
                _iptables(self.cluster.node(name), ["-D", *rule])
                removed[name] = rule
            return {"removed": removed}
        if isinstance(plan, ProcessCrash):
            return restart_crashed(self.cluster.node(plan.node))
        if isinstance(plan, ProcessPause):
            return self._resume(plan)
        if isinstance(plan, ClockSkew | ClockStrobe):
            return {"reset": {name: write_clock(self.cluster.node(name), 0.0) for name in plan.nodes}}
        if isinstance(plan, DiskFault):
            node = self.cluster.node(plan.node)
            if plan.mode == "chmod":
                mode = self._undo.pop(plan, {}).get("mode", "755")
                _as_broker(node, 'chmod "$2" "$1"', plan.directory, mode)
                return {"restored_mode": mode, **self._restart_cleanly(node)}
            _as_broker(node, 'rm -f "$1" && mv "$1$2" "$1"', plan.directory, DISPLACED)
            return {"restored": plan.directory, **self._restart_cleanly(node)}
        raise ClusterError(f"a real cluster cannot heal {type(plan).__name__}")

    def _restart_cleanly(self, node: Node) -> Evidence:
        """Restart a broker whose log directory came back: as in Kafka, a directory the broker
        took offline stays offline until the broker restarts (KIP-112), so healing the disk
        alone would leave its partitions unserved for the rest of the run."""
        if not node.is_running():
            return {"restarted": None}
        before = node.pid()
        node.stop(timeout=self.stop_timeout)
        node.start()
        return {"restarted": {"node": node.name, "pid_before": before, "pid": node.pid()}}

    def _resume(self, plan: ProcessPause) -> Evidence:
        held = self._paused.get(plan)
        if not held:
            return {"resumed": None}
        undo = held.pop(0)
        if not held:
            del self._paused[plan]
        node = self.cluster.node(plan.node)
        paused_for = round(time.monotonic() - undo["paused_at"], 3)
        if node.pid() != undo["pid"]:  # killed and restarted meanwhile: never paused
            return {"resumed": {"node": node.name, "pid": undo["pid"], "gone": True}}
        expired = session_expired(plan, self.registered(node.broker_id or 0))
        if self._paused_by_another(node.name, undo["pid"]):  # resuming would end that pause early
            return {"resumed": {"node": node.name, "pid": undo["pid"], "paused_for": paused_for,
                                **expired, "still_paused": True}}
        node.resume()
        return {"resumed": {"node": node.name, "pid": undo["pid"], "paused_for": paused_for,
                            **expired}}

    def _paused_by_another(self, node: str, pid: int) -> bool:
        """Does another pause in force still hold this process?"""
        return any(plan.node == node and any(undo["pid"] == pid for undo in held)
                   for plan, held in self._paused.items())

    def _heal_all(self, kinds: tuple[str, ...]) -> dict[str, Evidence]:
        report: dict[str, Evidence] = {}
        healers: dict[str, Callable[[], Evidence]] = {
            "partition": self._remove_every_rule, "clock": self._reset_every_clock,
            "pause": self._resume_every_process, "disk": self._restore_every_dir,
            "kill": self._restart_every_process,
        }
        for kind in sorted((k for k in kinds if k in healers), key=lambda k: k == "kill"):
            try:
                report[kind] = healers[kind]()
            except Exception as e:  # noqa: BLE001 - every other kind must still be healed
                report[kind] = {"error": f"{type(e).__name__}: {e}"}
        return report

    def _remove_every_rule(self) -> Evidence:
        removed: dict[str, list[list[str]]] = {}
        for node in self.cluster.nodes:
            for rule in floodmark_rules(node):
                _iptables(node, ["-D", *rule])
                removed.setdefault(node.name, []).append(rule)
        return {"removed": removed}

    def _reset_every_clock(self) -> Evidence:
        return {"reset": {b.name: write_clock(b, 0.0) for b in self.cluster.brokers}}

    def _resume_every_process(self) -> Evidence:
        resumed = []
        for node in self.cluster.nodes:
            pid = node.pid()
            if pid is not None and is_stopped(node, pid):
                node.resume()
                resumed.append(node.name)
        return {"resumed": resumed}

    def _restore_every_dir(self) -> Evidence:
        script = ('for d in "$@"; do '
                  'if [ -e "$d.floodmark-displaced" ]; then rm -f "$d"; '
                  'mv "$d.floodmark-displaced" "$d"; echo "moved $d"; fi; '
                  'if [ "$(stat -c %a "$d")" = 0 ]; then chmod 755 "$d"; echo "chmod $d"; fi; '
                  'done')
        healed = {}
        restarted = {}
        for node in self.cluster.brokers:
            if node.log_dirs:
                output = _as_broker(node, script, *node.log_dirs)
                if output:
                    healed[node.name] = output.splitlines()
                    restarted[node.name] = self._restart_cleanly(node)["restarted"]
        return {"healed": healed, "restarted": restarted}

    def _restart_every_process(self) -> Evidence:
        restarted = {}
        for node in self.cluster.nodes:
            if not node.is_running():
                node.start()
                restarted[node.name] = node.pid()
        if any(pid is None for pid in restarted.values()):
            raise ClusterError(f"restart failed for {restarted}")
        return {"restarted": restarted}


def strobed_skew(delta: float, now: float) -> float:
    """A strobe's skew when the clock is off (the times it is true show zero)."""
    return delta


def drifted_skew(offset: float, rate: float, applied_at: float, now: float) -> float:
    """A skewed clock's offset from true time at ``now``: the bump plus what the rate added."""
    return offset + (now - applied_at) * (rate - 1.0)


def restart_crashed(node: Node) -> Evidence:
    """Heal a crash: start the node's process again, unless it runs already (restarted since)."""
    if node.is_running():
        return {"restarted": {}}
    node.start()
    return {"restarted": {node.name: node.pid()}}


async def stop_strobe(strobes: dict[FaultPlan, asyncio.Task[None]], plan: FaultPlan) -> None:
    """Cancel ``plan``'s clock strobe, if one runs, and wait until it has stopped."""
    task = strobes.pop(plan, None)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
