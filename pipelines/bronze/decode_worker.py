"""The decoding worker process.

Two ways in: ``python -m pipelines.bronze.decode_worker FILE ...`` (Arrow IPC on stdout), and
:func:`run`, started from the ``forkserver`` of ``pipelines.workers`` that has already imported
the decoder: a forked worker starts in milliseconds instead of re-importing pyarrow and the
decoder (0.3 s) for every file or chunk.
"""

from __future__ import annotations

import sys

__all__ = ["run"]


def run(conn, path: str, source_id: str, server_uuid: str | None, batch_rows: int,
        checksum: str, chunk: int, chunks: int, start_at: int = 4) -> None:
    """Forked worker body: send each bronze batch, serialised, through ``conn``."""
    from pipelines.bronze.decode_task import decode_file_batches

    try:
        for batch in decode_file_batches(path, source_id=source_id, server_uuid=server_uuid,
                                         batch_rows=batch_rows, checksum=checksum,
                                         subprocess=False, chunk=chunk, chunks=chunks,
                                         start_at=start_at):
            conn.send_bytes(batch.serialize())
    finally:
        conn.close()


if __name__ == "__main__":
    from pipelines.workers import prepare_process

    prepare_process()
    from pipelines.bronze.decode_task import main

    sys.exit(main())
