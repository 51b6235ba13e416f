"""Silver rendering in worker processes: a task's bronze batches rendered on every core.

:func:`render_batches` is what silver's ``mapInArrow`` runs. With ``workers`` > 0 it forks that
many rendering processes from the preloaded forkserver (``pipelines.engine.workers``), sends them the
naming plan once, then deals the task's batches round-robin, ``workers`` in flight, and yields
the results in input order: on the embedded engine a single task keeps every core busy while
the engine's own process only moves serialised Arrow batches. With ``workers`` = 0 (a Spark
executor's Python worker is a process of its own already, or an unguarded main script forbids
forking), or for a task of a single batch (forking would cost more than it saves), the
batches are rendered in this process. Memory is bounded by ``workers`` batches.

The processes outlive the task: a finished task hands its pool back (:func:`close_idle` ends
them, ``run_silver`` calls it when the stage is done), so the next task, slice and pass of
the same run reuse warm processes (their imports, renderers and memory arenas) instead of
forking and faulting in fresh memory for every task. A pool whose task failed or stopped
early is ended, never handed back. A pool learns the naming plan once (by its digest).
"""

from __future__ import annotations

import hashlib
import itertools
import pickle
import threading
from collections import deque
from typing import Iterable, Iterator

import pyarrow as pa

from pipelines.errors import EngineError
from pipelines.engine.memory import release_freed_memory
from pipelines.silver.naming import NamingPlan
from pipelines.silver.render_batch import QUARANTINE, RENDERED, BatchRenderer
from pipelines.engine.workers import boot, forkserver, forkserver_is_safe, widen

__all__ = ["render_batches", "serve", "close_idle"]


def _pick(renderer: BatchRenderer, batch: pa.RecordBatch, quarantine: bool) -> pa.Table:
    """The silver rows of ``batch`` (a chunk per group: ``BatchRenderer.render``), or its
    quarantine rows."""
    silver, held = renderer.render(batch)
    return pa.Table.from_batches([held]) if quarantine else silver


_KIND = 8  # a message's kind, padded so that the Arrow buffers after it stay 8-byte aligned


def _message(kind: bytes, batch: pa.RecordBatch) -> pa.Buffer:
    """``kind`` followed by ``batch`` as an Arrow IPC stream, in one buffer (no copies)."""
    sink = pa.BufferOutputStream()
    sink.write(kind.ljust(_KIND, b"\0"))
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def _from_bytes(data: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_next_batch()


def serve(conn) -> None:
    """Worker body: learn a naming plan (``P`` + pickle), then render each batch received
    (``S`` silver, ``Q`` quarantine + the batch) and send the result back."""
    renderer = None
    try:
        while True:
            try:
                data = conn.recv_bytes()
            except EOFError:
                return
            kind, data = data[:1], memoryview(data)[_KIND:]
            try:
                if kind == b"P":
                    renderer = BatchRenderer(pickle.loads(data))
                    continue
                out = _pick(renderer, _from_bytes(data), kind == b"Q").combine_chunks()
            except Exception as exc:  # noqa: BLE001 - reported to the task, which raises it
                conn.send_bytes(b"E" + f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
                return
            conn.send_bytes(b"B" if out.num_rows else b"N")
            if out.num_rows:  # one batch: the chunks joined
                conn.send_bytes(out.to_batches()[0].serialize())
            del out
            release_freed_memory()  # a worker lives for the run: keep it at one batch
    finally:
        conn.close()


class _Pool:
    """``n`` forked rendering processes, each with its end of a duplex pipe."""

    def __init__(self, n: int) -> None:
        boot(__name__)  # the server imports this module: a forked process starts warm
        ctx = forkserver()
        self.plan_digest = b""
        self.conns, self.procs = [], []
        for _ in range(n):
            ours, theirs = ctx.Pipe(duplex=True)
            widen(ours, theirs)
            proc = ctx.Process(target=serve, args=(theirs,), daemon=True)
            proc.start()
            theirs.close()
            self.conns.append(ours)
            self.procs.append(proc)

    def learn(self, plan: bytes, digest: bytes) -> None:
        """Send every process the naming plan, unless it is the one they have."""
        if digest != self.plan_digest:
            for w in range(len(self.conns)):
                self._send(w, b"P".ljust(_KIND, b"\0") + plan)
            self.plan_digest = digest

    def _send(self, w: int, data) -> None:
        try:
            self.conns[w].send_bytes(data)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self._died(w)

    def send(self, w: int, batch: pa.RecordBatch, quarantine: bool) -> None:
        self._send(w, _message(b"Q" if quarantine else b"S", batch))

    def receive(self, w: int, schema: pa.Schema) -> pa.RecordBatch | None:
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
        return pa.ipc.read_record_batch(pa.py_buffer(data), schema)

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


_IDLE: dict[int, list[_Pool]] = {}  # pools handed back by finished tasks, by size
_IDLE_LOCK = threading.Lock()


def _checkout(n: int) -> _Pool:
    with _IDLE_LOCK:
        idle = _IDLE.get(n)
        if idle:
            return idle.pop()
    return _Pool(n)


def _hand_back(pool: _Pool) -> None:
    with _IDLE_LOCK:
        _IDLE.setdefault(len(pool.conns), []).append(pool)


def close_idle() -> None:
    """End the rendering processes no task is using (the stage is over)."""
    with _IDLE_LOCK:
        pools = [p for idle in _IDLE.values() for p in idle]
        _IDLE.clear()
    for pool in pools:
        pool.close()


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


# Rows per rendering batch. A columnar pass costs per batch as well as per row; the batch is
# also the memory bound of a rendering task. 16,384 everywhere: where the embedded engine's
# own process renders, 65,536 was no faster with the compiled loops and held
# ~250 MiB more on a 1 GB binlog, a 60 MB one's peak +30% instead of +15%
# (docs/performance.md, Silver render).
BATCH_ROWS = 16384


def render_batches(batches: Iterable[pa.RecordBatch], plan: NamingPlan, *, quarantine: bool,
                   workers: int, batch_rows: int = BATCH_ROWS, compiled: bool = True
                   ) -> Iterator[pa.RecordBatch]:
    """The silver (or, with ``quarantine``, the quarantine) rows of ``batches``, in order,
    rendered ``batch_rows`` at a time (the memory bound: ``workers`` × ``batch_rows`` rows)."""
    batches = _coalesced(batches, batch_rows)
    first = next(batches, None)
    second = next(batches, None) if first is not None else None
    if second is None:  # a task of one batch: forking costs more than it saves
        workers = 0
    batches = itertools.chain([b for b in (first, second) if b is not None], batches)
    if workers <= 0 or not forkserver_is_safe():
        renderer = BatchRenderer(plan, compiled)
        for batch in batches:
            for out in _pick(renderer, batch, quarantine).to_batches():
                if out.num_rows:
                    yield out
        return
    schema = QUARANTINE if quarantine else RENDERED
    plan_bytes = pickle.dumps(plan)
    digest = hashlib.sha256(plan_bytes).digest()
    pool: _Pool | None = None
    in_flight: deque[int] = deque()
    sent = 0
    done = False
    try:
        for batch in batches:
            if pool is None:
                pool = _checkout(workers)
                pool.learn(plan_bytes, digest)
            w = sent % workers
            sent += 1
            if len(in_flight) == workers:
                out = pool.receive(in_flight.popleft(), schema)
                if out is not None:
                    yield out
            pool.send(w, batch, quarantine)
            in_flight.append(w)
        while in_flight:
            out = pool.receive(in_flight.popleft(), schema)
            if out is not None:
                yield out
        done = True
    finally:
        if pool is not None:
            if done:
                _hand_back(pool)
            else:  # failed or stopped early: replies may still be in flight
                pool.close()
