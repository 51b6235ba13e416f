"""The decoding worker process: ``python -m pipelines.bronze.decode_worker FILE ...`` decodes
one file (or chunk) and writes Arrow IPC batches to stdout (``decode_task.main``). Workers
forked from the preloaded forkserver run ``decode_task._worker_body`` instead."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from pipelines.engine.workers import prepare_process

    prepare_process()
    from pipelines.bronze.decode_task import main

    sys.exit(main())
