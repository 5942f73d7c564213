"""The run report: generated from synthetic run directories, checked as HTML text."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from report_fixtures import HOSTILE_IMG, HOSTILE_SCRIPT, make_run

from floodmark.cli import main
from floodmark.reports import anomaly_groups
from floodmark.reports.report import write_report


class _Collector(HTMLParser):
    """Collects the tags, attributes and scripts of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ids: set[str] = set()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self._script_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "script":
            self._in_script = a
            self._script_text = []

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self._script_text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._script_text)))
            self._in_script = None


def _parse(html: str) -> _Collector:
    c = _Collector()
    c.feed(html)
    return c


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


def test_report_with_anomalies_lists_every_anomaly_with_context(store: Path) -> None:
    run = make_run(store, anomalies=True, ops=1200, unseen=250)
    html = write_report(run.path).read_text()
    page = _parse(html)
    assert {"verdict", "repro", "anomalies", "timelines", "partitions", "processes", "files"} <= page.ids
    assert ">INVALID<" in html
    assert f"floodmark repro {run.path.resolve()}" in html
    # grouped by checker and type with counts; the 250 unseen anomalies all reach the page
    assert "unseen × 250" in html and "lost-write × 1" in html and "hw-decrease × 1" in html
    rest = [json.loads(text) for attrs, text in page.scripts if str(attrs.get("id", "")).startswith("rest-")]
    detailed = len(re.findall(r'<article class="anomaly" id="anomaly-', html))
    assert sum(len(r) for r in rest) + detailed == 252
    assert sorted(row[0] for r in rest for row in r) == list(range(9, 251))
    # the lost write's witness op is shown, highlighted, with its partition neighbours
    lost = run.lost_send_index
    assert re.search(rf'<tr class="witness"><td class="num">{lost}</td>', html)
    # node events of the anomaly's partition, per node, with the named event highlighted
    assert '<div class="node-col"><h4>n1' in html and '<tr class="named"><td class="num">20</td>' in html
    # every compact row carries its context, resolvable in the page's shared op and event tables
    tables = next(json.loads(t) for a, t in page.scripts if a.get("id") == "context-data")
    unseen = run.results["checkers"]["queue"]["anomalies"]  # type: ignore[index]
    for r in rest:
        for number, partition, _offsets, _ops, _explanation, context in r:
            witness = unseen[number - 1]["ops"][0]
            [block] = context["witnesses"]
            assert block["witness"] == witness and witness in block["highlight"]
            assert block["partition"] == partition and block["elsewhere"] is False
            assert all(isinstance(i, list) or str(i) in tables["ops"] for i in block["rows"])
            assert {n["node"] for n in context["nodes"]} == {"n1", "n2", "n3"}
            for n in context["nodes"]:
                assert all(isinstance(s, list) or str(s) in tables["events"][n["node"]] for s in n["rows"])
    assert "without inline context" not in html


def test_header_shows_test_seed_variant_nemeses_cluster_and_duration(store: Path) -> None:
    run = make_run(store, name="clean-header", seed=7, ops=300, variant="no-fencing", nemesis=("partition", "pause"))
    html = write_report(run.path).read_text()
    header = html[html.index('<header class="run'): html.index("</header>")]
    last_time = json.loads(run.path.joinpath("history.jsonl").read_text().splitlines()[-1])["time"]
    assert '<h1 id="test-name">clean-header</h1>' in header
    assert '<dd id="seed">7</dd>' in header
    assert '<dd id="variant">no-fencing</dd>' in header
    assert '<dd id="nemesis">partition, pause</dd>' in header
    assert "<div><dt>cluster</dt><dd>local</dd></div>" in header
    assert f"<div><dt>duration</dt><dd>{last_time / 1e9:.1f} s</dd></div>" in header
    assert "<div><dt>ops</dt><dd>300</dd></div>" in header
    assert "<title>valid · clean-header · floodmark</title>" in html


def test_header_states_only_what_the_run_states(store: Path) -> None:
    run = make_run(store, name="recorded", seed=5, ops=60, variant="unclean-election")
    config = yaml.safe_load((run.path / "test.yaml").read_text())
    (run.path / "test.yaml").write_text(yaml.safe_dump({**config, "unclean_leader_election": True}))
    header = _header(write_report(run.path).read_text())
    assert "<div><dt>unclean election</dt><dd>enabled</dd></div>" in header
    # Without test.yaml the copy in results.json is shown; without either, nothing is made up.
    (run.path / "test.yaml").unlink()
    header = _header(write_report(run.path).read_text())
    assert '<dd id="variant">unclean-election</dd>' in header and "<dt>cluster</dt><dd>local</dd>" in header
    assert "unclean election" not in header  # the copy has no such key: it states the setting off
    results = json.loads((run.path / "results.json").read_text())
    (run.path / "results.json").write_text(json.dumps({**results, "config": {}, "variant": None}))
    header = _header(write_report(run.path).read_text())
    assert '<dd id="variant">not stated</dd>' in header and '<dd id="nemesis">not stated</dd>' in header
    assert "<dt>cluster</dt>" not in header and "<dt>acks</dt>" not in header
    assert '<h1 id="test-name">recorded</h1>' in header  # the test directory's name


def test_a_malformed_test_yaml_is_a_warning_naming_the_file(store: Path) -> None:
    run = make_run(store, ops=40, with_results=False)
    (run.path / "test.yaml").write_text("acks: sometimes\n")
    html = write_report(run.path).read_text()
    assert 'id="warnings"' in html and "test.yaml: acks: must be one of all, 1, 0" in html


def _header(html: str) -> str:
    return html[html.index('<header class="run'): html.index("</header>")]


def test_witnesses_on_other_partitions_are_shown_highlighted(store: Path) -> None:
    run = make_run(store, anomalies=True, hostile=True, ops=600, unseen=3)
    html = write_report(run.path).read_text()
    [lost] = run.results["checkers"]["durability"]["anomalies"]  # type: ignore[index]
    history = [json.loads(line) for line in run.path.joinpath("history.jsonl").read_text().splitlines()]
    elsewhere = [w for w in lost["ops"] if history[w]["value"]["partition"] != lost["partition"]]
    assert elsewhere, "the fixture's second witness is on the other partition"
    for witness in lost["ops"]:
        assert re.search(rf'<tr class="witness"><td class="num">{witness}</td>', html), witness
    other = history[elsewhere[0]]["value"]["partition"]
    assert (f"Ops around witness op {elsewhere[0]} (on its own partition t0/{other}, "
            f"not the anomaly's t0/{lost['partition']}") in html


def test_anomalies_past_the_context_bound_are_counted_on_the_page(store: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anomaly_groups, "CONTEXT_PER_TYPE", 20)
    run = make_run(store, anomalies=True, ops=1200, unseen=250)
    html = write_report(run.path).read_text()
    page = _parse(html)
    [rest] = [json.loads(t) for a, t in page.scripts if str(a.get("id", "")).startswith("rest-")]
    assert [row[0] for row in rest if row[5] is not None] == list(range(9, 21))
    assert [row[0] for row in rest if row[5] is None] == list(range(21, 251))
    assert "230 without inline context" in html
    assert ("Anomalies #21–#250 of this type (230 of 250) have no inline context: this page carries "
            "the context of the first 20 anomalies of this type (20 a type at most, 2,000 in all).") in html
    assert 'data-context-limit="20"' in html


def test_report_without_anomalies_says_so_and_still_draws_timelines(store: Path) -> None:
    run = make_run(store, name="clean", seed=7, ops=300)
    html = write_report(run.path).read_text()
    page = _parse(html)
    assert ">valid<" in html and "no-anomalies" in page.ids
    assert html.count('<svg class="plot"') == 2  # latency and throughput
    assert html.count('<svg class="lanes"') == 2  # one lane chart per partition
    timeline = next(json.loads(t) for a, t in page.scripts if a.get("id") == "timeline-data")
    assert timeline["count"] == sum(1 for line in run.path.joinpath("history.jsonl").read_text().splitlines()
                                    if '"invoke"' in line and '"nemesis"' not in line)
    assert [f["kind"] for f in timeline["faults"]] == ["partition", "kill"]
    # The fixture's faults ended indeterminate (info): the coverage table and the line by the
    # verdict say that none is known to have taken effect.
    assert "fault-coverage" in page.ids and "fault-coverage-line" in page.ids
    assert "faults that took effect: kill 0/1, partition 0/1 (2 did not)" in html
    assert "not applied (info)" in html


def test_linearizability_failure_chart_marks_linearized_and_stuck_ops(store: Path) -> None:
    run = make_run(store, name="lin", lin_failure=True)
    html = write_report(run.path).read_text()
    assert 'id="linearizability"' in html
    anomaly = run.results["checkers"]["linearizable"]["anomalies"][0]  # type: ignore[index]
    first = anomaly["partial_linearizations"][0]
    charts = re.findall(r'<svg class="lin-chart".*?</svg>', html, re.S)
    assert len(charts) == 2
    for stuck in first["next"]:
        assert f'<g class="op stuck" data-op="{stuck}">' in charts[0]
    for op in first["ops"]:
        assert f'<g class="op linearized" data-op="{op}">' in charts[0]
    assert charts[0].count('class="lin-point"') == len(first["ops"])


def test_report_is_self_contained(store: Path) -> None:
    run = make_run(store, anomalies=True, lin_failure=False)
    html = write_report(run.path).read_text()
    page = _parse(html)
    for tag, attrs in page.tags:
        for name in ("src", "href", "action"):
            value = attrs.get(name) or ""
            assert not re.match(r"^(https?:)?//", value), f"<{tag} {name}={value!r}> reaches the network"
    assert not any(attrs.get("src") for attrs, _ in page.scripts)
    assert "@import" not in html and "url(http" not in html
    # links to the run's files are relative and point at files that exist
    hrefs = [a["href"] for t, a in page.tags if t == "a" and a.get("href") and not a["href"].startswith("#")]
    assert "history.jsonl" in hrefs and "results.json" in hrefs and "events/n1.jsonl" in hrefs
    assert "logs/n1/broker.log" in hrefs
    for href in hrefs:
        assert (run.path / href).is_file()


def test_hostile_payloads_are_escaped_everywhere(store: Path) -> None:
    run = make_run(store, anomalies=True, hostile=True)
    html = write_report(run.path).read_text()
    assert HOSTILE_SCRIPT not in html and HOSTILE_IMG not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html  # shown, as text
    page = _parse(html)
    executable = [(a, t) for a, t in page.scripts if a.get("type") != "application/json"]
    assert len(executable) == 1 and "__pwned" not in executable[0][1]
    for tag, attrs in page.tags:
        assert not any(name.startswith("on") for name in attrs), f"event handler attribute on <{tag}>"
    # JSON data blocks cannot be closed early by a payload
    for attrs, text in page.scripts:
        if attrs.get("type") == "application/json":
            assert "</" not in text and "<" not in text
            json.loads(text)


def test_report_to_another_directory_links_back_to_the_run(store: Path, tmp_path: Path) -> None:
    run = make_run(store, ops=100)
    out = tmp_path / "elsewhere" / "r.html"
    out.parent.mkdir()
    assert main(["report", str(run.path), "--out", str(out)]) == 0
    html = out.read_text()
    assert 'href="../store/queue-partition/20260101T000000-s1/history.jsonl"' in html
    assert not (run.path / "report.html").exists()


def test_unchecked_run_and_torn_event_file_are_reported_not_fatal(store: Path) -> None:
    run = make_run(store, with_results=False, ops=80)
    (run.path / "events" / "n3.jsonl").write_text('{"node":"n3","seq":0,"kind":"started"}\nnot json\n{"x":1}\n')
    html = write_report(run.path).read_text()
    assert "not checked" in html
    assert 'id="warnings"' in html and "n3.jsonl:2" in html


def test_report_command_rejects_bad_input_clearly(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nope")]) == 254
    assert "no such directory" in capsys.readouterr().err
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert main(["report", str(a_file)]) == 254
    assert capsys.readouterr().err == (f"floodmark report: error: {a_file}: is a file, not a directory "
                                       "(report renders a run directory)\n")
    run = make_run(store, ops=40)
    with open(run.path / "history.jsonl", "a") as f:
        f.write("{broken\n{\"index\": 99}\n")
    assert main(["report", str(run.path)]) == 254
    err = capsys.readouterr().err
    assert "history.jsonl:41" in err and "not valid JSON" in err
    assert not (run.path / "report.html").exists()


def test_a_hundred_thousand_faults_make_a_page_of_bounded_size(tmp_path: Path) -> None:
    # A hand-written schedule of 100,000 kills: each chart drew every band as its own patch
    # (11 minutes, 3 GB, a 71 MB page with a fault table of 100,000 rows).
    run = tmp_path / "store" / "t" / "20260101T000000-s1"
    run.mkdir(parents=True)
    lines, index = [], 0
    for fault in range(20_000):
        start = 1_000_000_000 + fault * 1_000_000  # a kill every millisecond, for half of one
        for time, f in ((start, "start-kill"), (start + 500_000, "stop-kill")):
            for op_type in ("invoke", "info"):
                lines.append(json.dumps({"index": index, "time": time, "type": op_type, "process": "nemesis",
                                         "f": f, "value": None}))
                index += 1
    lines.append(json.dumps({"index": index, "time": 30_000_000_000, "type": "invoke", "process": 0,
                             "f": "send", "value": {"topic": "t0", "partition": 0, "value": "a"}}))
    (run / "history.jsonl").write_text("\n".join(lines) + "\n")
    html = write_report(run).read_text()
    assert "Fault intervals (20000)" in html
    assert "The first 1,000 of 20,000 intervals" in html and html.count("<tr><td><span class=\"swatch\"") == 1_000
    assert "… and 19,980 more" in html  # the faults that did not take effect, per kind
    plots = re.findall(r'<svg class="plot".*?</svg>', html, re.S)
    assert len(plots) == 2 and all(len(plot) < 200_000 for plot in plots)  # one band: kills a gap apart
    assert len(html) < 5_000_000


def test_empty_and_nemesis_only_histories_render(tmp_path: Path) -> None:
    run = tmp_path / "store" / "t" / "20260101T000000-s1"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_text("")
    html = write_report(run).read_text()
    assert "No client ops in this history." in html and "not checked" in html
    (run / "history.jsonl").write_text(
        '{"index":0,"time":5,"type":"invoke","process":"nemesis","f":"start-partition","value":null}\n')
    html = write_report(run).read_text()
    assert "fault: partition" in html


def test_an_event_file_whose_last_line_is_cut_short_is_said_as_check_says_it(store: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``check`` notes a node's last event left unread (the node was killed writing it); the
    report said nothing of it. Now it shows and prints the same line; and a file that check
    refuses (another node's events, a topic the run does not have) is left out with a warning."""
    run = make_run(store, ops=80)
    events = run.path / "events"
    lines = len((events / "n1.jsonl").read_text().splitlines()) + 1
    with open(events / "n1.jsonl", "a") as f:
        f.write('{"node":"n1","seq":99999,"kind":"sto')
    torn = f"{events}/n1.jsonl:{lines}: its last line was cut short (the node was killed while writing it) and is not read"
    assert main(["report", str(run.path)]) == 254  # (as for any input not wholly read: a torn history too)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"floodmark report: warning: {torn}" in err
    html = (run.path / "report.html").read_text()
    assert 'id="warnings"' in html and f"n1.jsonl:{lines}: its last line was cut short" in html
    copied = [{**e, "node": "n2", **({"topic": "t7"} if "topic" in e else {})}
              for e in map(json.loads, (events / "n1.jsonl").read_text().splitlines()[:-1])]
    (events / "n2.jsonl").write_text("".join(json.dumps(e) + "\n" for e in copied))
    warnings: list[str] = []
    write_report(run.path, warn=warnings.append)
    assert any(w.startswith(f"node events not shown: {events}/n2.jsonl:") and "names topic 't7'" in w for w in warnings)
