"""Imported by the worker forkserver only: prepares it, then loads the workers' code once."""

from pipelines.engine.workers import prepare_process

prepare_process()

import pipelines.bronze.decode_task  # noqa: E402,F401  (preloaded for every forked worker)
import pipelines.silver.render_worker  # noqa: E402,F401
