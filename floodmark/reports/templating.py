"""Rendering HTML safely: the Jinja2 environment shared by the report and the results browser.

Everything a report shows may come from a history, and a history records whatever clients
sent, so every template autoescapes. Two things are not plain text and are handled here
once: data handed to the page's scripts, serialised as JSON inside a non-executing
``<script type="application/json">`` block with ``<``, ``>``, ``&`` and the JavaScript line
separators escaped (so no payload can close the block), and the page's own CSS/JS, read
from ``static/`` and inlined so the report is one file that needs no network.

The report also carries a Content-Security-Policy that lets only its own inline scripts
run (by hash): a second wall behind escaping, not a replacement for it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from floodmark.contracts.results import verdict_word

_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                 0x2028: "\\u2028", 0x2029: "\\u2029"}


def json_for_script(value: Any) -> Markup:
    """JSON that is safe inside ``<script type="application/json">``."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str, allow_nan=False)
    return Markup(text.translate(_JSON_ESCAPES))


@cache
def static_text(name: str) -> str:
    """A file from floodmark/reports/static (our own CSS or JavaScript)."""
    return resources.files("floodmark.reports").joinpath("static", name).read_text(encoding="utf-8")


def script_hash(source: str) -> str:
    """The CSP source expression allowing exactly this inline script."""
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("floodmark.reports", "templates"),
        autoescape=select_autoescape(["html", "j2", "xml"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["json_for_script"] = json_for_script
    env.filters["seconds"] = format_seconds
    env.filters["verdict_class"] = verdict_word
    env.filters["verdict_text"] = verdict_text
    return env


def format_seconds(value: Any) -> str:
    if not isinstance(value, int | float):
        return "—"
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"


def verdict_text(valid: Any) -> str:
    return {"valid": "valid", "invalid": "INVALID", "unknown": "unknown",
            "unchecked": "not checked"}[verdict_word(valid)]
