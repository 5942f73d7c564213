"""A local Spark session for tests, or a skip saying what is missing."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Spark tests need Java 17 (`java` not on PATH)")
    pyspark = pytest.importorskip("pyspark", reason="Spark tests need PySpark (pip install pyspark)")
    del pyspark
    from floodmark.pipeline.session import get_session

    session = get_session("local[2]", app_name="floodmark-tests", progress=False)
    yield session
    session.stop()
