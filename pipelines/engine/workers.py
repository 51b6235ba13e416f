"""Worker processes for the CPU-heavy Python inside engine UDFs (decoding, rendering).

On the embedded engine every Python UDF runs inside Sail's one process, under one GIL: two
tasks decoding or rendering at once share a core. A stage that wants a core per task runs
its Python in worker processes forked from a ``forkserver`` that has binlake's workers
imported already: a forked worker starts in milliseconds instead of re-importing pyarrow
(0.3 s) for every task. The stage that forks workers names the modules they run
(:func:`boot`); the server imports them, after ``pipelines.engine.worker_boot`` prepared it,
when it starts. Arrow batches travel serialised over pipes.

:func:`prepare_process` sets a worker process up: pyarrow imports pandas (0.2 s) the first
time it converts Python lists, which workers do not need, and the cyclic garbage collector
runs rarely (the workers make no reference cycles).
"""

from __future__ import annotations

import functools
import gc
import logging
import multiprocessing
import os
import re
import sys

from pipelines.engine.memory import use_system_allocator

__all__ = ["boot", "forkserver", "forkserver_is_safe", "prepare_process", "widen"]

_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]""")
_CONTEXT = None
_BOOTS: list[str] = []  # what the workers' server imports when it starts (``boot``), in order

log = logging.getLogger(__name__)


class _NoPandas:
    """Import hook making ``import pandas`` fail fast (pyarrow then skips its pandas checks)."""

    def find_spec(self, name: str, path=None, target=None):  # noqa: ANN001 - importlib API
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not used by binlake's worker processes")
        return None


def prepare_process() -> None:
    """Call first thing in a worker process (never in the engine's own process)."""
    if not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
    gc.freeze()
    gc.set_threshold(200_000, 50, 100)
    use_system_allocator()


_WIDE = 1 << 20  # bytes a pipe or socket between a worker and its task holds in flight


def widen(*conns) -> None:
    """Let each connection (a multiprocessing pipe or socket end) hold 1 MiB in flight, not
    the 64 KiB / ~200 KiB default: a batch of several MB then crosses in a few large reads
    instead of one per 64 KiB with a context switch each (best effort; Linux)."""
    import fcntl
    import socket
    import stat

    for conn in conns:
        try:
            fd = conn.fileno()
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _WIDE)
            else:
                sock = socket.socket(fileno=os.dup(fd))
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _WIDE)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _WIDE)
                finally:
                    sock.close()
        except (OSError, AttributeError, ValueError):
            pass


@functools.cache
def forkserver_is_safe() -> bool:
    """Whether forked workers may be used: multiprocessing re-runs a main *script* in every
    worker, which is only harmless behind an ``if __name__ == "__main__":`` guard (modules run
    with ``-m``, console scripts, notebooks and Spark workers are fine). Decided once per
    process (the main script does not change; every task asks), and an unguarded script is
    told why its workers start slowly: each is a new Python that imports the decoder again
    (bronze of a 250 MB binlog: 11.2-11.6 s, against 5.6-6.1 s for the same script with the
    guard; docs/performance.md)."""
    main = sys.modules.get("__main__")
    if main is None or getattr(getattr(main, "__spec__", None), "name", None):
        return True
    path = getattr(main, "__file__", None)
    if not path:
        return True
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            safe = bool(_GUARD.search(fh.read()))
    except OSError:
        safe = False
    if not safe:
        log.warning("%s has no `if __name__ == \"__main__\":` guard, so binlake cannot fork "
                    "its workers (decoding starts a new Python per task: slower); put the "
                    "script's work under the guard", path)
    return safe


def boot(*modules: str) -> None:
    """Have the workers' server import ``modules`` (by name) when it starts, so that every
    worker forked from it has them at no cost of its own: a stage names the modules its
    workers run, before it asks for the :func:`forkserver` (``bronze/decode_task``,
    ``silver/render_worker``). It takes effect only while the server has not started (it
    starts with the first worker, or with ``forkserver(start=True)``)."""
    _BOOTS.extend(m for m in modules if m not in _BOOTS)
    if _CONTEXT is not None:
        _CONTEXT.set_forkserver_preload(["pipelines.engine.worker_boot", *_BOOTS])


def forkserver(*, start: bool = False):
    """The multiprocessing context whose server process has binlake's workers imported (the
    modules :func:`boot` named).

    ``start``: start the server now (it imports the workers' code, ~0.5 s, and bronze's
    compiled row loop, ~0.6 s, when booted, in a process of its own) instead of when the
    first task needs a worker: a stage asks for it as early as it knows it will use workers,
    so that the server boots on the other core while this process starts the engine or plans
    the run.
    """
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        boot()
    if start:
        from multiprocessing import forkserver as _fs

        _fs.ensure_running()
    return _CONTEXT
