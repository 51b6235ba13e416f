"""Give memory the process freed back to the operating system between commits.

The embedded engine (Sail) runs inside this process, and glibc's allocator keeps the pages
of freed blocks in its per-thread arenas: after a few commits of a long run the process
holds the peak of every arena, not what it uses (1 GB binlog, bronze: the engine's
process peaked at 1.0 GB with, 0.8 GB without that retention; docs/performance.md).
``malloc_trim(0)`` returns those pages. Elsewhere (no glibc, or the engine in another
process) it does nothing harmful.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["release_freed_memory"]

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
