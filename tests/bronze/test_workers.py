"""When bronze's decoding worker processes start (``bronze/job.py``: ``start_decoders``).

``binlake bronze``/``index`` start the workers' server before the engine, so that it boots
(~0.5 s of imports, more with the compiled loop) on the other core while the command starts
the engine; a run over less than ``bronze.inline_max_mb`` decodes in the task's own process
and starts no worker at all, and fails a file on a decoder bug as a dying worker would. Each
case runs on the embedded engine in a fresh interpreter (the server is per process), with a
spy on ``get_spark`` noting whether the server was running when the engine was asked for.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.python_run import run_python

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent.parent

_SCRIPT = r"""
import json, sys
from multiprocessing import forkserver as fs
import pipelines.engine.session as session
from pipelines.cli.main import main

def running():
    return fs._forkserver._forkserver_pid is not None

seen = []
real = session.get_spark
def spy(*args, **kwargs):
    seen.append(running())
    return real(*args, **kwargs)
session.get_spark = spy
code = main(sys.argv[1:])
print(json.dumps({"code": code, "at_engine": seen[0], "after": running()}))
"""


def _bronze(tmp_path: Path, inline_max_mb: float) -> dict:
    env = {**os.environ, "BINLAKE_BRONZE_INLINE_MAX_MB": str(inline_max_mb)}
    out = run_python(_SCRIPT, "--lake", str(tmp_path / f"lake{inline_max_mb}"), "bronze",
                     "--binlog-dir", str(REPO / "samples" / "binlogs"), "--all", env=env)
    lines = out.stdout.strip().splitlines()
    assert "bronze: 5 file(s), 340 row changes" in out.stdout, out.stdout
    return json.loads(lines[-1])


def test_workers_start_before_the_engine(tmp_path: Path) -> None:
    # The sample binlogs (200 KB) with inline_max_mb = 0: every run decodes in workers.
    got = _bronze(tmp_path, 0)
    assert got == {"code": 0, "at_engine": True, "after": True}


def test_a_small_run_decodes_without_workers(tmp_path: Path) -> None:
    # The same files under the default 4 MB: decoded in the task's process, no server.
    got = _bronze(tmp_path, 4)
    assert got == {"code": 0, "at_engine": False, "after": False}


_LOADS = r"""
import json, sys
from pipelines.binlog.fast import rowkernel
from pipelines.cli.main import main
from pipelines.silver import render_warm

code = main(sys.argv[1:])
print(json.dumps({"code": code, "silver_loops": render_warm._STARTED is not None,
                  "row_loop": rowkernel.warmed()}))
"""


def test_compiled_loops_load_for_the_files_left_to_index(tmp_path: Path) -> None:
    """``index --all`` over a directory whose big files are indexed already (a scheduled
    job's run) loads no compiled loop for the small new one; the first run, which decodes
    them, loads both. "Big" is 50 KB here (both thresholds lowered)."""
    d = tmp_path / "binlogs"
    d.mkdir()
    for p in (REPO / "samples" / "binlogs").glob("mariadb-bin.00000[1-3]"):
        shutil.copy(p, d / p.name)
    env = {**os.environ, "BINLAKE_SILVER_COMPILED_MIN_MB": "0.05",
           "BINLAKE_BRONZE_COMPILED_MIN_MB": "0.05"}

    def index() -> dict:
        out = run_python(_LOADS, "--lake", str(tmp_path / "lake"), "index", "--binlog-dir",
                         str(d), "--all", env=env)
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert index() == {"code": 0, "silver_loops": True, "row_loop": True}
    shutil.copy(REPO / "samples" / "binlogs" / "mariadb-bin.000004", d)  # 2.3 KB, 11 rows
    assert index() == {"code": 0, "silver_loops": False, "row_loop": False}


_FAULT = r"""
import json, sys
from pipelines.bronze import records
from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.engine.session import get_spark

real = records.BronzeBatcher.add
def add(self, event):  # a decoder bug in one file (fault injection: no worker to die)
    if self.binlog_file == "mariadb-bin.000002":
        raise RuntimeError("injected decoder bug")
    return real(self, event)
records.BronzeBatcher.add = add
cfg = load_config(env={}, overrides={"lake.root": sys.argv[1]})
res = run_bronze(get_spark(cfg.engine), cfg, binlog_dir=sys.argv[2], all_files=True)
print(json.dumps({f.binlog_file: [f.status, f.row_changes, f.error] for f in res.files}))
"""


def test_a_decoder_bug_in_the_task_fails_only_its_file(tmp_path: Path) -> None:
    """Decoded in the task (a small run), an unexpected error ends that file's chunk with its
    ERROR row as a dying worker would: the other file still commits, the run completes."""
    d = tmp_path / "binlogs"
    d.mkdir()
    for name in ("mariadb-bin.000002", "mariadb-bin.000003"):
        shutil.copy(REPO / "samples" / "binlogs" / name, d / name)
    out = run_python(_FAULT, str(tmp_path / "lake"), str(d))
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["mariadb-bin.000003"] == ["completed", 295, None]
    status, _, error = got["mariadb-bin.000002"]
    assert status == "failed" and error == "decoder failed: RuntimeError: injected decoder bug"
