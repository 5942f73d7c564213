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
