"""The undecoded rows of a rows event (``RowsEvent.pending``) → a bronze batch's image sinks.

The compiled loop (``rowkernel``) writes the rows into the ``row_before``/``row_after`` sinks;
the values it only measured (fix-ups) are rendered here by the columns' Python decoders. When
the loop gives up on a row (a value it cannot vouch for), or fails in any way bad bytes do
not explain, everything this event wrote is undone and the whole event is decoded in Python
(``rows.python_rows``) — which returns the same rows or raises the error ``decode_rows``
would, located here as the parser would. The sinks grow by what the loop says it lacks.
"""

from __future__ import annotations

import logging
import struct
import threading

import numpy as np

from pipelines.binlog import coltypes as T
from pipelines.binlog import events as ev
from pipelines.binlog.fast import rowkernel
from pipelines.binlog.fast.image_sink import ImageSink
from pipelines.binlog.rows import python_rows
from pipelines.errors import DecodeError, ImageTooLargeError
from pipelines.vocabulary import DELETE, INSERT, UPDATE

__all__ = ["decode_into"]

log = logging.getLogger(__name__)
_EIGHT = np.arange(8, dtype=np.int64)
_WARNED = False
_KIND = {INSERT: 0, DELETE: 1, UPDATE: 2}
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
    first = e.present_after if e.kind == INSERT else e.present_before
    second = e.present_after if e.kind == UPDATE else None
    key = ("kernel", e.kind, None if first is None else tuple(first),
           None if second is None else tuple(second))
    progs = cache.get(key)
    if progs is None:
        uns = tm.unsigned
        prog_a = rowkernel.program(tm.column_types, tm.column_meta, uns, first)
        prog_b = (rowkernel.program(tm.column_types, tm.column_meta, uns, second)
                  if e.kind == UPDATE else prog_a)
        progs = cache[key] = (prog_a, prog_b)
    return progs


def decode_into(e: ev.RowsEvent, before: ImageSink, after: ImageSink, file: str) -> int:
    """Decode ``e.pending`` into the sinks; return the number of rows. Raises the
    :class:`DecodeError` the parser would have raised for this event (with ``file``)."""
    p = e.pending
    marks = before.mark(), after.mark()
    try:
        n = _fast(e, before, after)
        if n is None:  # gave up: the reference decoding takes the whole event
            before.rollback(marks[0])
            after.rollback(marks[1])
            rows, _ = python_rows(e.table, e.kind, p.type_code, p.body, p.pos,
                                  e.present_before if e.kind != INSERT else e.present_after,
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
    """Rows written by the compiled loop, or ``None`` when it gave up (sinks to be undone).

    A NEED_ROOM says what is lacking and how much (``rowkernel.ROOM_*``): that one buffer
    grows, by doubling, and nothing else does. A call that made no progress and left
    nothing to grow gives the event to the reference decoding instead of asking again."""
    p = e.pending
    prog_a, prog_b = _programs(e)
    buf = np.frombuffer(p.body, np.uint8)
    end = len(p.body)
    pos = p.pos
    kind = _KIND[e.kind]
    state = rowkernel.new_state()
    decs = e.table.decoders()
    rows = 0
    fix = _fix_scratch()
    while True:
        state[2] = 0
        outcome = rowkernel.run(buf, pos, end, kind, prog_a, prog_b, before, after, fix, state)
        pos, done, nfix = int(state[0]), int(state[1]), int(state[2])
        rows += done
        try:
            _render_fixups(fix[:nfix], buf, p.body, decs, _doubles(e.table), before, after)
        except (DecodeError, IndexError, ValueError, struct.error):
            return None  # the reference decoding raises its own error for this row
        if outcome == rowkernel.DONE:
            return rows
        if outcome != rowkernel.NEED_ROOM:
            return None
        if int(state[3]) == rowkernel.ROOM_FIX:
            if not done:  # one row has more fix-ups than the scratch holds
                fix = _fix_scratch(2 * fix.shape[0])
            continue  # the next call starts the scratch empty
        if not _make_room(state, before, after) and not done:
            return None


def _doubles(tm) -> np.ndarray:
    """Per column whether it is a DOUBLE (its fix-ups are rendered in one step)."""
    cache = tm.image_cache()
    found = cache.get("doubles")
    if found is None:
        found = cache["doubles"] = np.array([t == T.DOUBLE for t in tm.column_types], bool)
    return found


def _render_fixups(fix: np.ndarray, buf: np.ndarray, body: bytes, decs: list,
                   doubles: np.ndarray, before: ImageSink, after: ImageSink) -> None:
    """Render the values the loop only measured and put them in their sinks. DOUBLEs, the
    most common, in one step: their 8 bytes gathered at once, each rendered as the column's
    decoder does (``repr`` of the float: ``values._double``); the rest one by one."""
    if not fix.shape[0]:
        return
    dbl = doubles[fix[:, 3]]
    if dbl.any():
        got = fix[dbl]
        vals = buf[got[:, 2, None] + _EIGHT].view("<f8").ravel().tolist()
        texts = " ".join(map(float.__repr__, vals)).encode("ascii").split(b" ")
        sides = got[:, 0]
        for side, sink in ((0, before), (1, after)):
            mine = sides == side
            if mine.all():
                sink.add_fixups(got[:, 1].tolist(), texts)
            elif mine.any():
                sink.add_fixups(got[mine, 1].tolist(),
                                [t for t, m in zip(texts, mine.tolist()) if m])
        fix = fix[~dbl]
    for side, at, where, col in fix.tolist():
        (before if side == 0 else after).add_fixup(at, decs[col](body, where)[0])


def _make_room(state: np.ndarray, before: ImageSink, after: ImageSink) -> bool:
    """Grow the one buffer a NEED_ROOM lacks to the size it needs; whether it grew."""
    what, side, size = (int(x) for x in state[3:6])
    sink = before if side == 0 else after
    if what == rowkernel.ROOM_ROWS:
        return sink.reserve(rows=size)
    if what == rowkernel.ROOM_VALUES:
        return sink.reserve(values=size)
    if what == rowkernel.ROOM_DATA:
        return sink.reserve(data=size)
    return False


def _fast(e: ev.RowsEvent, before: ImageSink, after: ImageSink) -> int | None:
    """:func:`_compiled`, or ``None`` (the reference decoding takes the event) when the
    fast path fails in a way bad bytes cannot explain (a defect of the loop, not of the
    binlog): logged once per process. An impossible size is no such failure: the reference
    decoding would need it too, so :class:`ImageTooLargeError` goes to the caller."""
    global _WARNED
    try:
        return _compiled(e, before, after)
    except ImageTooLargeError:
        raise
    except Exception as exc:  # noqa: BLE001 - any defect of the fast path: the reference decodes
        if not _WARNED:
            _WARNED = True
            log.warning("bronze: the compiled row loop failed on %s at pos %s (%s: %s); the "
                        "reference decoding takes such events", e.table.table,
                        e.header.pos, type(exc).__name__, exc)
        return None
