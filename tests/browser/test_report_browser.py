"""Reports and the results browser in a real headless Chromium (Debian's package, via Playwright).

Each test opens a page, checks that what an engineer needs is visible, that the page logged
no console errors, and that hostile payloads recorded in the history did not execute.
Screenshots are kept in test-artifacts/ for a human to look at.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))  # for report_fixtures

from report_fixtures import make_run  # noqa: E402

from floodmark.reports.report import write_report  # noqa: E402
from floodmark.reports.server import make_server  # noqa: E402

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = _chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (Debian package `chromium`)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Page:
    """A browser page that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any, width: int = 1400, height: int = 1000) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.page.close()

    def shot(self, name: str, full_page: bool = True) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / name), full_page=full_page)

    def not_pwned(self) -> None:
        assert self.page.evaluate("typeof window.__pwned") == "undefined", "a payload from the history executed"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser") / "store"
    for run in (
        make_run(root, name="queue-partition", seed=3, ops=2000, anomalies=True, hostile=True),
        make_run(root, name="clean", seed=4, stamp="20260102T000000", ops=600),
        make_run(root, name="lin", seed=5, stamp="20260103T000000", lin_failure=True, hostile=True),
    ):
        write_report(run.path)
    return root


def _report(store: Path, name: str) -> str:
    return next((store / name).iterdir()).joinpath("report.html").as_uri()


def test_report_with_anomalies(browser: Any, store: Path) -> None:
    with Page(browser) as p:
        p.page.goto(_report(store, "queue-partition"))
        for selector in ("#verdict", "#repro", "#checker-summary", "details.group", "article.anomaly",
                         "table.ops tr.witness", ".node-col", "svg.plot", "svg.lanes", "#timeline-canvas"):
            assert p.page.locator(selector).first.is_visible(), selector
        assert p.page.locator("#verdict").inner_text() == "INVALID"
        # hostile send values are shown as text
        assert p.page.locator("#test-name").inner_text() == "queue-partition"
        assert p.page.locator("td.value", has_text="<img src=x onerror").count() > 0
        # the 242 unseen anomalies past the detailed ones are paged, 100 rows at a time
        pager = p.page.locator(".paged").first
        assert "rows 1–100 of 242" in pager.locator(".pager span").inner_text()
        pager.get_by_role("button", name="next ▶").click()
        assert "rows 101–200 of 242" in pager.locator(".pager span").inner_text()
        assert pager.locator("tbody tr").count() == 100
        p.shot("report-anomalies.png")
        p.page.locator("#partitions").screenshot(path=str(ARTIFACTS / "report-partitions.png"))
        p.not_pwned()
        assert p.errors == []


def test_compact_anomaly_row_expands_into_its_context(browser: Any, store: Path) -> None:
    run_dir = next((store / "queue-partition").iterdir())
    results = json.loads(run_dir.joinpath("results.json").read_text())
    unseen = results["checkers"]["queue"]["anomalies"]
    with Page(browser) as p:
        p.page.goto(_report(store, "queue-partition"))
        pager = p.page.locator(".paged").first
        row = pager.locator("tbody tr.expandable").first
        assert row.locator("td").first.inner_text().endswith("9")
        row.click()
        context = pager.locator("tr.ctx-row")
        assert context.count() == 1 and context.is_visible()
        witness = unseen[8]["ops"][0]
        assert f"Ops around witness op {witness} (partition t0/{unseen[8]['partition']}" in context.inner_text()
        highlighted = context.locator("table.ops tr.witness td.num")
        assert str(witness) in [highlighted.nth(i).inner_text() for i in range(highlighted.count())]
        assert context.locator("table.ops tr").count() >= 5  # header, ops before, the pair, ops after
        assert context.locator(".node-col").count() == 3 and context.locator(".node-col").first.is_visible()
        assert context.locator(".node-col td.ev-kind", has_text="became_leader").count() > 0
        p.page.locator("#anomalies").screenshot(path=str(ARTIFACTS / "report-compact-context.png"))
        row.click()  # collapses again
        assert pager.locator("tr.ctx-row").count() == 0
        # a row on the next page (anomaly #150) expands too, from the keyboard
        pager.get_by_role("button", name="next ▶").click()
        later = pager.locator("tbody tr.expandable[data-number='150']")
        later.focus()
        p.page.keyboard.press("Enter")
        witness = unseen[149]["ops"][0]
        assert f"Ops around witness op {witness}" in pager.locator("tr.ctx-row").inner_text()
        assert pager.locator("tr.ctx-row table.ops tr.witness").count() >= 1
        p.not_pwned()
        assert p.errors == []


def test_process_timeline_zooms_pans_and_shows_an_op(browser: Any, store: Path) -> None:
    with Page(browser) as p:
        p.page.goto(_report(store, "queue-partition"))
        label = p.page.locator("#timeline-window")
        assert "of 1,000 ops visible" in label.inner_text() or "ops visible" in label.inner_text()
        whole = label.inner_text()
        for _ in range(5):
            p.page.get_by_role("button", name="zoom in").click()
        zoomed = label.inner_text()
        assert zoomed != whole
        p.page.get_by_role("button", name="page ▶").click()
        assert label.inner_text() != zoomed
        # click along the first lanes until an op is hit
        canvas = p.page.locator("#timeline-canvas")
        box = canvas.bounding_box()
        assert box is not None and box["height"] > 60
        hit = False
        for y in (22 + 8 + 9, 22 + 8 + 27, 22 + 8 + 45):
            for x in range(80, int(box["width"]) - 10, 7):
                canvas.click(position={"x": x, "y": y})
                if p.page.locator("#timeline-details").inner_text().startswith("op "):
                    hit = True
                    break
            if hit:
                break
        details = p.page.locator("#timeline-details").inner_text()
        assert details.startswith("op ") and "process" in details
        p.page.locator("#processes").screenshot(path=str(ARTIFACTS / "report-timeline-zoomed.png"))
        assert p.errors == []


def test_report_without_anomalies(browser: Any, store: Path) -> None:
    with Page(browser) as p:
        p.page.goto(_report(store, "clean"))
        assert p.page.locator("#verdict").inner_text() == "valid"
        assert p.page.locator("#no-anomalies").is_visible()
        assert p.page.locator("svg.plot").count() == 2 and p.page.locator("svg.plot").first.is_visible()
        p.shot("report-clean.png")
        assert p.errors == []


def test_linearizability_failure_chart(browser: Any, store: Path) -> None:
    with Page(browser) as p:
        p.page.goto(_report(store, "lin"))
        chart = p.page.locator("svg.lin-chart").first
        assert chart.is_visible()
        assert chart.locator("g.op.stuck").count() == 2
        assert chart.locator("g.op.linearized").count() >= 10
        assert chart.locator("circle.lin-point").count() >= 10
        p.page.locator("#linearizability").screenshot(path=str(ARTIFACTS / "report-linearizability.png"))
        p.not_pwned()
        assert p.errors == []


def test_timeline_of_100k_ops_stays_responsive(browser: Any, tmp_path: Path) -> None:
    run = make_run(tmp_path / "store", name="big", seed=8, ops=100_000)
    write_report(run.path)
    with Page(browser) as p:
        started = time.monotonic()
        p.page.goto(run.path.joinpath("report.html").as_uri())
        p.page.locator("#timeline-window").wait_for()
        loaded = time.monotonic() - started
        assert "(aggregated per pixel)" in p.page.locator("#timeline-window").inner_text()
        started = time.monotonic()
        for _ in range(10):
            p.page.get_by_role("button", name="zoom in").click()
        p.page.get_by_role("button", name="whole run").click()
        interactions = time.monotonic() - started
        p.page.locator("#processes").screenshot(path=str(ARTIFACTS / "report-timeline-100k.png"))
        assert loaded < 10 and interactions < 10, (loaded, interactions)
        assert p.errors == []


@pytest.fixture
def served(store: Path) -> Iterator[str]:
    server = make_server(store, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.url
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_results_browser_index_filter_and_report(browser: Any, served: str) -> None:
    with Page(browser) as p:
        p.page.goto(served)
        rows = p.page.locator("#runs tbody tr")
        assert rows.count() == 3 and rows.first.is_visible()
        assert "lin" in rows.first.inner_text()  # newest first
        p.shot("serve-index.png")
        p.page.select_option("select[name=verdict]", "valid")
        p.page.get_by_role("button", name="filter").click()
        p.page.wait_for_url("**verdict=valid**")
        assert p.page.locator("#runs tbody tr").count() == 1
        p.page.goto(served)
        p.page.locator("#runs tbody tr", has_text="queue-partition").get_by_role("link", name="report").click()
        p.page.locator("#verdict").wait_for()
        assert p.page.locator("#verdict").inner_text() == "INVALID"
        p.page.get_by_role("link", name="history.jsonl").click()
        assert '"f":' in p.page.locator("body").inner_text() or '"f": ' in p.page.locator("body").inner_text()
        p.not_pwned()
        assert p.errors == []


def test_a_real_runs_fault_coverage_and_white_box_invariants(browser: Any, tmp_path: Path) -> None:
    """The corpus run that catches acks-all-isr-of-one, simulated for real: the report says
    which faults took effect, and shows the invariants checker's acknowledgement that fewer
    than min.insync.replicas held. The screenshots are the README's (docs/)."""
    import concurrent.futures
    import io

    from floodmark.run.runner import Runner
    from floodmark.run.swarm import swarm_config

    corpus = json.loads((Path(__file__).resolve().parents[1] / "chaos" / "corpus.json").read_text())
    entry = next(e for e in corpus["caught"] if e["variant"] == "acks-all-isr-of-one")
    config = swarm_config(int(entry["seed"]), entry["variant"]).replace(**entry.get("overrides", {}))
    # In a thread of its own: Playwright's sync API keeps an event loop running in this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        outcome = pool.submit(Runner(config, tmp_path, out=io.StringIO(), check=True, report=True).run).result()
    assert outcome.valid is False, outcome.error
    with Page(browser) as p:
        p.page.goto((outcome.run_dir.path / "report.html").as_uri())
        line = p.page.locator("#fault-coverage-line")
        assert line.is_visible() and line.inner_text().startswith("faults that took effect:")
        table = p.page.locator("#fault-coverage")
        assert table.is_visible() and 2 <= table.locator("tr").count() <= 1 + len(config.nemesis)  # kinds planned
        group = p.page.locator("details.group", has_text="acked-below-min-isr").first
        assert group.is_visible()
        assert group.locator("article.anomaly").first.is_visible()
        p.page.add_style_tag(content="nav.sections { position: static; }")  # not over the pictures
        p.page.locator("#top").screenshot(path=str(ARTIFACTS / "report-fault-coverage-header.png"))
        table.screenshot(path=str(ARTIFACTS / "report-fault-coverage.png"))
        group.locator("article.anomaly").first.screenshot(path=str(ARTIFACTS / "report-invariants.png"))
        assert p.errors == []
