"""Worker processes for the CPU-heavy Python inside engine UDFs (decoding, rendering).

On the embedded engine every Python UDF runs inside Sail's one process, under one GIL: two
tasks decoding or rendering at once share a core. A stage that wants a core per task runs
its Python in worker processes forked from a ``forkserver`` that has binlake's workers
imported already (``pipelines._worker_boot``): a forked worker starts in milliseconds instead
of re-importing pyarrow (0.3 s) for every task. Arrow batches travel serialised over pipes.

:func:`prepare_process` sets a worker process up: pyarrow imports pandas (0.2 s) the first
time it converts Python lists, which workers do not need, and the cyclic garbage collector
runs rarely (the workers make no reference cycles).
"""

from __future__ import annotations

import gc
import multiprocessing
import re
import sys

from pipelines.memory import use_system_allocator

__all__ = ["forkserver", "forkserver_is_safe", "prepare_process"]

_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]""")
_CONTEXT = None


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


def forkserver_is_safe() -> bool:
    """Whether forked workers may be used: multiprocessing re-runs a main *script* in every
    worker, which is only harmless behind an ``if __name__ == "__main__":`` guard (modules run
    with ``-m``, console scripts, notebooks and Spark workers are fine)."""
    main = sys.modules.get("__main__")
    if main is None or getattr(getattr(main, "__spec__", None), "name", None):
        return True
    path = getattr(main, "__file__", None)
    if not path:
        return True
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return bool(_GUARD.search(fh.read()))
    except OSError:
        return False


def forkserver(*, row_kernel: bool = False):
    """The multiprocessing context whose server process has binlake's workers imported.

    ``row_kernel``: the server also loads bronze's compiled row loop (``rowkernel``), so every
    decoding worker forked from it has the loop at no cost of its own. It takes effect only
    when this call creates the context (the server starts with the first worker); the bronze
    stage asks for it before decoding a run big enough to pay for it.
    """
    global _CONTEXT
    if _CONTEXT is None:
        ctx = multiprocessing.get_context("forkserver")
        preload = ["pipelines._worker_boot"]
        if row_kernel:
            preload.append("pipelines._row_kernel_boot")
        ctx.set_forkserver_preload(preload)
        _CONTEXT = ctx
    return _CONTEXT
