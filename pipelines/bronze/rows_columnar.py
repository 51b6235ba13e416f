"""The undecoded rows of a rows event (``RowsEvent.pending``) → a bronze batch's image sinks.

The compiled loop (``rowkernel``) writes the rows into the ``row_before``/``row_after`` sinks;
the values it only measured (fix-ups) are rendered here by the columns' Python decoders. When
the loop gives up on a row (a value it cannot vouch for), everything this event wrote is
undone and the whole event is decoded in Python (``rows.python_rows``) — which returns the
same rows or raises the error ``decode_rows`` would, located here as the parser would.
"""

from __future__ import annotations

import struct
import threading

import numpy as np

from pipelines.bronze import events as ev
from pipelines.bronze import rowkernel
from pipelines.bronze.image_sink import ImageSink
from pipelines.bronze.rows import python_rows
from pipelines.errors import DecodeError

__all__ = ["decode_into"]

_KIND = {"INSERT": 0, "DELETE": 1, "UPDATE": 2}
# The fix-up scratch, (side, value index, position, column) per fix-up: one per thread. The
# loop runs without the GIL, and the embedded engine decodes a run's tasks in threads of one
# process: a shared scratch let one task read another's fix-ups (wrong values, no error).
_SCRATCH = threading.local()


def _fix_scratch(rows: int = 1024) -> np.ndarray:
    fix = getattr(_SCRATCH, "fix", None)
    if fix is None or fix.shape[0] < rows:
        fix = _SCRATCH.fix = np.zeros((rows, 4), np.int64)
    return fix


def _programs(e: ev.RowsEvent) -> tuple[np.ndarray, np.ndarray]:
    """The column programs of this event's images, built once per table content and bitmaps."""
    tm = e.table
    cache = tm.image_cache()
    first = e.present_after if e.kind == "INSERT" else e.present_before
    second = e.present_after if e.kind == "UPDATE" else None
    key = ("kernel", e.kind, None if first is None else tuple(first),
           None if second is None else tuple(second))
    progs = cache.get(key)
    if progs is None:
        uns = tm.unsigned
        prog_a = rowkernel.program(tm.column_types, tm.column_meta, uns, first)
        prog_b = (rowkernel.program(tm.column_types, tm.column_meta, uns, second)
                  if e.kind == "UPDATE" else prog_a)
        progs = cache[key] = (prog_a, prog_b)
    return progs


def decode_into(e: ev.RowsEvent, before: ImageSink, after: ImageSink, file: str) -> int:
    """Decode ``e.pending`` into the sinks; return the number of rows. Raises the
    :class:`DecodeError` the parser would have raised for this event (with ``file``)."""
    p = e.pending
    marks = before.mark(), after.mark()
    try:
        n = _compiled(e, before, after)
        if n is None:  # gave up: the reference decoding takes the whole event
            before.rollback(marks[0])
            after.rollback(marks[1])
            rows, _ = python_rows(e.table, e.kind, p.type_code, p.body, p.pos,
                                  e.present_before if e.kind != "INSERT" else e.present_after,
                                  e.present_after)
            before.add_python([r[0] for r in rows])
            after.add_python([r[1] for r in rows])
            n = len(rows)
    except DecodeError as exc:
        before.rollback(marks[0])
        after.rollback(marks[1])
        raise exc.located(file=file, pos=e.header.pos, event_type=e.header.type_code,
                          preview=p.preview)
    except (IndexError, ValueError, struct.error) as exc:
        before.rollback(marks[0])
        after.rollback(marks[1])
        raise DecodeError(f"malformed {ev.event_name(e.header.type_code)} event: {exc}",
                          file=file, pos=e.header.pos, event_type=e.header.type_code,
                          preview=p.preview) from exc
    return n


def _compiled(e: ev.RowsEvent, before: ImageSink, after: ImageSink) -> int | None:
    """Rows written by the compiled loop, or ``None`` when it gave up (sinks to be undone)."""
    p = e.pending
    prog_a, prog_b = _programs(e)
    buf = np.frombuffer(p.body, np.uint8)
    end = len(p.body)
    pos = p.pos
    kind = _KIND[e.kind]
    state = np.zeros(3, np.int64)
    decs = e.table.decoders()
    rows = 0
    fix = _fix_scratch()
    while True:
        state[2] = 0
        outcome = rowkernel.run(buf, pos, end, kind, prog_a, prog_b, before, after, fix, state)
        pos, done, nfix = int(state[0]), int(state[1]), int(state[2])
        rows += done
        try:
            for side, at, where, col in fix[:nfix].tolist():
                (before if side == 0 else after).add_fixup(at, decs[col](p.body, where)[0])
        except (DecodeError, IndexError, ValueError, struct.error):
            return None  # the reference decoding raises its own error for this row
        if outcome == rowkernel.DONE:
            return rows
        if outcome == rowkernel.GIVE_UP:
            return None
        # NEED_ROOM: more rows, values, text bytes or fix-up slots
        left = end - pos
        for sink in (before, after):
            sink.grow(rows=max(sink.lvalid.shape[0], 64),
                      values=max(sink.vvalid.shape[0], 4 * e.table.column_count),
                      data=max(sink.data.shape[0], 8 * left + 4096))
        if nfix == fix.shape[0]:
            fix = _fix_scratch(2 * fix.shape[0])
