"""Engines that start on a fresh machine: the Delta jars ``make setup`` fetches with Maven,
and one clear error naming ``engine.delta_jars`` when there are none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.engine import session
from pipelines.config import EngineConfig
from pipelines.errors import EngineError

REPO = Path(__file__).resolve().parents[2]
FETCH = REPO / "scripts" / "fetch_delta_jars.py"


def test_fetch_copies_the_jars_matching_delta_spark(tmp_path: Path) -> None:
    from importlib.metadata import version

    dest = tmp_path / "jars"
    out = subprocess.run([sys.executable, str(FETCH), str(dest)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    names = sorted(p.name for p in dest.glob("*.jar"))
    assert f"delta-spark_2.13-{version('delta-spark')}.jar" in names
    assert f"delta-storage-{version('delta-spark')}.jar" in names
    # Nothing pyspark ships already (one Scala library, one SLF4J on the class path).
    assert not [n for n in names if n.startswith(("scala-library", "slf4j", "log4j"))], names
    jars = session.delta_jar_paths(EngineConfig(kind="spark", delta_jars=str(dest)))
    assert sorted(Path(j).name for j in jars) == names


def test_fetch_without_maven_access_names_engine_delta_jars(tmp_path: Path) -> None:
    dest = tmp_path / "jars"
    out = subprocess.run([sys.executable, str(FETCH), str(dest), "--", "--offline",
                          f"-Dmaven.repo.local={tmp_path / 'empty-m2'}"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode != 0
    assert "engine.delta_jars" in out.stderr and "io.delta:delta-spark" in out.stderr
    assert not dest.exists()


def test_no_jars_and_no_cache_is_one_error_naming_the_setting(monkeypatch) -> None:
    monkeypatch.setattr(session, "default_delta_jars_dir", lambda: None)
    with pytest.raises(EngineError, match=r"engine\.delta_jars is not set.*make setup"):
        session._local_spark(EngineConfig(kind="spark"))


def test_a_directory_without_delta_spark_is_named(tmp_path: Path) -> None:
    (tmp_path / "other.jar").write_bytes(b"PK")
    with pytest.raises(EngineError, match=r"engine\.delta_jars: no delta-spark_\*\.jar"):
        session.delta_jar_paths(EngineConfig(kind="spark", delta_jars=str(tmp_path)))


def test_the_make_setup_cache_is_the_default() -> None:
    cache = session.default_delta_jars_dir()
    assert cache is not None, "no Delta jar cache: run `make setup`"
    assert session.delta_jar_paths(EngineConfig(kind="spark")) == sorted(
        str(p) for p in cache.glob("*.jar"))
