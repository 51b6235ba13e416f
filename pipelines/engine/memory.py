"""Give memory the process freed back to the operating system: after each bronze commit,
and when a silver run ends.

The embedded engine (Sail) runs inside this process, and glibc's allocator keeps the pages
of freed blocks in its per-thread arenas: after a few commits of a long run the process
holds the peak of every arena, not what it uses (1 GB binlog, bronze: the engine's
process peaked at 1.0 GB with, 0.8 GB without that retention; docs/performance.md).
``malloc_trim(0)`` returns those pages. Elsewhere (no glibc, or the engine in another
process) it does nothing harmful. Silver does not trim between its slices: each slice would
fault the pages in again, and the next slice reuses them (docs/performance.md, Memory).

:func:`use_system_allocator` makes pyarrow allocate with the C library's malloc instead of
its bundled mimalloc in the processes binlake starts (the embedded engine's, the decoding and
rendering workers): mimalloc asks for transparent huge pages, and the kernel zeroed 2 MiB
pages for every fresh arena (14% of silver's CPU time, measured with ``perf``); with malloc a
silver run peaked ~200 MiB lower (docs/performance.md). ``ARROW_DEFAULT_MEMORY_POOL``, when
set, still decides.

:func:`limit_malloc_arenas` caps glibc's malloc arenas at two in the embedded engine's process
before the engine starts its threads: by default glibc gives each of the engine's many threads
an arena of its own (up to 8 per core), and each arena keeps its own peak; on a 1 GB binlog the
silver run's engine process peaked at 1,165 MiB with them and ~980 MiB with two, in the same
time. ``MALLOC_ARENA_MAX``, when set, still decides.

:func:`fix_mmap_threshold` keeps glibc's mmap threshold at 4 MiB in that process. By default
glibc raises the threshold to the size of every mmapped block freed (up to 32 MiB), so once
a rendering batch's buffers (several MiB each) have been freed the next ones come from the
arenas, whose freed pages stay with the process and fragment: a silver run's peak grew with
the binlog (1 GB narrow binlog, 7 M row changes: the engine's process 1,297 MiB by default,
1,105 MiB with the threshold fixed, 1% more CPU; docs/performance.md, Memory). Blocks of
4 MiB and more are then mapped and unmapped as they come. ``MALLOC_MMAP_THRESHOLD_``, when
set, still decides.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["release_freed_memory", "use_system_allocator", "limit_malloc_arenas",
           "fix_mmap_threshold"]

_TRIM = None
_M_ARENA_MAX = -8  # mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 4 * 2**20


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def release_freed_memory() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``); a no-op without glibc."""
    global _TRIM
    if _TRIM is None:
        _TRIM = getattr(_libc(), "malloc_trim", None) or False  # not glibc: nothing to trim
    if _TRIM:
        _TRIM(0)


def use_system_allocator() -> None:
    """pyarrow's default memory pool becomes the system allocator (see the module docstring),
    unless the user chose one with ``ARROW_DEFAULT_MEMORY_POOL``."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def _mallopt(param: int, value: int, env: str) -> None:
    """glibc's ``mallopt(param, value)`` unless the user set ``env`` (glibc's own tunable for
    it); a no-op without glibc."""
    if os.environ.get(env):
        return
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is not None:
        mallopt(param, value)


def limit_malloc_arenas(arenas: int = 2) -> None:
    """glibc: at most ``arenas`` malloc arenas in this process (see the module docstring);
    call before the engine starts its threads. A no-op elsewhere or with MALLOC_ARENA_MAX."""
    _mallopt(_M_ARENA_MAX, arenas, "MALLOC_ARENA_MAX")


def fix_mmap_threshold(threshold: int = _MMAP_THRESHOLD) -> None:
    """glibc: blocks of ``threshold`` bytes and more are always mapped, never taken from the
    arenas (which turns off glibc's raising of the threshold: see the module docstring). A
    no-op elsewhere or with ``MALLOC_MMAP_THRESHOLD_``."""
    _mallopt(_M_MMAP_THRESHOLD, threshold, "MALLOC_MMAP_THRESHOLD_")
