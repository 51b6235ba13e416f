"""bench/pipeline.py's process-tree meter: what a stage's peak memory counts.

A whole command's figure is its own process tree: not the bench's process (which holds an
engine of its own) and not processes that were already there (idle decoding workers). Real
child processes that touch a known amount of memory are the referee.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
MiB = 2**20

def _bench():
    """bench/pipeline.py as a module (bench/ is not a package)."""
    mod = sys.modules.get("bench_pipeline")
    if mod is None:
        spec = importlib.util.spec_from_file_location("bench_pipeline",
                                                      REPO / "bench" / "pipeline.py")
        mod = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses
        spec.loader.exec_module(mod)
    return mod


def _holder(mib: int, seconds: float) -> list[str]:
    """A Python child that touches ``mib`` MiB, says so, and holds them ``seconds``."""
    return [sys.executable, "-c",
            f"import sys, time; b = bytearray({mib} * 2**20); print('held', flush=True); "
            f"time.sleep({seconds})"]


def test_a_commands_peak_is_its_own_process_tree_only():
    bench = _bench()
    idle = subprocess.Popen(_holder(120, 30), stdout=subprocess.PIPE, text=True)
    other = None
    try:
        assert idle.stdout.readline().strip() == "held"  # there before the stage starts
        with bench.TreeMeter(commands=True) as meter:
            # another child of this process, started while the command runs (the bench's
            # own decoding workers may be): not the command's
            other = subprocess.Popen(_holder(80, 30), stdout=subprocess.PIPE, text=True)
            assert other.stdout.readline().strip() == "held"
            done = bench._run_command(_holder(100, 1.5), stdout=subprocess.PIPE, text=True)
            assert done.returncode == 0 and done.stdout.strip() == "held"
        # the command's 100 MiB and its interpreter; not the other children's 120 and 80 MiB,
        # not this process (pytest with pyarrow and pyspark imported holds far more)
        assert 100 * MiB <= meter.peak < 140 * MiB, meter.peak / MiB
        assert not bench.RUNNING  # the command is done
        with bench.TreeMeter() as whole:  # a stage in this process: itself and its children
            time.sleep(1.2)
        assert whole.peak >= 200 * MiB, whole.peak / MiB  # the two other children at least
    finally:
        for child in (idle, other):
            if child is not None:
                child.kill()
                child.wait()


def test_runs_that_start_commands_are_measured_as_commands(tmp_path):
    bench = _bench()
    runs = [bench._mariadb_binlog([], 0),
            bench._index_command(tmp_path / "lake", tmp_path, 0),
            bench._small_command(tmp_path, [str(tmp_path / "x.000001")], iter([1]), None),
            *bench._stage_commands(tmp_path / "lake", tmp_path, 0)]
    assert [getattr(r, "command", False) for r in runs] == [True] * 5
