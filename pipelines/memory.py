"""Give memory the process freed back to the operating system between commits.

The embedded engine (Sail) runs inside this process, and glibc's allocator keeps the pages
of freed blocks in its per-thread arenas: after a few commits of a long run the process
holds the peak of every arena, not what it uses (1 GB binlog, bronze: the engine's
process peaked at 1.0 GB with, 0.8 GB without that retention; docs/performance.md).
``malloc_trim(0)`` returns those pages. Elsewhere (no glibc, or the engine in another
process) it does nothing harmful.

:func:`use_system_allocator` makes pyarrow allocate with the C library's malloc instead of
its bundled mimalloc in the processes binlake starts (the embedded engine's, the decoding and
rendering workers): mimalloc asks for transparent huge pages, and the kernel zeroed 2 MiB
pages for every fresh arena (14% of silver's CPU time, measured with ``perf``); with malloc a
silver run peaked ~200 MiB lower (docs/performance.md). ``ARROW_DEFAULT_MEMORY_POOL``, when
set, still decides.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["release_freed_memory", "use_system_allocator"]

_TRIM = None


def release_freed_memory() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``); a no-op without glibc."""
    global _TRIM
    if _TRIM is None:
        try:
            _TRIM = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
            _TRIM = False
    if _TRIM:
        _TRIM(0)


def use_system_allocator() -> None:
    """pyarrow's default memory pool becomes the system allocator (see the module docstring),
    unless the user chose one with ``ARROW_DEFAULT_MEMORY_POOL``."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
