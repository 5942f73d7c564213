"""Fault coverage: which planned faults were applied, and which demonstrably took effect.

A fault that was applied is not yet a fault that happened: a message rule that matched no
message, a kill of a broker that was not running, a partition planned on a single broker, a
pause that a restart cut short all leave the run as if they had not been planned. A verdict
is worth what its faults did, so the report and the run's last lines say it per kind.

The evidence is what the backend recorded when it applied and healed each fault (the values
of the nemesis's ``start-<kind>`` and ``stop-<kind>`` ops in the history); each kind has one
rule for reading it, below. A fault whose evidence this module cannot read is counted as
applied but unconfirmed, never as having taken effect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from floodmark.contracts.history import NEMESIS, Op

Value = Mapping[str, Any]


def _partition(start: Value, stop: Value | None) -> str | None:
    probe = start.get("probe")
    if isinstance(probe, Mapping):  # real nodes: a connection along a cut path must time out
        if probe.get("verified") is True:
            return None
        return f"the probe saw cut {_result(probe, 'cut')}, kept {_result(probe, 'kept')}"
    if start.get("links_down", 0) > 0 or start.get("rules"):
        return None
    return "no link went down"


def _result(probe: Value, path: str) -> str:
    found = probe.get(path)
    return str(found.get("result")) if isinstance(found, Mapping) else "not probed"


def _crash(start: Value, stop: Value | None) -> str | None:
    return None if start.get("running") is False else "the process was still running"


def _pause(start: Value, stop: Value | None) -> str | None:
    if start.get("stopped") is not True:
        return "the process was not seen stopped"
    resumed = (stop or {}).get("resumed")
    if isinstance(resumed, Mapping) and resumed.get("gone"):
        return "the process was killed while paused"
    paused_for = resumed.get("paused_for") if isinstance(resumed, Mapping) else None
    named = _named_side(start, paused_for)
    if named is not None:
        return named
    if start.get("longer_than_session"):
        if isinstance(paused_for, int | float) and paused_for <= float(start.get("session_timeout", 0)):
            return f"a long pause lasted {paused_for} s, not past the session timeout"
        expired = resumed.get("session_expired") if isinstance(resumed, Mapping) else None
        if expired is False:
            return "a long pause ended with the broker still registered: its session did not expire"
        if expired is None:
            return "a long pause's session expiry was not confirmed (ZooKeeper did not answer)"
    return None


def _named_side(start: Value, paused_for: object) -> str | None:
    """A pause's shape names its side of the session timeout ("-long", "-short"); a
    hand-written schedule's duration may put it on the other side, and then it did not do
    what its name says."""
    shape, timeout = str(start.get("shape", "")), start.get("session_timeout")
    if not isinstance(timeout, int | float):
        return None
    lasted = paused_for if isinstance(paused_for, int | float) else start.get("seconds")
    if not isinstance(lasted, int | float):
        return None
    if shape.endswith("-long") and lasted <= timeout and not start.get("longer_than_session"):
        return f"a long pause lasted {lasted} s, not past the session timeout"
    if shape.endswith("-short") and lasted >= timeout:
        return f"a short pause lasted {lasted} s, not less than the session timeout ({timeout} s)"
    return None


def _clock(start: Value, stop: Value | None) -> str | None:
    if "written" in start or start.get("via") == "libfaketime":  # real nodes: their events must show it
        seen = (stop or {}).get("clock_seen")
        if not isinstance(seen, Mapping):
            return "no event was watched for the moved clock (healed with the run's end)"
        if any(isinstance(node, Mapping) and node.get("verified") is True for node in seen.values()):
            return None
        return "no event showed the moved clock (" + "; ".join(
            f"{name}: expected {_field(node, 'expected')} s, {_field(node, 'events')} events, "
            f"last skew {_field(node, 'skew_between')}" for name, node in sorted(seen.items())) + ")"
    if start.get("strobing"):
        flips = (stop or {}).get("flips")
        return "the strobe never flipped a clock" if flips == 0 else None
    skew, rate = start.get("skew"), start.get("rate")
    if isinstance(skew, Mapping) and any(isinstance(s, int | float) and s != 0 for s in skew.values()):
        return None
    if isinstance(rate, Mapping) and any(isinstance(r, int | float) and r != 1.0 for r in rate.values()):
        return None  # a rate change moves no clock at once; the node's clock runs at it
    return "no clock was moved"


def _field(node: object, name: str) -> str:
    return str(node.get(name)) if isinstance(node, Mapping) else "?"


def _disk(start: Value, stop: Value | None) -> str | None:
    if start.get("unusable") is True or "previous_mode" in start or "moved_to" in start:
        return None
    return "the directory stayed usable"


def _session(start: Value, stop: Value | None) -> str | None:
    return None if start.get("expired_sessions") else "no session expired"


def _message(start: Value, stop: Value | None) -> str | None:
    rule = (stop or {}).get("rule")
    if not isinstance(rule, Mapping):
        return "its rule's count was not recorded"
    if not rule.get("matched", 0):
        return "no message matched its rule"
    acted = next((word for word in _ACTED if word in rule), None)
    if acted is not None and rule[acted] == 0:  # matched, but the rule's draw spared every one
        return f"{rule['matched']} messages matched its rule, none was {acted}"
    return None


_ACTED = ("dropped", "delayed", "duplicated", "reordered")  # what a rule's evidence calls its acts


def _admin(start: Value, stop: Value | None) -> str | None:
    if "taken_up" in start:  # a reassignment
        return None if start["taken_up"] is True else "the controller did not take the reassignment up"
    if "consumed" in start:  # a preferred leader election
        return None if start["consumed"] is True else "the controller did not consume the election request"
    if "led" in start:  # partitions added
        led, partitions = start.get("led"), start.get("partitions")
        return None if led == partitions else f"{led} of {partitions} partitions had a leader"
    return "no operation was recorded"


def _stall(start: Value, stop: Value | None) -> str | None:
    stop = stop or {}
    if stop.get("struck_at") is None:
        # A stall strikes between deciding partition states and writing them; a controller
        # with nothing to decide (no broker lost or back, no ISR change) never gets there.
        return ("the thread reached no safepoint while the stall was armed: it never stuck "
                "(the controller decided no partition state then; a kill, session, partition "
                "or failover fault in the same run gives it one)")
    if stop.get("events_handled_while_stuck") != 0:
        return f"the thread finished {stop.get('events_handled_while_stuck')} events while stuck"
    session = stop.get("session")
    if isinstance(session, Mapping) and not session.get("expired_sessions"):
        return "no session expired while the thread was stuck"
    return None


def _upgrade(start: Value, stop: Value | None) -> str | None:
    """Every step of the roll must have been seen: the broker registered again, with the
    BrokerInfo version its new protocol writes."""
    planned = start.get("steps")
    steps = (stop or {}).get("steps")
    if not isinstance(steps, list):
        return "the roll's steps were not recorded (ended by heal-all or the run's end)"
    unseen = [f"roll {s.get('roll')} {s.get('node')}: "
              + (f"held ({s['held']})" if "held" in s else f"registration {s.get('registration')}, "
                 f"expected version {s.get('expected_registration')}")
              for s in steps if isinstance(s, Mapping) and s.get("seen") is not True]
    if unseen:
        return "not seen registered at the new version: " + "; ".join(unseen)
    if not isinstance(planned, list) or len(steps) != len(planned):
        return f"{len(steps)} of {len(planned) if isinstance(planned, list) else '?'} steps were done"
    return None


def _failover(start: Value, stop: Value | None) -> str | None:
    """A failover step took effect as the kind it acted as (recorded with its choice)."""
    rule = TOOK_EFFECT.get(str(start.get("acts_as")))
    return "the step's kind was not recorded" if rule is None or rule is _failover else rule(start, stop)


TOOK_EFFECT: dict[str, Callable[[Value, Value | None], str | None]] = {
    "partition": _partition, "kill": _crash, "power": _crash, "pause": _pause, "clock": _clock,
    "disk": _disk, "session": _session, "message": _message, "admin": _admin, "stall": _stall,
    "upgrade": _upgrade, "failover": _failover,
}


@dataclass
class KindCoverage:
    """One fault kind's count: planned (started), applied, took effect, and why not."""

    planned: int = 0
    applied: int = 0
    took_effect: int = 0
    missed: list[str] = field(default_factory=list)  # "shape at 12.3 s: why", one per fault

    def to_dict(self) -> dict[str, Any]:
        return {"planned": self.planned, "applied": self.applied, "took_effect": self.took_effect,
                "missed": list(self.missed)}


def fault_coverage(history: Iterable[Op]) -> dict[str, KindCoverage]:
    """Per fault kind, from the nemesis's ops: what was planned, applied and took effect.

    A start or stop completes the invocation just before it (the nemesis does one thing at a
    time), whose value names the fault's number: so faults of one kind that overlap (a
    hand-written schedule may do that) are told apart. Histories without numbers pair a stop
    with the one fault of its kind in force."""
    coverage: dict[str, KindCoverage] = {}
    started: dict[tuple[str, object], tuple[Op, Value]] = {}  # (kind, number) -> applied, in force
    invoked: dict[str, object] = {}  # op name -> the number of the fault it was invoked for
    for op in history:
        if op.process != NEMESIS:
            continue
        if op.type == "invoke":
            invoked[op.f] = op.value.get("fault") if isinstance(op.value, Mapping) else None
            continue
        kind = op.f.partition("-")[2] if op.f.startswith(("start-", "stop-")) else ""
        key = (kind, invoked.pop(op.f, None))
        if op.f.startswith("start-"):
            counted = coverage.setdefault(kind, KindCoverage())
            counted.planned += 1
            if op.type == "ok" and isinstance(op.value, Mapping):
                counted.applied += 1
                if key in started:  # a second fault of the kind replaced the first
                    _judge(kind, counted, *started.pop(key))
                started[key] = (op, op.value)
            else:
                counted.missed.append(f"{_label(op, op.value)}: not applied ({op.type})")
        elif op.f.startswith("stop-") and key in started:
            _judge(kind, coverage[kind], *started.pop(key), op.value if isinstance(op.value, Mapping) else None)
    for (kind, _), (op, value) in sorted(started.items(), key=lambda item: (item[0][0], item[1][0].index)):
        _judge(kind, coverage[kind], op, value)  # ended by heal-all or by the run's end
    return dict(sorted(coverage.items()))


def _judge(kind: str, counted: KindCoverage, op: Op, start: Value, stop: Value | None = None) -> None:
    if "skipped" in start:
        counted.missed.append(f"{_label(op, start)}: skipped ({start['skipped']})")
        return
    rule = TOOK_EFFECT.get(kind)
    why = "no rule reads this kind's evidence" if rule is None else rule(start, stop)
    if why is None:
        counted.took_effect += 1
    else:
        counted.missed.append(f"{_label(op, start)}: {why}")


def _label(op: Op, value: Any) -> str:
    shape = value.get("shape") if isinstance(value, Mapping) else None
    return f"{shape or op.f} at {op.time / 1e9:.1f} s"


def summary_line(coverage: Mapping[str, KindCoverage]) -> str:
    """One line for the end of a run: per kind, took effect / planned."""
    if not coverage:
        return "no faults were planned"
    parts = [f"{kind} {c.took_effect}/{c.planned}" for kind, c in coverage.items()]
    missed = sum(len(c.missed) for c in coverage.values())
    return f"faults that took effect: {', '.join(parts)}" + (f" ({missed} did not)" if missed else "")


def verdict_lines(coverage: Mapping[str, KindCoverage], shown: int = 3) -> list[str]:
    """What a run says beside its verdict: the summary, then up to ``shown`` faults per kind
    that did not take effect (a verdict is worth what its faults did), the rest counted."""
    lines = [summary_line(coverage)]
    for kind, counted in coverage.items():
        lines += [f"  {kind} did not take effect: {missed}" for missed in counted.missed[:shown]]
        if len(counted.missed) > shown:
            lines.append(f"  ... and {len(counted.missed) - shown} more {kind} faults that did not take effect "
                         "(the report names each)")
    return lines
