"""``floodmark check`` end to end through the CLI entry point."""

from __future__ import annotations

from pathlib import Path

import pytest
from checkers_fixtures import make_run_dir

from floodmark.cli import main

ETCD_LIKE = "INFO  jepsen.util - 0\t:invoke\t:write\t1\nINFO  jepsen.util - 0\t:ok\t:write\t1\n" \
            "INFO  jepsen.util - 1\t:invoke\t:read\tnil\nINFO  jepsen.util - 1\t:ok\t:read\t{}\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_valid_invalid_and_overall(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, "good.log", ETCD_LIKE.format(1))
    bad = write(tmp_path, "bad.log", ETCD_LIKE.format(2))
    assert main(["check", str(good)]) == 0
    assert main(["check", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "VALID    " + str(good) in out and "INVALID  " + str(bad) in out
    assert out.rstrip().endswith("overall: INVALID (2 paths)")


def test_run_directory_gets_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_run_dir(tmp_path, "lost-write")
    assert main(["check", str(path), "--checker", "durability,queue"]) == 1
    assert (path / "results.json").is_file()
    assert "lost-write" in capsys.readouterr().out


def test_unknown_on_time_limit(tmp_path: Path) -> None:
    from floodmark.checkers.linearizability.synthetic import register_run
    from floodmark.contracts.history import write_history

    run = register_run(3, ops=3000, processes=60)
    path = tmp_path / "h.jsonl"
    write_history(path, run.history)
    assert main(["check", str(path), "--time-limit", "0.01", "--checker", "linearizable"]) == 2


def test_bad_input_exits_254_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = write(tmp_path, "broken.edn", "[{:process 0 :type :invoke :f :read}\n {:process 0 :type :nope :f :read}]")
    assert main(["check", str(broken)]) == 254
    err = capsys.readouterr().err
    assert f"{broken}:2: :type must be" in err
    assert main(["check", str(tmp_path / "missing.edn")]) == 254
    assert main(["check", str(broken), "--checker", "nonsense"]) == 254
    assert main(["check", str(tmp_path)]) == 254  # a directory that is not a run directory
    good = write(tmp_path, "good.log", ETCD_LIKE.format(1))
    assert main(["check", str(good), "--model", "mutex"]) == 254
    assert main(["check", str(good), "--initial", "[1"]) == 254


def test_a_long_check_says_it_is_still_checking(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress on long work: a search that takes long (here: longer than the notice's delay,
    made short) says on stderr which path it is still on; a quick one says nothing of it."""
    from floodmark.checkers import commands
    from floodmark.checkers.linearizability.synthetic import register_run
    from floodmark.contracts.history import write_history

    path = tmp_path / "h.jsonl"
    write_history(path, register_run(3, ops=3000, processes=60).history)
    good = write(tmp_path, "good.log", ETCD_LIKE.format(1))
    assert main(["check", str(good)]) == 0
    assert "still checking" not in capsys.readouterr().err
    monkeypatch.setattr(commands, "STILL_FIRST", 0.05)
    monkeypatch.setattr(commands, "STILL_EVERY", 0.05)
    assert main(["check", str(path), "--time-limit", "1", "--checker", "linearizable"]) in (0, 2)
    notices = [line for line in capsys.readouterr().err.splitlines() if "still checking" in line]
    assert notices and all(line.startswith(f"floodmark check: {path}: still checking after ") for line in notices)
    assert notices[0].endswith("(the searching checkers give up at 1 s)")


def test_a_writer_that_stalls_is_said_to_hold_the_reading_not_the_checking(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # (the third hunt, 2026-11-28: a pipe whose writer stalled after a line was said to be
    # "still checking", naming --time-limit, which bounds no reading)
    import os
    import threading

    from floodmark.checkers import commands

    monkeypatch.setattr(commands, "STILL_FIRST", 0.05)
    monkeypatch.setattr(commands, "STILL_EVERY", 0.05)
    read_end, write_end = os.pipe()
    os.write(write_end, b"{:process 0 :type :invoke :f :write :value 1}\n")

    def finish() -> None:
        os.write(write_end, b"{:process 0 :type :ok :f :write :value 1}\n")
        os.close(write_end)

    finisher = threading.Timer(0.5, finish)
    finisher.start()
    try:
        assert main(["check", f"/dev/fd/{read_end}"]) == 0
    finally:
        finisher.join()
        os.close(read_end)
    notices = [line for line in capsys.readouterr().err.splitlines() if " after " in line]
    assert notices and all("still reading it after" in line and line.endswith("(its writer has not finished)")
                           for line in notices)


def test_model_and_initial_options(tmp_path: Path) -> None:
    reads_zero = write(tmp_path, "z.edn", "[{:process 0 :type :invoke :f :read :value nil}\n"
                                          " {:process 0 :type :ok :f :read :value 0}]")
    assert main(["check", str(reads_zero)]) == 0  # Knossos's registers start at 0
    assert main(["check", str(reads_zero), "--initial", "nil"]) == 1
    assert main(["check", str(reads_zero), "--model", "register", "--initial", "0"]) == 0


def test_every_key_names_each_invalid_key_instead_of_stopping_at_the_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = []
    for key in "abc":
        lines += [f'{{:process 0, :type :invoke, :f :append, :key "{key}", :value "x"}}',
                  f'{{:process 0, :type :ok, :f :append, :key "{key}", :value "x"}}',
                  f'{{:process 1, :type :invoke, :f :get, :key "{key}", :value nil}}',
                  f'{{:process 1, :type :ok, :f :get, :key "{key}", :value "{"x" if key == "a" else "stale"}"}}']
    history = write(tmp_path, "kv.txt", "\n".join(lines) + "\n")
    assert main(["check", str(history)]) == 1
    assert "1 nonlinearizable" in capsys.readouterr().out
    assert main(["check", str(history), "--every-key"]) == 1
    assert "2 nonlinearizable" in capsys.readouterr().out


def test_to_edn_export_reads_back(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path)
    out = tmp_path / "history.edn"
    assert main(["check", str(path), "--to-edn", str(out)]) == 0
    assert out.read_text().startswith("{:index 0, :time ")
    assert main(["check", str(out), "--checker", "queue,durability"]) == 0


def test_a_foreign_queue_history_is_judged_without_a_configuration(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from checkers_fixtures import History

    from floodmark.contracts.history import write_history

    h = History()
    h.send(0, 0, "a", 0)
    h.send(0, 0, "b", 1)
    h.poll(1, 0, 0, [(0, "a")], f="drain")  # b, acknowledged, is gone
    path = tmp_path / "foreign.jsonl"
    write_history(path, h.ops)
    assert main(["check", str(path)]) == 1  # the loss is still reported, acks or not
    out = capsys.readouterr().out
    assert "durability invalid (1 lost-write)" in out and "queue invalid" in out


def test_a_run_whose_poll_states_a_negative_high_watermark_is_not_judged_valid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: VALID (exit 0), the impossible high watermark unread. Now the poll is named as
    a malformed op in the verdict line and the verdicts on sends and reads are unknown (exit
    2), as for a poll holding a record at a negative offset."""
    import re

    path = make_run_dir(tmp_path)
    history = path / "history.jsonl"
    lines = history.read_text().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if '"high_watermark":' in line)
    lines[at] = re.sub(r'"high_watermark":\d+', '"high_watermark":-5', lines[at], count=1)
    history.write_text("".join(lines))
    assert main(["check", str(path)]) == 2
    out = capsys.readouterr().out
    problem = f"[malformed op {at}: poll's batch of "
    assert out.startswith(f"UNKNOWN  {path}") and f"durability unknown {problem}" in out
    assert f"queue unknown {problem}" in out and "has high watermark -5, below 0 (no log has such an offset)]" in out
    assert "hw valid; leader valid; invariants valid; stats valid" in out


def test_a_malformed_test_yaml_exits_254_with_one_line_naming_it(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = make_run_dir(tmp_path)
    (path / "test.yaml").write_text("acks: most\n")
    assert main(["check", str(path)]) == 254
    err = capsys.readouterr().err.strip()
    assert err == f"floodmark check: error: {path / 'test.yaml'}: acks: must be one of all, 1, 0, got 'most'"
    assert not (path / "results.json").exists()


def test_an_emptied_test_yaml_exits_254_rather_than_judging_by_the_defaults(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # The audit's F02: a run invalid by its own settings (min.insync 3) was judged valid by the
    # defaults (min.insync 2) an emptied or torn test.yaml stood for.
    path = make_run_dir(tmp_path)
    full = (path / "test.yaml").read_text()
    for torn in ("", full[:full.index("acks:")]):
        (path / "test.yaml").write_text(torn)
        assert main(["check", str(path)]) == 254
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"floodmark check: error: {path / 'test.yaml'}: ") and "\n" not in err
        assert "states no configuration" in err if not torn else "acks: not stated" in err


# ------------------------------------------------ the linearizability audit's inputs (regressions)

def edn_ops(*ops: str) -> str:
    """EDN op maps, one process, each op invoked then completed ok: 'write 1' or 'read nil -> 3'."""
    lines = []
    for op in ops:
        f, values = op.split(" ", 1)
        invoked, _, completed = values.partition(" -> ")
        lines.append(f"{{:process 0 :type :invoke :f :{f} :value {invoked}}}")
        lines.append(f"{{:process 0 :type :ok :f :{f} :value {completed or invoked}}}")
    return "\n".join(lines) + "\n"


def jsonl_ops(*ops: tuple[str, object, object]) -> str:
    import json

    lines = []
    for f, invoked, completed in ops:
        for type_, value in (("invoke", invoked), ("ok", completed)):
            lines.append(json.dumps({"index": len(lines), "time": len(lines), "type": type_, "process": 0,
                                     "f": f, "value": value}))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("name", "text", "options", "code"), [
    # values Python's == merges (audit finding 1)
    ("write 1, read true", edn_ops("write 1", "read nil -> true"), ["--model", "register"], 1),
    ("write :x, read \"x\"", edn_ops("write :x", 'read nil -> "x"'), ["--model", "register"], 1),
    ("write 1, read 1.0", edn_ops("write 1", "read nil -> 1.0"), ["--model", "register"], 1),
    ("write #{1 2}, read [1 2]", edn_ops("write #{1 2}", "read nil -> [1 2]"), ["--model", "register"], 1),
    ("initial 0, read false", edn_ops("read nil -> false"), ["--model", "register"], 1),
    ("kv keys 1 and true", edn_ops('put [1 "x"]', 'put [true "y"]', 'get [1 nil] -> [1 "x"]'), ["--model", "kv"], 0),
    # Jepsen independent histories (finding 2): per key, by default and with --model kv
    ("independent", edn_ops("write [1 3]", "write [2 4]", "read [1 nil] -> [1 3]", "read [3 nil] -> [3 nil]"), [], 0),
    ("independent, kv", edn_ops("write [1 3]", "write [2 4]", "read [1 nil] -> [1 3]", "read [3 nil] -> [3 nil]"),
     ["--model", "kv"], 0),
    ("independent, kv, nil read of a written key", edn_ops("write [1 3]", "read [1 nil] -> [1 nil]"), ["--model", "kv"], 0),
    ("independent minimal", edn_ops("write [1 3]", "write [2 4]", "read [1 nil] -> [1 3]"), [], 0),
    ("independent, stale", edn_ops("write [1 3]", "write [1 4]", "read [1 nil] -> [1 3]"), [], 1),
    ("independent refused", edn_ops("write [1 3]", "write [2 4]", "read [1 nil] -> [1 3]"), ["--no-independent"], 1),
    # inputs that do not fit the model (finding 5): named, exit 254
    ("kv append of an integer", '{:process 0 :type :invoke :f :append :key "a" :value 1}\n'
                                '{:process 0 :type :ok :f :append :key "a" :value 1}\n', [], 254),
    ("multi-register vector key", edn_ops("txn [[:write [1 2] 3]]"), [], 254),
    # legal values of mixed types (finding 5)
    ("multi-register --initial mixed keys", edn_ops("txn [[:write :x 1]]"), ["--initial", "{:x 0, 1 0}"], 0),
    ("multi-register mixed keys read", edn_ops("txn [[:read 1 0] [:read :x 0]]"), ["--initial", "{:x 0, 1 0}"], 0),
    ("map with keys of mixed types", edn_ops('write {1 2, "a" 3}', 'read nil -> {"a" 3, 1 2}'),
     ["--model", "register"], 0),
    # Jepsen's (cas-register) starts at nil (finding 6): --initial nil
    ("cas from an empty register, Knossos", edn_ops("cas [0 1]"), [], 0),
    ("cas from an empty register, Jepsen", edn_ops("cas [0 1]"), ["--initial", "nil"], 1),
])
def test_audited_histories_get_their_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                              text: str, options: list[str], code: int) -> None:
    path = write(tmp_path, "h.edn", text)
    assert main(["check", "--checker", "linearizable", *options, str(path)]) == code, capsys.readouterr()
    if code == 254:
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "does not fit the model" in err and "op 0" in err


@pytest.mark.parametrize(("name", "ops", "code"), [
    ("write 1, read true", [("write", 1, 1), ("read", None, True)], 1),
    ("multi-register starts at nil", [("txn", [["read", "x", None]], [["read", "x", 0]])], 1),
    ("multi-register reads nil", [("txn", [["read", "x", None]], [["read", "x", None]])], 0),
    ("register starts at nil", [("read", None, 0)], 1),
])
def test_audited_jsonl_histories_get_their_verdicts(tmp_path: Path, name: str, ops: list[tuple[str, object, object]],
                                                    code: int) -> None:
    path = write(tmp_path, "h.jsonl", jsonl_ops(*ops))
    assert main(["check", "--checker", "linearizable", str(path)]) == code


def test_the_verdict_line_says_how_the_history_was_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "h.edn", edn_ops("write [1 3]", "read [1 nil] -> [1 3]"))
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("[cas-register per key of jepsen.independent [key value] ops (detected); registers start at 0 "
            "and a nil read tells nothing]") in out
    assert main(["check", "--independent", str(path)]) == 0
    assert "ops; registers" in capsys.readouterr().out  # asked, not detected
    assert main(["check", "--independent", "--model", "kv", str(path)]) == 254


def test_to_edn_warns_when_floodmark_would_judge_the_edn_otherwise(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    lost = write(tmp_path, "lost.jsonl", jsonl_ops(("write", 1, 1), ("read", None, None)))  # a lost write
    out = tmp_path / "lost.edn"
    assert main(["check", "--checker", "linearizable", str(lost), "--to-edn", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"floodmark check: warning: {out}: floodmark judges this EDN VALID, not INVALID: its EDN registers "
                   "start at 0 and a nil read tells nothing (this jsonl history's start at nil and nil is a value); "
                   "check it with --conventions jsonl for the same verdict")
    assert out.read_text().count("\n") == 4 and ":value nil" in out.read_text()  # written as it is
    assert main(["check", "--checker", "linearizable", str(out)]) == 0
    assert main(["check", "--checker", "linearizable", "--conventions", "jsonl", str(out)]) == 1
    # a history whose verdict does not rest on the conventions converts without a word
    fine = write(tmp_path, "fine.jsonl", jsonl_ops(("write", 1, 1), ("read", None, 1)))
    assert main(["check", "--checker", "linearizable", str(fine), "--to-edn", str(tmp_path / "fine.edn")]) == 0
    assert capsys.readouterr().err == ""


def test_to_edn_judges_the_edn_of_keyed_register_ops_per_key_too(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """(regression, 2026-11-29, found converting a keyed JSONL history) The EDN was judged
    again told that its ops were not independent ones, which also made it one register: the
    warning said the EDN was INVALID, though checking it said VALID."""
    keyed = write(tmp_path, "keyed.jsonl", jsonl_ops(("write", {"key": "a", "value": 1}, None),
                                                     ("write", {"key": "b", "value": 2}, None),
                                                     ("read", {"key": "a", "value": None}, {"key": "a", "value": 1})))
    out = tmp_path / "keyed.edn"
    assert main(["check", "--checker", "linearizable", str(keyed), "--to-edn", str(out)]) == 0
    assert capsys.readouterr().err == ""
    assert main(["check", "--checker", "linearizable", str(out)]) == 0


def test_to_edn_keeps_an_edn_historys_values_as_they_were(tmp_path: Path) -> None:
    source = write(tmp_path, "h.edn", edn_ops('write {"a" 1}', "read nil -> {:a 1}", "write #{1 \\c :k}"))
    out = tmp_path / "out.edn"
    assert main(["check", "--checker", "linearizable", "--model", "register", str(source), "--to-edn", str(out)]) == 1
    text = out.read_text()
    assert ':value {"a" 1}' in text and ":value {:a 1}" in text and "#{" in text and "\\c" in text
    assert main(["check", "--checker", "linearizable", "--model", "register", str(out)]) == 1


def test_the_names_help_offers_are_the_models_and_formats() -> None:
    from floodmark.checkers import commands
    from floodmark.checkers.linearizability.models import MODEL_NAMES
    from floodmark.formats.detect import FORMATS

    assert commands.MODEL_NAMES == MODEL_NAMES and commands.FORMATS == FORMATS


def test_help_says_how_to_get_jepsens_nil_initial_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "start their registers at nil: check their EDN with --initial nil" in text
    assert "--conventions FORMAT" in text and "--independent" in text


def test_model_is_refused_where_no_checker_takes_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A queue run's (or history's) checkers use no model: --model was ignored without a word
    (VALID). It is refused, saying which workloads it applies to; asked for, the linearizable
    checker takes it (and finds that a queue's sends are no register's ops)."""
    from floodmark.contracts.history import read_history, write_history

    run = make_run_dir(tmp_path)
    history = tmp_path / "queue.jsonl"
    write_history(history, read_history(run / "history.jsonl"))
    for path, what in ((run, "a queue run"), (history, "a queue history")):
        assert main(["check", str(path), "--model", "register"]) == 254
        err = capsys.readouterr().err
        assert err == (f"floodmark check: error: {path}: {what}, judged by durability, queue, hw, leader, invariants, "
                       "stats, none of which takes a model: --model applies to the linearizable checker, which judges "
                       "log-lin runs and register, kv, mutex and log histories\n")
    assert main(["check", str(run), "--model", "register", "--checker", "linearizable"]) == 2
    assert "the register model has no operation 'poll'" in capsys.readouterr().out
