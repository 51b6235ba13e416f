"""The wheel leaves Spark to the platform: no pyspark, pysail or delta-spark outside extras.

A cluster (Databricks Runtime 17, spark-submit on Spark 4) provides its own pyspark and Delta;
installing binlake there must not replace them. The wheel is built from this checkout, its
metadata read, then installed without extras into a fresh venv (not one that sees this venv's
packages): the engine-free commands work, a stage says what it misses, and once a pyspark is
provided — as a cluster would — every module imports and every stage's entry point parses.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ("pyspark", "pysail", "delta-spark")
STAGES = ("bronze", "silver", "gold", "stream")


def _name(requirement: str) -> str:
    head = requirement.split(";")[0].strip()
    for stop in "[<>=!~ (":
        head = head.split(stop)[0]
    return head.lower().replace("_", "-")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built from a copy (the build leaves no files behind)."""
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(ROOT / "pipelines", src / "pipelines",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("binlake-*.whl")
    return whl


def _metadata(whl: Path):
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        entry = next(n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))
        return Parser().parsestr(z.read(meta).decode()), z.read(entry).decode()


def test_wheel_requires_no_engine_outside_extras(wheel: Path) -> None:
    meta, entry_points = _metadata(wheel)
    requires = meta.get_all("Requires-Dist")
    core = [r for r in requires if "extra ==" not in r]
    assert core and not [r for r in core if _name(r) in ENGINES], core
    local = {_name(r) for r in requires if 'extra == "local"' in r}
    assert set(ENGINES) <= local, requires
    assert {"local", "connect", "test"} <= set(meta.get_all("Provides-Extra"))
    for script in ("binlake", *(f"binlake-{s}" for s in STAGES)):
        assert f"{script} = pipelines." in entry_points


def _provided_pyspark() -> list[str]:
    """pip arguments installing the pyspark this venv runs, as a cluster provides it: the
    wheel pip built for it when cached, else from PyPI."""
    import pyspark

    version = pyspark.__version__
    cache = os.path.expanduser("~/.cache/pip/wheels")
    found = glob.glob(f"{cache}/**/pyspark-{version}-*.whl", recursive=True)
    return [found[0]] if found else [f"pyspark=={version}"]


@pytest.mark.packaging
def test_core_install_runs_without_spark_then_every_stage_under_a_provided_pyspark(
        wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")

    def run(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                              cwd=tmp_path, env={k: v for k, v in os.environ.items()
                                                 if k not in ("PYTHONPATH", "SPARK_HOME")})

    proc = run(py, "-m", "pip", "install", "-q", str(wheel))
    assert proc.returncode == 0, proc.stderr[-3000:]
    listed = run(py, "-m", "pip", "list", "--format", "freeze").stdout.lower()
    assert not [e for e in ENGINES if f"\n{e}==" in "\n" + listed.replace("_", "-")], listed

    # Core only: the engine-free commands work; a stage names what it misses.
    sample = ROOT / "samples" / "binlogs" / "mariadb-bin.000001"
    proc = run(str(venv / "bin" / "binlake"), "decode", str(sample))
    assert proc.returncode == 0 and "FORMAT_DESCRIPTION" in proc.stdout, proc.stderr
    proc = run(str(venv / "bin" / "binlake"), "--lake", str(tmp_path / "lake"), "index",
               "--binlog-dir", str(sample.parent), "--all")  # a stage that may create the lake
    assert proc.returncode == 1 and proc.stderr == (
        "binlake: error: the embedded engine needs the pysail package (pip install pysail)\n"
    ), proc.stderr

    # A provided pyspark (what the cluster brings): every module imports, every stage parses.
    proc = run(py, "-m", "pip", "install", "-q", *_provided_pyspark())
    assert proc.returncode == 0, proc.stderr[-3000:]
    # (scripts: ``__main__`` modules run the CLI, ``_worker_boot`` prepares a worker)
    proc = run(py, "-c", "import pkgutil, importlib, pipelines\n"
                         "for m in pkgutil.walk_packages(pipelines.__path__, 'pipelines.'):\n"
                         "    if not m.name.endswith(('__main__', '_worker_boot')):\n"
                         "        importlib.import_module(m.name)\n"
                         "print('imported', m.name)")
    assert proc.returncode == 0 and "imported" in proc.stdout, proc.stderr[-3000:]
    for stage in STAGES:
        proc = run(py, "-m", f"pipelines.{stage}", "--help")
        assert proc.returncode == 0 and f"binlake {stage}" in proc.stdout, proc.stderr
        proc = run(str(venv / "bin" / f"binlake-{stage}"), "--help")
        assert proc.returncode == 0, proc.stderr
