"""Spark's console progress bar stays off: ``floodmark analyze`` and ``floodmark explore``
print their own progress, and the bar (``[Stage 3:>  (0 + 2) / 8]``, redrawn in place on
stderr with no newline of its own) was left at the start of their lines and before the final
summary. These tests look at the configuration a session is built with, without a JVM.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from floodmark.cli import main
from floodmark.errors import UsageError
from floodmark.pipeline import session


class _Builder:
    """SparkSession.builder as get_session uses it, recording the configuration; it starts nothing."""

    def __init__(self) -> None:
        self.conf: dict[str, str] = {}

    def appName(self, name: str) -> _Builder:  # noqa: N802 - Spark's name
        self.conf["app"] = name
        return self

    def config(self, key: str, value: str) -> _Builder:
        self.conf[key] = value
        return self

    def master(self, master: str) -> _Builder:
        self.conf["master"] = master
        return self

    def getOrCreate(self) -> Any:  # noqa: N802 - Spark's name
        raise RuntimeError("no JVM in this test")


@pytest.fixture
def builder(monkeypatch: pytest.MonkeyPatch) -> _Builder:
    made = _Builder()
    monkeypatch.setattr(session, "SparkSession", SimpleNamespace(builder=made, getActiveSession=lambda: None))
    return made


def test_a_session_as_explore_makes_it_has_no_console_progress_bar(builder: _Builder) -> None:
    with pytest.raises(UsageError, match="Spark could not start with master 'local\\[2\\]': no JVM in this test"):
        session.get_session("local[2]", app_name="floodmark-explore")  # as floodmark.run.explore calls it
    assert builder.conf["spark.ui.showConsoleProgress"] == "false"


def test_analyze_without_quiet_starts_spark_without_its_progress_bar(
        builder: _Builder, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "store").mkdir()
    assert main(["analyze", str(tmp_path / "store"), "--master", "local[1]"]) == 254
    assert builder.conf["spark.ui.showConsoleProgress"] == "false"
    assert capsys.readouterr().err == ("floodmark analyze: error: Spark could not start with master 'local[1]': "
                                       "no JVM in this test\n")


def test_a_caller_printing_no_progress_of_its_own_may_still_ask_for_the_bar(builder: _Builder) -> None:
    with pytest.raises(UsageError):
        session.get_session(progress=True)
    assert builder.conf["spark.ui.showConsoleProgress"] == "true"
