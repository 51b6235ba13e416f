"""Imported by the worker forkserver only, first: prepares it. The stages' modules it then
loads once, for every forked worker, are those ``workers.boot`` named."""

from pipelines.engine.workers import prepare_process

prepare_process()
