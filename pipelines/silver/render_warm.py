"""Loading silver's compiled render loops ahead of the rows, on a thread of its own.

The loops (``render_fast``/``render_jit``) cost a process about a second to load: numba's
import (~0.45 s) and its cached machine code on the first calls (~0.5 s). A run that loads
them on its first batch pays that second in front of its rendering; a run that starts the
load when it knows it will render enough rows (``silver.compiled_min_mb``) pays only what the
engine's planning queries and, in ``binlake index``, bronze's decoding do not hide (both wait
on the engine, not on Python). The load renders two rows of a small table through the same
``BatchRenderer`` the run uses, and hashes their ``pk_values`` as the run's tasks do
(``pk_hash``), so exactly the argument types of a real run are loaded.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import TYPE_CHECKING

import pyarrow as pa

from pipelines.lake.tables import BRONZE_EVENTS
from pipelines.vocabulary import INSERT, UPDATE

if TYPE_CHECKING:
    from pipelines.config import Config

__all__ = ["renders_here", "warm", "warm_in_background", "preload_renderers"]

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
_STARTED: threading.Thread | None = None


def _sample_batch() -> pa.RecordBatch:
    """An INSERT and an UPDATE of ``t(id BIGINT PRIMARY KEY, name VARCHAR utf8mb4,
    at DATETIME(6))`` with full metadata: every loop the full-image path calls."""
    from pipelines.binlog import coltypes as T

    ts = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    meta = dict(column_count=3, column_types=[T.LONGLONG, T.VARCHAR, T.DATETIME2],
                column_meta=[0, 400, 6], column_names=["id", "name", "at"],
                column_charsets=[45, 45, None], primary_key=[0])
    rows = []
    for i, (kind, before, after) in enumerate((
            (INSERT, None, [b"1", b"a\"b", b"2026-01-01 00:00:00.000001"]),
            (UPDATE, [b"1", b"a\"b", b"2026-01-01 00:00:00.000001"],
             [b"1", b"\xc3\xa9", b"2026-01-01 00:00:00.000001"]))):
        row = {f.name: None for f in BRONZE_EVENTS.arrow_schema()}
        row.update(source_id="warm", server_id=1, binlog_file="warm.000001",
                   start_pos=100 + i, end_pos=200 + i, row_in_event=0, event_timestamp=ts,
                   schema_name="warm", table_name="t", event_type=kind, row_before=before,
                   row_after=after, **meta)
        rows.append(row)
    return pa.RecordBatch.from_pylist(rows, schema=BRONZE_EVENTS.arrow_schema())


def warm() -> bool:
    """Load the compiled render loops in this process now (compiling them the first time on a
    machine); ``False`` when they are not available (numba missing, ``BINLAKE_ROW_KERNEL``
    off). Safe to call from several threads: numba serialises the loading."""
    from pipelines.silver import render_fast

    if not render_fast.available():
        return False
    from pipelines.silver.naming import NamingPlan
    from pipelines.silver.pk_hash import pk_hash
    from pipelines.silver.render_batch import BatchRenderer

    silver, held = BatchRenderer(NamingPlan.build([], []), compiled=True).render(
        _sample_batch())
    # the task hashes what it rendered (a batch's string column, as here)
    hashes = pk_hash(silver.column("pk_values").combine_chunks(), True)
    return silver.num_rows == 2 and held.num_rows == 0 and hashes.null_count == 0


def renders_here(cfg: "Config") -> bool:
    """Whether silver's rows are rendered in this process: on the embedded engine (Sail runs
    the Python tasks here; JVM Spark and Spark Connect servers run them in their own Python
    workers) and without render worker processes (``silver.render_in_subprocess``)."""
    from pipelines.engine.session import engine_name
    from pipelines.silver.transform import render_workers

    return engine_name() == "sail" and not render_workers(cfg.silver.render_workers,
                                                          cfg.silver.render_in_subprocess)


def warm_in_background(cfg: "Config") -> bool:
    """Start :func:`warm` on a daemon thread, once per process, where this process renders
    (:func:`renders_here`; elsewhere nothing is loaded here). Whether a load was started or
    had been. A failure there is logged, not raised: the run's own first batch then loads
    the loops (and raises) as before."""
    if not renders_here(cfg):
        return False
    global _STARTED
    with _LOCK:
        if _STARTED is not None:
            return True

        def run() -> None:
            try:
                warm()
            except Exception:  # noqa: BLE001 - the run's own first render reports it
                log.debug("warming silver's compiled loops failed", exc_info=True)

        _STARTED = threading.Thread(target=run, name="binlake-silver-warm", daemon=True)
        _STARTED.start()
        return True


def preload_renderers() -> None:
    """Have the workers' server, when this process starts it, load silver's rendering worker
    (``render_worker``) too: ``binlake index`` asks before bronze starts the server for its
    decoding workers, so that the rendering processes silver forks from it later start as
    warm as from a server silver started."""
    from pipelines.engine.workers import boot

    boot("pipelines.silver.render_worker")
