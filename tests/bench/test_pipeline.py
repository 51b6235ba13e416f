"""bench/pipeline.py's scale stages, run whole over the sample binlogs.

``large-file`` indexes the input's last file once more, numbered after it, into an empty lake
and after the history the ``index`` stage left (the input named relative to the working
directory, as a user types it); both must index that file's row changes
(295 in ``samples/binlogs/mariadb-bin.000003``, counted by ``mariadb-binlog -v``).
``batch`` indexes every input file once more in one run, the same way: the row changes the
``index`` stage indexed. ``many-runs`` makes ``--runs`` runs of the small file (295 row
changes each) on a copy of the history before its measured run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples" / "binlogs"


def _bench(tmp_path: Path, stages: str, *extra: str) -> str:
    """bench/pipeline.py's output over the three sample binlogs (linked into ``in``, named
    relative to the working directory), the run checked to succeed."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for n in (1, 2, 3):
        os.symlink(SAMPLES / f"mariadb-bin.00000{n}", inputs / f"mariadb-bin.00000{n}")
    done = subprocess.run([sys.executable, str(REPO / "bench" / "pipeline.py"),
                           "--binlog-dir", "in", "--stages", stages, *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    return out


def test_large_file_stage_indexes_the_last_file_again(tmp_path: Path) -> None:
    out = _bench(tmp_path, "index,large-file")
    for stage in ("large file, empty lake", "large file after the history"):
        assert f"{stage}: 295 rows in" in out, out[-3000:]
    assert "| large file after the history |" in out and "x large file, empty lake |" in out


def test_batch_stage_indexes_the_input_again(tmp_path: Path) -> None:
    out = _bench(tmp_path, "index,batch")
    (rows,) = re.findall(r"index \(bronze\+silver\+quality\): ([\d,]+) rows in", out)
    assert int(rows.replace(",", "")) > 295  # three files
    for stage in ("batch, empty lake", "batch after the history"):
        assert f"{stage}: {rows} rows in" in out, out[-3000:]
    assert "| batch after the history |" in out and "x batch, empty lake |" in out


def test_many_runs_stage_indexes_after_the_runs_it_made(tmp_path: Path) -> None:
    out = _bench(tmp_path, "index,small-file,many-runs", "--runs", "3")
    assert out.count("many-runs: 3 runs of 885 row changes made") == 1, out[-3000:]
    assert "small file after 3 more runs: 295 rows in" in out, out[-3000:]
    assert ("| small file after 3 more runs |" in out
            and "x small file after the history |" in out), out[-3000:]


def test_engine_writer_and_key_history_stages_compare_the_writers(tmp_path: Path) -> None:
    """``engine-writer`` runs bronze and silver again with the engine's Delta writer, and
    ``key-history`` looks keys up in a silver written each way: with binlake's tasks (a
    ``pk_hash`` bloom filter) a key silver does not hold reads no row group."""
    out = _bench(tmp_path, "silver,engine-writer,key-history")
    assert "| bronze, the engine's writer |" in out and "x bronze |" in out, out[-3000:]
    assert "| silver, the engine's writer |" in out and "x silver |" in out, out[-3000:]
    tasks = re.search(r"^\| binlake's tasks \| (\d+) \| (\d+) \| ([\d.]+); (\d+) \|", out, re.M)
    engine = re.search(r"^\| the engine's writer \| (\d+) \| (\d+) \| ([\d.]+); (\d+) \|", out,
                       re.M)
    assert tasks and engine, out[-3000:]
    assert float(tasks.group(3)) >= 1 and tasks.group(4) == "0", out[-3000:]
