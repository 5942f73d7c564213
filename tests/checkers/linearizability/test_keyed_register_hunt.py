"""Register ops that name their key beside their value (Porcupine's ``:key``), against a
brute-force oracle: small histories of arbitrary interleavings, results and outcomes
(``ok``, ``fail``, ``info``, never completed), judged per key by trying every order of the
ops that respects real time, each crashed op taking effect or not. Knossos's EDN register
conventions: every key starts at 0, a read of nil tells nothing, a failed op never happened,
an ok op did what its completion says.
"""

from __future__ import annotations

from itertools import permutations, product
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.checkers.api import CheckInput
from floodmark.checkers.linearizability.checker import LinearizableChecker
from floodmark.formats.jepsen_edn import parse_edn_history

KEYS = ('"a"', '"b"')
Call = dict[str, Any]


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[int, str, str, str, Any]]:
    """Events (process, type, f, key, value), each process one op at a time, up to 6 ops."""
    events: list[tuple[int, str, str, str, Any]] = []
    open_calls: dict[int, tuple[str, str, Any]] = {}
    processes = [0, 1, 2]  # (a process whose op crashed or never completed is replaced, as Jepsen does)
    invoked = 0
    count = draw(st.integers(1, 6))
    while invoked < count or open_calls:
        free = [p for p in processes if p not in open_calls]
        if invoked < count and free and (not open_calls or draw(st.booleans())):
            process = draw(st.sampled_from(free))
            f = draw(st.sampled_from(("read", "write", "cas")))
            value = None if f == "read" else draw(st.integers(0, 2)) if f == "write" else \
                [draw(st.integers(0, 2)), draw(st.integers(0, 2))]
            key = draw(st.sampled_from(KEYS))
            open_calls[process] = (f, key, value)
            events.append((process, "invoke", f, key, value))
            invoked += 1
            continue
        process = draw(st.sampled_from(sorted(open_calls)))
        f, key, value = open_calls.pop(process)
        outcome = draw(st.sampled_from(("ok", "ok", "fail", "info", "pending")))
        if outcome in ("info", "pending"):
            processes[processes.index(process)] = max(processes) + 1 + len(events)
        if outcome == "pending":
            continue  # never completes
        if f == "read" and outcome == "ok":
            value = draw(st.sampled_from((0, 1, 2, None)))
        events.append((process, outcome, f, key, value))
    return events


def _edn(value: Any) -> str:
    return "nil" if value is None else f"[{value[0]} {value[1]}]" if isinstance(value, list) else str(value)


def _calls(events: list[tuple[int, str, str, str, Any]]) -> list[Call]:
    calls: list[Call] = []
    open_calls: dict[int, Call] = {}
    for position, (process, kind, f, key, value) in enumerate(events):
        if kind == "invoke":
            open_calls[process] = {"f": f, "key": key, "value": value, "at": position, "done": None, "ok": False}
            calls.append(open_calls[process])
            continue
        call = open_calls.pop(process)
        if kind == "fail":
            calls.remove(call)  # never happened
        elif kind == "ok":
            call.update(done=position, ok=True, value=value)
    return calls


def _legal(order: tuple[Call, ...]) -> bool:
    registers: dict[str, Any] = {}
    for call in order:
        held, value = registers.get(call["key"], 0), call["value"]
        if call["f"] == "read":
            if call["ok"] and value is not None and value != held:
                return False
        elif call["f"] == "write":
            registers[call["key"]] = value
        elif held != value[0]:
            return False
        else:
            registers[call["key"]] = value[1]
    return True


def oracle(events: list[tuple[int, str, str, str, Any]]) -> bool:
    calls = _calls(events)
    crashed = [call for call in calls if not call["ok"]]
    for taken in product((False, True), repeat=len(crashed)):
        chosen = [call for call in calls if call["ok"]] + [call for call, t in zip(crashed, taken) if t]
        for order in permutations(chosen):
            if all(not (b["done"] is not None and b["done"] < a["at"])
                   for i, a in enumerate(order) for b in order[i + 1:]) and _legal(order):
                return True
    return False


@settings(max_examples=400, deadline=None)
@given(histories())
def test_keyed_register_verdicts_agree_with_brute_force(events: list[tuple[int, str, str, str, Any]]) -> None:
    text = "".join(f"{{:process {p} :type :{kind} :f :{f} :key {key} :value {_edn(value)}}}\n"
                   for p, kind, f, key, value in events)
    ops = parse_edn_history(text, "keyed.edn", check_pairs=True)
    result = LinearizableChecker(conventions="edn").check(CheckInput(ops, time_limit=30))
    assert result.valid is oracle(events), text
