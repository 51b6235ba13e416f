"""One decoding task: a binlog file → bronze Arrow batches, in this process or a worker process.

On the embedded engine, Python UDFs run inside Sail's process under one GIL, so two files
decoded there share one core. ``decode_file_batches(..., subprocess=True)`` runs the decoder
in a worker process forked from a ``forkserver`` that has the decoder imported already
(``pipelines.engine.workers``), which streams its Arrow batches back over a pipe: each task then
has a core of its own and memory stays bounded by the batch size. On a Spark cluster each
executor's Python worker is already a process; the worker process is a cheap extra hop there
and can be turned off (``bronze.decode_in_subprocess = false``).
"""

from __future__ import annotations

import argparse
import os
import subprocess as sp
import sys
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.binlog import store as binlog_store
from pipelines.binlog.fast import rowkernel
from pipelines.binlog.parser import ChecksumPolicy
from pipelines.binlog.reader import BinlogFileReader
from pipelines.bronze.records import BRONZE_SCHEMA, BronzeBatcher, file_batches
from pipelines.lake.s3_client import S3Settings
from pipelines.config import ARROW_BATCH_ROWS
from pipelines.engine.workers import boot, forkserver, forkserver_is_safe, widen

__all__ = ["decode_file_batches", "main"]


def _columnar(path: str, chunks: int, columnar: bool | None, storage: object | None = None
              ) -> bool:
    """Whether to decode rows with the compiled loop (``rowkernel``): when asked, or (None)
    when this process has it loaded already or the chunk is big enough to pay for loading."""
    if columnar is not None:
        return columnar
    if rowkernel.warmed():
        return True
    try:
        return binlog_store.size(path, storage) // max(chunks, 1) >= rowkernel.MIN_BYTES
    except OSError:
        return False


def _inline(path: str, source_id: str, server_uuid: str | None, batch_rows: int,
            checksum: str, chunk: int = 0, chunks: int = 1, start_at: int = 4,
            statement_text: bool = False, columnar: bool | None = None,
            storage: object | None = None) -> Iterator[pa.RecordBatch]:
    name = os.path.basename(path)
    reader = BinlogFileReader(path, checksum=ChecksumPolicy(checksum), name=name, chunk=chunk,
                              chunks=chunks, start_at=start_at,
                              columnar=_columnar(path, chunks, columnar, storage),
                              storage=storage, cut_short=True)
    batcher = BronzeBatcher(source_id=source_id, binlog_file=name, server_uuid=server_uuid,
                            batch_rows=batch_rows, statement_text=statement_text)
    yield from file_batches(reader, batcher, reader)


def _error_batch(path: str, source_id: str, message: str, chunk: int, chunks: int,
                 through: int = 0) -> pa.RecordBatch:
    """The chunk's ERROR row when decoding ended otherwise than at bad input. ``through``:
    the end of the last event whose rows were all delivered (batches end at event ends), so
    the file's state says exactly which positions are in bronze (``rows_through``)."""
    batcher = BronzeBatcher(source_id=source_id, binlog_file=os.path.basename(path))
    batcher.add_closing(ok=False, pos=through, info={"error": message, "chunk": chunk,
                                                     "chunks": chunks,
                                                     "rows_through": through}, chunk=chunk)
    return batcher.flush()


class _Delivered:
    """What a chunk's consumer has received: the end of the last event delivered whole and
    whether the closing END/ERROR row came."""

    def __init__(self) -> None:
        self.through = 0
        self.closed = False

    def saw(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        self.closed = self.closed or _has_closing(batch)
        if batch.num_rows and not self.closed:
            end = pc.max(batch.column(BRONZE_SCHEMA.get_field_index("end_pos"))).as_py()
            self.through = max(self.through, end or 0)
        return batch


def decode_file_batches(path: str, *, source_id: str, server_uuid: str | None = None,
                        batch_rows: int = ARROW_BATCH_ROWS, checksum: str = "raise",
                        subprocess: bool = True, chunk: int = 0, chunks: int = 1,
                        start_at: int = 4, statement_text: bool = False,
                        columnar: bool | None = None, storage: object | None = None
                        ) -> Iterator[pa.RecordBatch]:
    """Bronze batches of one file; the last batch ends with the file's END/ERROR row.

    ``start_at``: a known event start at or before the chunk (``reader.chunk_start``).
    ``statement_text``: keep ROWS_QUERY/ANNOTATE_ROWS text per row change (``bronze.statement_text``).
    ``columnar``: decode rows with the compiled loop (``rowkernel``; same bronze either way);
    ``None`` decides by the chunk's size and whether the loop is loaded (:func:`_columnar`).
    ``storage``: the ``[storage]`` settings when ``path`` is on an object store
    (``binlog_store``; the task, or its worker, reads the object's bytes itself).

    Never raises for bad input: a decoding failure, or a worker that dies, becomes the ERROR
    row so the other files of the job still commit.
    """
    if not subprocess:
        yield from _guarded(_inline(path, source_id, server_uuid, batch_rows, checksum, chunk,
                                    chunks, start_at, statement_text, columnar, storage),
                            path, source_id, chunk, chunks)
        return
    args = (path, source_id, server_uuid, batch_rows, checksum, chunk, chunks, start_at,
            statement_text, columnar, storage)
    run = _forked if forkserver_is_safe() else _spawned
    yield from run(*args)


def _guarded(batches: Iterator[pa.RecordBatch], path: str, source_id: str, chunk: int,
             chunks: int) -> Iterator[pa.RecordBatch]:
    """Decoding in this process ends as a worker's does when something other than bad input
    goes wrong (a decoder bug): with the chunk's ERROR row, not a failed engine task, so the
    job's other files still commit and the file is redone on the next run."""
    got = _Delivered()
    try:
        for batch in batches:
            yield got.saw(batch)
    except Exception as exc:  # noqa: BLE001 - anything a worker's death would have covered
        yield _error_batch(path, source_id, f"decoder failed: {type(exc).__name__}: {exc}",
                           chunk, chunks, got.through)


def _worker_body(conn, *args) -> None:
    """Forked worker body: decode inline, write each bronze batch to ``conn``'s pipe as an
    Arrow IPC stream (Arrow writes the batch's buffers straight to the pipe: no serialised
    copy). The forkserver (``pipelines.engine.workers``) has this module imported already: a forked
    worker starts in milliseconds instead of re-importing pyarrow and the decoder."""
    try:
        with open(conn.fileno(), "wb", closefd=False) as sink, \
                pa.ipc.new_stream(sink, BRONZE_SCHEMA) as out:
            for batch in _guarded(_inline(*args), args[0], args[1], args[5], args[6]):
                out.write_batch(batch)
    finally:
        conn.close()


def decoders(*, row_kernel: bool = False, start: bool = False):
    """The workers' context (``engine.workers.forkserver``) whose server has this module
    imported, and with ``row_kernel`` bronze's compiled row loop loaded
    (``kernel_worker_boot``), so that every decoding worker forked from it has the loop at
    no cost of its own. Either takes effect only before the server starts; ``start``: start
    it now."""
    boot("pipelines.bronze.decode_task",
         *(["pipelines.bronze.kernel_worker_boot"] if row_kernel else []))
    return forkserver(start=start)


def _forked(path: str, source_id: str, server_uuid: str | None, batch_rows: int,
            checksum: str, chunk: int, chunks: int, start_at: int, statement_text: bool,
            columnar: bool | None, storage: object | None) -> Iterator[pa.RecordBatch]:
    """Decode in a worker forked from the preloaded forkserver; its batches come back as an
    Arrow IPC stream on a pipe, read into Arrow's memory without a copy in Python."""
    ctx = decoders()
    receive, send = ctx.Pipe(duplex=False)
    widen(receive)
    proc = ctx.Process(target=_worker_body, daemon=True,
                       args=(send, path, source_id, server_uuid, batch_rows, checksum, chunk,
                             chunks, start_at, statement_text, columnar, storage))
    proc.start()
    send.close()
    got = _Delivered()
    try:
        with open(receive.fileno(), "rb", closefd=False) as source, \
                pa.ipc.open_stream(source) as stream:
            for batch in stream:
                yield got.saw(batch)
    except (pa.ArrowInvalid, OSError):
        pass  # the worker died mid-stream: its chunk ends with the ERROR row below
    finally:
        receive.close()
        proc.join()
    if not got.closed:
        yield _error_batch(path, source_id,
                           f"decoder process exited with code {proc.exitcode} before the end",
                           chunk, chunks, got.through)


def _spawned(path: str, source_id: str, server_uuid: str | None, batch_rows: int,
             checksum: str, chunk: int, chunks: int, start_at: int, statement_text: bool,
             columnar: bool | None, storage: object | None) -> Iterator[pa.RecordBatch]:
    """Decode in a fresh ``python -m pipelines.bronze.decode_worker`` (Arrow IPC on stdout)."""
    cmd = [sys.executable, "-m", "pipelines.bronze.decode_worker", path, "--source-id",
           source_id, "--batch-rows", str(batch_rows), "--checksum", checksum, "--chunk",
           str(chunk), "--chunks", str(chunks), "--start-at", str(start_at)]
    if server_uuid:
        cmd += ["--server-uuid", server_uuid]
    if statement_text:
        cmd += ["--statement-text"]
    if columnar is not None:
        cmd += ["--columnar" if columnar else "--no-columnar"]
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    if binlog_store.is_remote(path):  # the store's settings travel as AWS_* variables
        env.update(S3Settings.resolve(storage).environment())
    proc = sp.Popen(cmd, stdout=sp.PIPE, stderr=sp.PIPE, env=env)
    got = _Delivered()
    try:
        with pa.ipc.open_stream(proc.stdout) as stream:
            for batch in stream:
                yield got.saw(batch)
    except pa.ArrowInvalid:
        pass
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace")
        proc.stderr.close()
        code = proc.wait()
    if not got.closed:
        tail = err.strip().splitlines()[-1:] or [""]
        yield _error_batch(path, source_id,
                           f"decoder process exited with code {code}: {tail[0][:500]}",
                           chunk, chunks, got.through)


def _has_closing(batch: pa.RecordBatch) -> bool:
    last = batch.column(BRONZE_SCHEMA.get_field_index("event_type"))[-1].as_py()
    return last in ("END", "ERROR")


def main(argv: list[str] | None = None) -> int:
    """Worker entry: decode one file and write Arrow IPC batches to stdout."""
    ap = argparse.ArgumentParser(prog="python -m pipelines.bronze.decode_task")
    ap.add_argument("path")
    ap.add_argument("--source-id", required=True)
    ap.add_argument("--server-uuid")
    ap.add_argument("--batch-rows", type=int, default=ARROW_BATCH_ROWS)
    ap.add_argument("--checksum", default="raise")
    ap.add_argument("--chunk", type=int, default=0)
    ap.add_argument("--chunks", type=int, default=1)
    ap.add_argument("--start-at", type=int, default=4)
    ap.add_argument("--statement-text", action="store_true")
    ap.add_argument("--columnar", action=argparse.BooleanOptionalAction, default=None)
    args = ap.parse_args(argv)
    out = pa.output_stream(sys.stdout.buffer)
    with pa.ipc.new_stream(out, BRONZE_SCHEMA) as writer:
        for batch in _guarded(_inline(args.path, args.source_id, args.server_uuid,
                                      args.batch_rows, args.checksum, args.chunk, args.chunks,
                                      args.start_at, args.statement_text, args.columnar),
                              args.path, args.source_id, args.chunk, args.chunks):
            writer.write_batch(batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
