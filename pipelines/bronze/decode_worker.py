"""The decoding worker process.

Two ways in: ``python -m pipelines.bronze.decode_worker FILE ...`` (Arrow IPC on stdout), and
:func:`run`, started from a ``forkserver`` (``decode_task``) that has already imported the
decoder: a forked worker starts in milliseconds instead of re-importing pyarrow and the
decoder (0.3 s) for every file or chunk.

:func:`prepare_process` sets a worker process up: pyarrow imports pandas (0.2 s) the first
time it converts Python lists, which the worker does not need, and the cyclic garbage
collector runs rarely (the decoder makes no reference cycles).
"""

from __future__ import annotations

import gc
import sys

__all__ = ["prepare_process", "run"]


class _NoPandas:
    """Import hook making ``import pandas`` fail fast (pyarrow then skips its pandas checks)."""

    def find_spec(self, name: str, path=None, target=None):  # noqa: ANN001 - importlib API
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not used by the binlake decoding worker")
        return None


def prepare_process() -> None:
    """Call first thing in a worker process (never in the engine's own process)."""
    if not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
    gc.freeze()
    gc.set_threshold(200_000, 50, 100)


def run(conn, path: str, source_id: str, server_uuid: str | None, batch_rows: int,
        checksum: str, chunk: int, chunks: int) -> None:
    """Forked worker body: send each bronze batch, serialised, through ``conn``."""
    from pipelines.bronze.decode_task import decode_file_batches

    try:
        for batch in decode_file_batches(path, source_id=source_id, server_uuid=server_uuid,
                                         batch_rows=batch_rows, checksum=checksum,
                                         subprocess=False, chunk=chunk, chunks=chunks):
            conn.send_bytes(batch.serialize())
    finally:
        conn.close()


if __name__ == "__main__":
    prepare_process()
    from pipelines.bronze.decode_task import main

    sys.exit(main())
