"""Shared fixtures: one embedded Spark session (Sail) for the whole run, the corpus, MariaDB."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.fixtures import *  # noqa: F403 - the `mariadb` server fixture
from tests.support.jvm_session import delta_spark  # noqa: F401 - delta-spark over Connect
from tests.support.spark_connect import spark_connect_url  # noqa: F401 - JVM Spark Connect

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
if not CORPUS.is_dir():  # CI clones main beside shared/
    CORPUS = Path(os.environ.get("BINLAKE_CORPUS", "../shared/corpus")).resolve()


_JVM_FIXTURES = {"jvm_spark", "delta_spark", "spark_connect_url", "classic"}
_JVM_ENGINES = ("[spark]", "[connect]", "[sail-spark]", "[spark-sail]")


def pytest_collection_modifyitems(config, items) -> None:
    """Mark ``jvm`` every test that starts a JVM Spark: it uses a JVM fixture, is marked
    ``classic``, or is a JVM leg of the engine matrix. ``make test`` leaves them to
    ``make test-jvm`` (CI runs both, and ``make test-pairs``), which keeps ``make test`` short
    on 2 cores."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if (names & _JVM_FIXTURES or item.get_closest_marker("classic")
                or (item.get_closest_marker("matrix") and item.name.endswith(_JVM_ENGINES))
                or item.get_closest_marker("packaging") and "provided_pyspark" in item.name):
            item.add_marker(pytest.mark.jvm)
    # The object-store tests last: on a fresh machine `make test` builds MinIO meanwhile
    # (Makefile: minio-background; devtools/minio.py waits for the build).
    items.sort(key=lambda item: item.get_closest_marker("minio") is not None)


@pytest.fixture(scope="session")
def spark():
    """The embedded engine, started once (``pipelines.engine.session.get_spark``)."""
    from pipelines.config import EngineConfig
    from pipelines.engine.session import get_spark

    return get_spark(EngineConfig())


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not (CORPUS / "MANIFEST.md").is_file():
        pytest.fail(f"binlog corpus not found at {CORPUS} (expected ../shared/corpus)")
    return CORPUS


@pytest.fixture
def unique_pass_counts(monkeypatch) -> list[int]:
    """Quality's uniqueness counts, watched: how many grouped passes each rule's count took,
    in the order the rules were counted."""
    from pipelines.quality import checks

    passes: list[int] = []
    real = checks._unique_counts

    def spy(rule, groups):
        passes.append(len(groups))
        return real(rule, groups)

    monkeypatch.setattr(checks, "_unique_counts", spy)
    return passes


def manifest_entries(corpus_dir: Path = CORPUS) -> list[dict]:
    """Per corpus file: its path and the facts MANIFEST.md states (independent walker)."""
    text = (corpus_dir / "MANIFEST.md").read_text()
    out = []
    for name, body in re.findall(r"### `([^`]+)`(.*?)(?=\n### |\n## |\Z)", text, re.S):
        path = corpus_dir / name
        events = re.search(r"\* Events: (\d+)", body)
        hist = re.search(r"histogram: ([^\n]+)", body)
        out.append({
            "name": name,
            "path": path,
            "events": int(events.group(1)) if events else None,
            "histogram": dict(re.findall(r"([A-Z_0-9()\-a-z]+)\(\d+\)=(\d+)", hist.group(1)))
            if hist else {},
            "checksum": re.search(r"Checksum: \*\*(\w+)\*\*", body).group(1)
            if re.search(r"Checksum: \*\*(\w+)\*\*", body) else None,
            "body": body,
        })
    return out
