"""binlake's processes allocate Arrow memory with malloc and cap glibc's arenas
(``pipelines/engine/memory.py``); a user's ``ARROW_DEFAULT_MEMORY_POOL`` / ``MALLOC_ARENA_MAX`` win."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.python_run import run_python

REPO = Path(__file__).resolve().parents[2]

_PROBE = """
import pyarrow as pa
from pipelines.engine.memory import limit_malloc_arenas, release_freed_memory, use_system_allocator
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
from pipelines.engine.session import get_spark
get_spark(load_config(env={}).engine)
print(pa.default_memory_pool().backend_name)
"""
    worker = """
import pyarrow as pa
from pipelines.engine.workers import prepare_process
prepare_process()
print(pa.default_memory_pool().backend_name)
"""
    assert _run(engine).splitlines()[-1] == "system"
    assert _run(worker) == "system"


# An 8 MiB block malloc'd and freed, then a 6 MiB one: where does the 6 MiB block come from?
# mallinfo2 (glibc 2.33+) counts the mapped blocks' bytes (hblkhd). By default glibc raised its
# threshold to 8 MiB on the free, so the 6 MiB block comes from the arena; with the threshold
# fixed it is mapped (and unmapped when freed).
_MAPPED = """
import ctypes, ctypes.util, sys
class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = Mallinfo2
if sys.argv[1] == "engine":
    from pipelines.config import load_config
    from pipelines.engine.session import get_spark
    get_spark(load_config(env={}).engine)
elif sys.argv[1] == "fixed":
    from pipelines.engine.memory import fix_mmap_threshold
    fix_mmap_threshold()
libc.free(libc.malloc(8 << 20))
before = libc.mallinfo2().hblkhd
block = libc.malloc(6 << 20)
print(libc.mallinfo2().hblkhd - before >= 6 << 20)
"""


def _mapped(how: str, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    full.update(env, PYTHONPATH=str(REPO))
    return run_python(_MAPPED, how, env=full, timeout=120).stdout.strip().splitlines()[-1]


def test_freed_batches_do_not_raise_the_mmap_threshold_in_the_engines_process() -> None:
    assert _mapped("default") == "False"  # glibc's own behaviour, which the fix turns off
    assert _mapped("fixed") == "True"
    assert _mapped("engine") == "True"  # the embedded engine's process fixes it at start
    # a user's MALLOC_MMAP_THRESHOLD_ still decides
    assert _mapped("fixed", MALLOC_MMAP_THRESHOLD_=str(64 << 20)) == "False"
