"""The analysis summary: aggregate tables as Parquet, CSV and one self-contained HTML page.

Tables are small by the time they get here (one row per group), so they are collected to the
driver and rendered with Jinja2 (autoescaped: test names and explanations come from runs).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from pyspark.sql import DataFrame


def write_table(frame: DataFrame, out: Path, name: str) -> list[dict[str, Any]]:
    """Write one aggregate as Parquet and CSV under ``out/tables``; return its rows."""
    target = out / "tables"
    frame = frame.coalesce(1)
    frame.write.mode("overwrite").parquet(str(target / f"{name}.parquet"))
    rows = [r.asDict(recursive=True) for r in frame.collect()]
    _write_csv(target / f"{name}.csv", frame.columns, rows)
    return rows


def _write_csv(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def render_summary(out: Path, store: Path, tables: dict[str, list[dict[str, Any]]],
                   notes: list[str]) -> Path:
    env = Environment(loader=PackageLoader("floodmark.pipeline", "templates"),
                      autoescape=select_autoescape(["html", "j2"]))
    env.filters["cell"] = _cell
    page = env.get_template("summary.html.j2").render(
        store=str(store), generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        tables=tables, notes=notes,
    )
    path = out / "summary.html"
    path.write_text(page, encoding="utf-8")
    return path


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)
