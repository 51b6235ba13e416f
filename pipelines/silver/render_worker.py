"""Silver rendering in worker processes: a task's bronze batches rendered on every core.

:func:`render_batches` is what silver's ``mapInArrow`` runs. With ``workers`` > 0 it forks that
many rendering processes from the preloaded forkserver (``pipelines.workers``), sends them the
naming plan once, then deals the task's batches round-robin, ``workers`` in flight, and yields
the results in input order: on the embedded engine a single task keeps every core busy while
the engine's own process only moves serialised Arrow batches. With ``workers`` = 0 (a Spark
executor's Python worker is a process of its own already, or an unguarded main script forbids
forking), or for a task of a single batch (forking would cost more than it saves), the
batches are rendered in this process. Memory is bounded by ``workers`` batches.
"""

from __future__ import annotations

import itertools
import pickle
from collections import deque
from typing import Iterable, Iterator

import pyarrow as pa

from pipelines.errors import EngineError
from pipelines.silver.naming import NamingPlan
from pipelines.silver.render_batch import QUARANTINE, RENDERED, BatchRenderer
from pipelines.workers import forkserver, forkserver_is_safe

__all__ = ["render_batches", "serve"]


def _pick(renderer: BatchRenderer, batch: pa.RecordBatch, quarantine: bool) -> pa.RecordBatch:
    silver, held = renderer.render(batch)
    return held if quarantine else silver


def _to_bytes(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _from_bytes(data: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_next_batch()


def serve(conn, plan: bytes, quarantine: bool) -> None:
    """Worker body: render each batch received on ``conn`` and send the result back."""
    renderer = BatchRenderer(pickle.loads(plan))
    try:
        while True:
            try:
                data = conn.recv_bytes()
            except EOFError:
                return
            try:
                out = _pick(renderer, _from_bytes(data), quarantine)
            except Exception as exc:  # noqa: BLE001 - reported to the task, which raises it
                conn.send_bytes(b"E" + f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
                return
            conn.send_bytes(b"B" if out.num_rows else b"N")
            if out.num_rows:
                conn.send_bytes(out.serialize())
    finally:
        conn.close()


class _Pool:
    """``n`` forked rendering processes, each with its end of a duplex pipe."""

    def __init__(self, n: int, plan: NamingPlan, quarantine: bool) -> None:
        ctx = forkserver()
        data = pickle.dumps(plan)
        self.schema = QUARANTINE if quarantine else RENDERED
        self.conns, self.procs = [], []
        for _ in range(n):
            ours, theirs = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=serve, args=(theirs, data, quarantine), daemon=True)
            proc.start()
            theirs.close()
            self.conns.append(ours)
            self.procs.append(proc)

    def send(self, w: int, batch: pa.RecordBatch) -> None:
        try:
            self.conns[w].send_bytes(_to_bytes(batch))
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self._died(w)

    def receive(self, w: int) -> pa.RecordBatch | None:
        try:
            head = self.conns[w].recv_bytes()
            if head == b"N":
                return None
            if head[:1] == b"E":
                raise EngineError("silver rendering failed in process "
                                  f"{self.procs[w].pid}: {head[1:].decode('utf-8', 'replace')}")
            data = self.conns[w].recv_bytes()
        except (EOFError, ConnectionResetError):
            self._died(w)
        return pa.ipc.read_record_batch(pa.py_buffer(data), self.schema)

    def _died(self, w: int) -> None:
        proc = self.procs[w]
        proc.join(5)
        raise EngineError(f"silver rendering process {proc.pid} exited with code "
                          f"{proc.exitcode} (out of memory, or killed?)")

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _coalesced(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The engine's batches (8192 rows on Sail) joined into batches of at least ``rows``: a
    columnar pass costs per batch as well as per row."""
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        held.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield held[0] if len(held) == 1 else pa.concat_batches(held)
            held, count = [], 0
    if held:
        yield held[0] if len(held) == 1 else pa.concat_batches(held)


def render_batches(batches: Iterable[pa.RecordBatch], plan: NamingPlan, *, quarantine: bool,
                   workers: int, batch_rows: int = 32768) -> Iterator[pa.RecordBatch]:
    """The silver (or, with ``quarantine``, the quarantine) rows of ``batches``, in order,
    rendered ``batch_rows`` at a time (the memory bound: ``workers`` × ``batch_rows`` rows)."""
    batches = _coalesced(batches, batch_rows)
    first = next(batches, None)
    second = next(batches, None) if first is not None else None
    if second is None:  # a task of one batch: forking costs more than it saves
        workers = 0
    batches = itertools.chain([b for b in (first, second) if b is not None], batches)
    if workers <= 0 or not forkserver_is_safe():
        renderer = BatchRenderer(plan)
        for batch in batches:
            out = _pick(renderer, batch, quarantine)
            if out.num_rows:
                yield out
        return
    pool: _Pool | None = None
    in_flight: deque[int] = deque()
    sent = 0
    try:
        for batch in batches:
            if pool is None:
                pool = _Pool(workers, plan, quarantine)
            w = sent % workers
            sent += 1
            if len(in_flight) == workers:
                out = pool.receive(in_flight.popleft())
                if out is not None:
                    yield out
            pool.send(w, batch)
            in_flight.append(w)
        while in_flight:
            out = pool.receive(in_flight.popleft())
            if out is not None:
                yield out
    finally:
        if pool is not None:
            pool.close()
