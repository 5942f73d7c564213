"""A test whose layout can never pass a send is refused in one line naming both values and
why (exit 254), before anything runs: min.insync.replicas above the replication factor (Kafka
creates such a topic, but every acks=all send to it fails), or more replicas than brokers."""

from __future__ import annotations

from pathlib import Path

import pytest

from floodmark.cli import main


@pytest.mark.parametrize("options, named", [
    (["--min-insync-replicas", "4", "--replication-factor", "3"],
     ["min_insync_replicas: 4", "replication factor 3", "no acks=all send", "NOT_ENOUGH_REPLICAS"]),
    (["--replication-factor", "4", "--nodes", "3"],
     ["replication_factor: 4", "the 3 nodes", "more replicas than there are brokers"]),
])
def test_an_impossible_layout_is_refused_with_both_values_and_why(
        tmp_path: Path, options: list[str], named: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--cluster", "sim", "--store", str(tmp_path), *options]) == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(part in err[0] for part in named), err
    assert list(tmp_path.iterdir()) == []  # refused before a run directory
