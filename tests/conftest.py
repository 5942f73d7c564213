"""Shared pytest configuration.

Tests that need real infrastructure (root, Docker, Java, Chromium) skip with a reason when it
is missing; CI installs all of it, and ``FLOODMARK_REQUIRE_ALL=1`` (set by .ci/run) turns
those skips into failures so nothing is silently skipped there.
"""

from __future__ import annotations

import os

import pytest


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    if os.environ.get("FLOODMARK_REQUIRE_ALL") != "1" or call.excinfo is None:
        return
    if call.excinfo.errisinstance(pytest.skip.Exception):
        reason = str(call.excinfo.value)
        raise AssertionError(f"{item.nodeid} skipped in CI where everything must run: {reason}")
