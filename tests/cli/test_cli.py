import subprocess
import sys

from floodmark.cli import main
from floodmark.errors import EXIT_BAD_ARGUMENTS


def test_bad_arguments_exit_254(capsys):
    try:
        main(["--no-such-flag"])
    except SystemExit as e:
        assert e.code == EXIT_BAD_ARGUMENTS
    else:
        raise AssertionError("argparse should have exited")


def test_help_lists_exit_codes():
    out = subprocess.run([sys.executable, "-m", "floodmark", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments" in out


def _with_closed_stdout(*args: str) -> subprocess.CompletedProcess[str]:
    """``floodmark ARGS`` writing into a pipe nobody reads any more (``... | head -0``)."""
    import os
    from pathlib import Path

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        return subprocess.run([sys.executable, "-m", "floodmark", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(write_end)


def test_a_reader_that_leaves_early_gets_no_traceback_and_the_verdict_stands(tmp_path):
    from checkers_fixtures import make_run_dir

    from floodmark.errors import EXIT_INVALID

    run = make_run_dir(tmp_path, "hw-decrease")
    done = _with_closed_stdout("check", str(run), str(run))
    assert done.stderr == "" and done.returncode == EXIT_INVALID
    assert (run / "results.json").is_file()  # the work was done, only its output went nowhere
    helped = _with_closed_stdout("--help")
    assert helped.stderr == "" and helped.returncode == 0


def test_python_m_exits_with_floodmarks_code_after_an_interrupt_it_caught(tmp_path):
    """An interrupt raised inside code compiled from a string (a dataclass defined as Ctrl-C
    lands) and caught marks CPython 3.11 as interrupted; ``python -m floodmark`` then died of
    SIGINT (-2) instead of exiting 130 (explore's Ctrl-C test saw it, now and then)."""
    (tmp_path / "interrupted_floodmark.py").write_text(
        "import os, runpy, signal, sys\n"
        "import floodmark.cli\n"
        # (as at a terminal: a test run started as a background job hands SIGINT on ignored)
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "def interrupted(argv):  # a command that catches Ctrl-C landing in exec'd code\n"
        "    try:\n"
        "        exec('os.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(10**7): pass')\n"
        "    except KeyboardInterrupt:\n"
        "        return 130\n"
        "    return 0\n"
        "floodmark.cli._main = interrupted\n"
        "sys.argv = ['floodmark']\n"
        "runpy.run_module('floodmark', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-m", "interrupted_floodmark"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 130, (done.returncode, done.stderr)


def _in_shell(redirections: str, *args: str, cwd: object) -> subprocess.CompletedProcess[str]:
    """``floodmark ARGS`` run by a shell with ``redirections`` (``<&-``, ``>/dev/full``, ...)."""
    import os
    import shlex
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "floodmark", *args))
    return subprocess.run(["bash", "-c", f"{command} {redirections}"], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=120)


def _valid_history(tmp_path):
    path = tmp_path / "h.edn"
    path.write_text("{:process 0 :type :invoke :f :write :value 1}\n{:process 0 :type :ok :f :write :value 1}\n")
    return path


def test_standard_input_closed_is_an_unusable_input_not_a_traceback(tmp_path):
    # (regression, 2026-11-28: ``check - <&-`` died of an AttributeError with exit 1, the
    # code of an invalid history, even beside a valid one)
    for args in (["check", "-"], ["check", "h.edn", "-"]):
        _valid_history(tmp_path)
        done = _in_shell("<&-", *args, cwd=tmp_path)
        assert done.returncode == EXIT_BAD_ARGUMENTS, done
        assert "Traceback" not in done.stderr
        assert "floodmark check: error: <stdin>: cannot read: standard input is closed\n" in done.stderr


def test_output_that_cannot_be_written_is_said_in_one_line_and_exits_254(tmp_path):
    # (regression, 2026-11-28: ``check VALID >/dev/full`` printed a traceback and exited 1, the
    # code of an invalid history; ``>&-`` exited 120)
    _valid_history(tmp_path)
    for redirection, why in ((">/dev/full", "no space left on device"), (">&-", "it is closed")):
        done = _in_shell(redirection, "check", "h.edn", cwd=tmp_path)
        assert done.returncode == EXIT_BAD_ARGUMENTS, done
        assert done.stderr == (f"floodmark: error: cannot write to standard output: {why}; "
                               "what it said is lost\n")


def test_errors_that_cannot_be_written_keep_the_exit_code(tmp_path):
    for redirection in ("2>&-", "2>/dev/full"):
        done = _in_shell(redirection, "check", "missing.edn", cwd=tmp_path)
        assert done.returncode == EXIT_BAD_ARGUMENTS, done
        assert "Traceback" not in done.stdout
