"""Run ``binlake`` as a subprocess on one of the three engines the matrix proves.

``sail`` is the embedded default, ``spark`` a local JVM Spark with delta-spark
(``--engine spark``), ``connect`` the JVM Spark Connect server of
:mod:`tests.support.spark_connect` (``--spark-remote sc://127.0.0.1:PORT``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["ENGINES", "engine_flags", "binlake", "binlake_popen"]

ENGINES = ("sail", "spark", "connect")
REPO = Path(__file__).resolve().parents[2]


def engine_flags(engine: str, connect_url: str | None = None) -> list[str]:
    if engine == "connect":
        assert connect_url, "the connect engine needs the spark_connect_url fixture"
        return ["--spark-remote", connect_url]
    return ["--engine", engine]


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def _cmd(flags: list[str], lake: Path, args: tuple[str, ...]) -> list[str]:
    return [sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake), *flags, *args]


def binlake(flags: list[str], lake: Path, *args: str, env: dict[str, str] | None = None,
            expect: int | None = 0, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run one ``binlake`` command; assert its exit code (``expect=None``: any)."""
    proc = subprocess.run(_cmd(flags, lake, args), capture_output=True, text=True,
                          env=_env(env), timeout=timeout, cwd=REPO)
    if expect is not None:
        assert proc.returncode == expect, (
            f"binlake {' '.join(flags + list(args))} exited {proc.returncode}, "
            f"expected {expect}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def binlake_popen(flags: list[str], lake: Path, *args: str,
                  env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``binlake`` in its own process group (for kill -9 tests)."""
    return subprocess.Popen(_cmd(flags, lake, args), env=_env(env), cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
