"""A Spark Connect session on the JVM server (delta-spark) next to the embedded Sail session.

``delta_spark`` is a session-scoped fixture: tests use it to read, append to and time-travel
lakes with delta-spark in-process (``SparkSession.builder.remote(url).create()``) while the
``spark`` fixture stays the embedded engine.
"""

from __future__ import annotations

import pytest

__all__ = ["delta_spark"]


@pytest.fixture(scope="session")
def delta_spark(spark_connect_url):
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(spark_connect_url).create()
    yield session
    session.stop()
