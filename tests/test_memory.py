"""binlake's processes allocate Arrow memory with malloc and cap glibc's arenas
(``pipelines/memory.py``); a user's ``ARROW_DEFAULT_MEMORY_POOL`` / ``MALLOC_ARENA_MAX`` win."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.python_run import run_python

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import pyarrow as pa
from pipelines.memory import limit_malloc_arenas, release_freed_memory, use_system_allocator
use_system_allocator()
limit_malloc_arenas()
release_freed_memory()
print(pa.default_memory_pool().backend_name)
"""


def _run(code: str, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    full.update(env, PYTHONPATH=str(REPO))
    return run_python(code, env=full, timeout=120).stdout.strip()


def test_arrow_allocates_with_malloc_unless_the_user_chose() -> None:
    assert _run(_PROBE) == "system"
    assert _run(_PROBE, ARROW_DEFAULT_MEMORY_POOL="jemalloc") == "jemalloc"


def test_the_embedded_engine_process_and_the_workers_use_malloc() -> None:
    engine = """
import pyarrow as pa
from pipelines.config import load_config
from pipelines.session import get_spark
get_spark(load_config(env={}).engine)
print(pa.default_memory_pool().backend_name)
"""
    worker = """
import pyarrow as pa
from pipelines.workers import prepare_process
prepare_process()
print(pa.default_memory_pool().backend_name)
"""
    assert _run(engine).splitlines()[-1] == "system"
    assert _run(worker) == "system"
