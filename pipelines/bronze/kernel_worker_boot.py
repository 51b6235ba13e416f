"""Imported by the worker forkserver only, when the bronze stage asks for it
(``decode_task.decoders(row_kernel=True)``): loads bronze's compiled row loop once, for every
decoding worker forked from the server."""

from pipelines.binlog.fast import rowkernel

rowkernel.warm()
