"""Run ``binlake`` as real subprocesses on a lake, and check the lake's exactly-once facts.

The checks read the tables with the test's engine and compare bronze with the files'
states and silver with bronze: they are statements about the data, not about our logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "binlogs"
SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("mariadb-bin.0*"))
KEY = ["source_id", "binlog_file", "start_pos", "row_in_event"]

__all__ = ["ROOT", "SAMPLES", "SAMPLE_FILES", "KEY", "binlake", "start", "finish", "together",
           "hold_lease", "bronze_of_sample",
           "assert_bronze_once", "assert_silver_once", "delta_creates", "wait_for", "stop_server",
           "start_server_again"]


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    # The test's own Spark Connect session marks the environment; a child picks its engine.
    env = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")
           and k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


def start(lake: Path, *args: str, env: dict[str, str] | None = None,
          engine: str | None = None) -> subprocess.Popen:
    """``python -m pipelines.cli.main --lake LAKE --wait 600 ARGS`` started, not waited for (a
    loaded machine may take long; a ``--wait`` in ARGS wins)."""
    cmd = [sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake), "--wait", "600"]
    if engine:
        cmd += ["--engine", engine]
    return subprocess.Popen(cmd + list(args), cwd=lake.parent, env=_env(env), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen, timeout: float = 900) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # never leave a run behind the failing test
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args}: still running after {timeout:.0f}s\n{out}\n"
                             f"{err[-3000:]}") from None
    return proc.returncode, out, err


def binlake(lake: Path, *args: str, env: dict[str, str] | None = None,
            engine: str | None = None, timeout: float = 900) -> tuple[int, str, str]:
    return finish(start(lake, *args, env=env, engine=engine), timeout)


def together(lake: Path, commands: Sequence[Sequence[str]], *,
             env: dict[str, str] | None = None, engine: str | None = None
             ) -> list[tuple[int, str, str]]:
    """Start every command at the same moment (back to back) and wait for all."""
    procs = [start(lake, *c, env=env, engine=engine) for c in commands]
    return [finish(p) for p in procs]


_HOLD = """
import sys, time
from pipelines.config import load_config
from pipelines.lake.lease import lake_lease
cfg = load_config(env={}, overrides={"lake.root": sys.argv[1]})
with lake_lease(cfg, sys.argv[2], "test holder of " + sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


def hold_lease(lake: Path, stage: str) -> subprocess.Popen:
    """A process holding ``stage``'s lease on ``lake`` (command 'test holder of STAGE') until
    killed; returned once it holds it."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(lake), stage],
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), text=True,
                            stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == "held"
    return proc


def bronze_of_sample(spark, tmp_path: Path, name: str):
    """The config of a lake under ``tmp_path`` whose bronze holds the sample binlog ``name``
    (copied to ``tmp_path/binlogs``), indexed in this process by ``spark``."""
    import shutil

    from pipelines.bronze.job import run_bronze
    from pipelines.config import load_config

    d = tmp_path / "binlogs"
    d.mkdir()
    shutil.copy(SAMPLES / name, d / name)
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    assert not run_bronze(spark, cfg, binlog_dir=str(d), all_files=True).failed
    return cfg


def wait_for(predicate, timeout: float = 60.0, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return False


def _rows(spark, path: Path, cols: Sequence[str], where: str | None = None) -> list[tuple]:
    df = spark.read.format("delta").load(str(path))
    if where:
        df = df.where(where)
    return [tuple(r) for r in df.select(*cols).collect()]


def assert_bronze_once(spark, lake: Path, files: Sequence[str]) -> int:
    """No bronze key twice; every file ``completed`` with the row changes bronze holds."""
    from pipelines.bronze.files import load_states
    from pipelines.lake.tables import Lake

    keys = _rows(spark, lake / "bronze" / "binlog_events", KEY)
    assert len(keys) == len(set(keys)), "a bronze key appears twice"
    changes = _rows(spark, lake / "bronze" / "binlog_events", ["binlog_file"],
                    "event_type IN ('INSERT', 'UPDATE', 'DELETE')")
    states = load_states(spark, Lake(str(lake)))
    assert sorted(n for _, n in states) == sorted(files)
    for (_, name), st in states.items():
        assert st.status == "completed", (name, st)
        assert st.row_changes == sum(1 for (f,) in changes if f == name), name
    ends = _rows(spark, lake / "bronze" / "binlog_events", ["binlog_file"], "event_type = 'END'")
    assert sorted(f for (f,) in ends) == sorted(files), "one END row per file"
    return len(changes)


def assert_silver_once(spark, lake: Path) -> int:
    """Silver holds each bronze row change exactly once (quarantine included)."""
    bronze = set(_rows(spark, lake / "bronze" / "binlog_events", KEY,
                       "event_type IN ('INSERT', 'UPDATE', 'DELETE')"))
    silver = _rows(spark, lake / "silver" / "binlog_events", KEY)
    assert len(silver) == len(set(silver)), (
        f"{len(silver) - len(set(silver))} silver rows are duplicates")
    held = set(silver)
    qpath = lake / "silver" / "quarantine"
    if (qpath / "_delta_log").is_dir():
        q = _rows(spark, qpath, KEY)
        assert len(q) == len(set(q)) and not set(q) & held
        held |= set(q)
    assert held == bronze
    return len(silver)


def delta_creates(table: Path) -> int:
    """How many commits of the table carry a ``metaData`` action with a new table id."""
    ids = set()
    for f in sorted((table / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                ids.add(action["metaData"]["id"])
    return len(ids)


def stop_server(server) -> None:
    """Stop a running :class:`MariaDBServer` cleanly, keeping its data dir and port."""
    import signal

    proc = server._proc
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    server._proc = None


def start_server_again(server) -> None:
    """Start a server stopped by :func:`stop_server` on the same port and data dir."""
    from devtools.mariadb import find_mariadbd

    server._spawn(find_mariadbd())
