"""Run a snippet of Python in a fresh interpreter of this venv, from the repository root.

For what one test process cannot show: a process's first imports and loads, its threads,
its environment at start, a second engine session beside the test's own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["REPO", "run_python"]

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, *args: str, env: dict[str, str] | None = None,
               timeout: float = 600, expect: int = 0) -> subprocess.CompletedProcess:
    """``python -c code args…`` (cwd: the repository; ``env``: the whole environment, default
    this one), its output captured as text. Fails the test, with the tail of its stderr,
    unless it exits with ``expect``."""
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == expect, f"exit {done.returncode}: {done.stderr[-3000:]}"
    return done
