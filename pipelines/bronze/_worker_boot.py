"""Imported by the decoding forkserver only: prepares it, then loads the decoder once."""

from pipelines.bronze.decode_worker import prepare_process

prepare_process()

import pipelines.bronze.decode_task  # noqa: E402,F401  (preloaded for every forked worker)
