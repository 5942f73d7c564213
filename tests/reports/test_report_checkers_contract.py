"""The report renders what the real checkers write (results.json is the contract between them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from floodmark.checkers import registry as checkers
from floodmark.checkers import synthetic
from floodmark.checkers.linearizability import synthetic as synthetic_lin
from floodmark.contracts.history import write_history
from floodmark.contracts.node_events import NodeEventWriter
from floodmark.contracts.run_config import TestConfig
from floodmark.reports.report import write_report


def _write_run(root: Path, run: object, workload: str) -> Path:
    path = root / "store" / workload / "20260101T000000-s1"
    (path / "events").mkdir(parents=True)
    write_history(path / "history.jsonl", run.history)  # type: ignore[attr-defined]
    for node, events in run.events.items():  # type: ignore[attr-defined]
        writer = NodeEventWriter(path / "events" / f"{node}.jsonl", node)
        for e in events:
            writer.write(e.wall, e.body)
        writer.close()
    config = {"name": workload, "seed": 1, "workload": workload, "concurrency": 5, "nemesis": []}
    (path / "test.yaml").write_text(yaml.safe_dump(TestConfig().to_dict() | config))
    return path


def test_nonlinearizable_result_from_the_real_checker_is_charted(tmp_path: Path) -> None:
    run = synthetic_lin.corrupt_read(synthetic_lin.log_lin_run(3, ops=120, processes=4))
    path = _write_run(tmp_path, run, "log-lin")
    results = checkers.check_run(path, checkers=["linearizable"])
    [anomaly] = results["checkers"]["linearizable"]["anomalies"]
    html = write_report(path).read_text()
    assert 'id="linearizability"' in html
    chart = re.search(r'<svg class="lin-chart".*?</svg>', html, re.S)
    assert chart is not None
    for stuck in anomaly["stuck"]:
        assert f'<g class="op stuck" data-op="{stuck}">' in chart[0]
    longest = anomaly["partial_linearizations"][0]
    assert chart[0].count('class="op linearized"') >= min(len(longest), 16)


@pytest.mark.parametrize("planted", ["lost-write", "committed-truncated", "multiple-leaders"])
def test_queue_checkers_results_render_without_loss(tmp_path: Path, planted: str) -> None:
    run = synthetic.inject(synthetic.queue_run(5, ops=300), planted)
    path = _write_run(tmp_path, run, "queue")
    results = checkers.check_run(path)
    assert results["valid"] is False
    html = write_report(path).read_text()
    assert f"{planted} × " in html
    for name, result in results["checkers"].items():
        assert f">{name}</a>" in html
        for kind, count in result.get("anomaly_counts", {}).items():
            assert f"{kind} × {count:,}" in html
    json.dumps(results)  # the file the report read is plain JSON
