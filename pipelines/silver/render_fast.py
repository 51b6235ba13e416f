"""Silver images of one table's rows with full row images, rendered by compiled loops.

``images.TableRenderer`` builds each column's JSON texts as an Arrow array (a strided take per
column, a kernel, then a join of every column into the object): each value is copied four or
five times. Here (``render_jit``) each image side is written in one pass straight from the
bronze ``list<binary>`` buffers — the object, and where each value's text lies in it — and the
changed columns of UPDATEs are found by comparing those texts in place. Columns whose text
needs a lookup (ENUM, SET, byte strings, other character sets, JSON-valued text, UNSIGNED
re-reads) are rendered by their Arrow kernel first and copied in.

Only for images where every column is present (FULL row images) and texts that are valid
UTF-8; otherwise :func:`render` returns ``None`` and the Arrow path renders the rows. The
output is byte for byte the Arrow path's (``tests/silver/test_render_fast.py``).

The loops read a group's rows where they lie in the batch (``ImageBuffers`` and the rows'
positions): the images are not copied into the group's order first.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.binlog import coltypes as T
from pipelines.binlog.fast.rowkernel import jit_module
from pipelines.silver.render_columns import ImageColumns
from pipelines.silver.render_kinds import (KIND_JSON as _JSON, KIND_NUM as _NUM,
                                           KIND_PRE as _PRE, KIND_QUOTED as _QUOTED,
                                           KIND_UTF8 as _UTF8, KIND_UTF8_BMP as _UTF8_BMP,
                                           OUT_ROOM as _ROOM)
from pipelines.vocabulary import UPDATE

__all__ = ["ImageBuffers", "available", "column_kinds", "loaded", "name_table", "render",
           "true_bytes", "valid_bytes"]

_JIT = None


def available() -> bool:
    """Whether the compiled loops can be used (numba importable, ``BINLAKE_ROW_KERNEL`` on)."""
    global _JIT
    if _JIT is None:
        _JIT = jit_module("pipelines.silver.render_jit")
    return _JIT is not None


def loaded() -> bool:
    """Whether this process holds the loops' machine code already (a warm-up or a compiled
    render ran here): then rendering with them costs nothing more to load. Imports nothing."""
    return _JIT is not None and all(
        getattr(_JIT, name).signatures for name in ("render_side", "changed_columns", "gather"))


def name_table(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of UTF-8 texts, for the loops."""
    data = [t.encode("utf-8") for t in texts]
    off = np.zeros(len(data) + 1, np.int64)
    off[1:] = np.cumsum([len(d) for d in data])
    return off, np.frombuffer(b"".join(data) or b"\0", np.uint8).copy()


def column_kinds(spec) -> np.ndarray:
    """Per column of a ``TableSpec``: how the loop writes its text (``_PRE``: its Arrow kernel
    renders it); mirrors ``render_columns.column_kernel``."""
    kinds = []
    for c in spec.columns:
        t = c.col_type
        if t in T.INTEGER_TYPES:
            kinds.append(_PRE if c.fix_unsigned else _NUM)
        elif t in (T.FLOAT, T.DOUBLE, T.YEAR, T.BIT):
            kinds.append(_NUM)
        elif t in T.QUOTED_TYPES:
            kinds.append(_QUOTED)
        elif t == T.JSON:
            kinds.append(_JSON)
        elif (t in T.BYTES_TYPES and t not in (T.GEOMETRY, T.VECTOR) and not c.is_json
              and c.charset in ("utf8mb4", "utf8mb3", "utf8")):
            kinds.append(_UTF8 if c.charset == "utf8mb4" else _UTF8_BMP)
        else:
            kinds.append(_PRE)
    return np.array(kinds, np.int32)


def valid_bytes(arr: pa.Array) -> np.ndarray:
    """Per element of ``arr``: 1 where it is not null, else 0 (uint8), from its validity bitmap
    (Arrow's ``is_valid().to_numpy()`` converts one boolean at a time)."""
    m = len(arr)
    bitmap = arr.buffers()[0]
    if bitmap is None or arr.null_count == 0:
        return np.ones(m, np.uint8)
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), count=arr.offset + m,
                         bitorder="little")
    return bits[arr.offset:]


def true_bytes(flags: pa.Array) -> np.ndarray:
    """Per element of a boolean array: 1 where it is true (null counts as false), uint8."""
    if flags.null_count:
        flags = flags.fill_null(False)
    bits = np.unpackbits(np.frombuffer(flags.buffers()[1], np.uint8),
                         count=flags.offset + len(flags), bitorder="little")
    return bits[flags.offset:]


class ImageBuffers:
    """A ``list<binary>`` image column as the loops read it: list offsets (int32[m + 1]),
    list valid (uint8[m]), value offsets (int32), value bytes, value valid (uint8), as numpy
    views where Arrow allows. Read once per batch; each group passes its rows' positions."""

    def __init__(self, arr: pa.Array) -> None:
        self.array = arr
        self.loff = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
        self.lvalid = valid_bytes(arr)
        child = arr.values
        bufs = child.buffers()
        self.voff = np.frombuffer(bufs[1], np.int32)[child.offset:child.offset + len(child) + 1]
        self.vdata = (np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None
                      else np.zeros(0, np.uint8))
        self.vvalid = valid_bytes(child)

    def rows(self, at: np.ndarray | None) -> pa.Array:
        """The images of the rows ``at`` (all, in order, with ``None``) as an Arrow array: a
        slice where they are consecutive, else taken."""
        if at is None:
            return self.array
        if len(at) and at[-1] - at[0] == len(at) - 1 and (len(at) == 1
                                                         or np.all(np.diff(at) == 1)):
            return self.array.slice(int(at[0]), len(at))
        return self.array.take(pa.array(at))


def _full(present: pa.Array) -> bool:
    """Whether every column of every image is present (no MINIMAL/NOBLOB absences)."""
    if present.null_count == len(present):
        return True
    return bool(pc.all(present.flatten()).as_py() in (True, None))


def _strings(off: np.ndarray, data: np.ndarray, valid: np.ndarray, m: int) -> pa.Array:
    nulls = int(m - np.count_nonzero(valid[:m]))
    bitmap = pa.py_buffer(np.packbits(valid[:m], bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.string(), m, [bitmap, pa.py_buffer(off[:m + 1]),
                                                  pa.py_buffer(data[:int(off[m])])],
                                 null_count=nulls)


class _Side:
    """One image side rendered: objects, and each (row, column) text's span in them."""

    def __init__(self, image: ImageBuffers, rows: np.ndarray, kinds: np.ndarray,
                 pre: np.ndarray, pre_texts: tuple, names: tuple) -> None:
        jit = _JIT
        m, n = len(rows), len(kinds)
        loff, voff = image.loff, image.voff
        self.s = np.empty((m, n), np.int64)
        self.e = np.empty((m, n), np.int64)
        ooff = np.empty(m + 1, np.int32)
        self.valid = np.empty(m, np.uint8)
        state = np.zeros(2, np.int64)
        # The value bytes of these rows (the image's child array holds every group's values).
        size = int((voff[loff[rows + 1]] - voff[loff[rows]]).sum()) * 2 \
            + m * (len(names[1]) + 4 * n + 2) + 64
        while True:
            out = np.empty(size, np.uint8)
            outcome = jit.render_side(rows, loff, image.lvalid, voff, image.vdata,
                                      image.vvalid, kinds, pre, *pre_texts, *names, out, ooff,
                                      self.valid, self.s, self.e, state)
            if outcome != _ROOM:
                break
            size = max(2 * size, int(state[0]) * 2)
        self.ok = outcome == 0
        self.out = out
        self.objects = _strings(ooff, out, self.valid, m) if self.ok else None


def _pre_texts(tr, image: pa.Array, pre_cols: list[int], bad: np.ndarray) -> list[pa.Array]:
    """The Arrow kernels' texts of the ``pre_cols`` columns of one side, aligned to the rows
    (null where no image); rows whose value cannot be rendered are marked in ``bad``."""
    if not pre_cols:
        return []
    cols = ImageColumns(image, tr.n)
    return [cols.aligned(tr.column_texts(cols, i, bad)) for i in pre_cols]


def _pre_buffers(arrays: list[pa.Array], m: int) -> tuple:
    if not arrays:
        return np.zeros(1, np.int32), np.zeros(1, np.uint8), np.zeros(1, np.uint8)
    cat = pa.concat_arrays([a.cast(pa.string()) for a in arrays])
    bufs = cat.buffers()
    off = np.frombuffer(bufs[1], np.int32)[cat.offset:cat.offset + len(cat) + 1]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(1, np.uint8)
    return off, data, valid_bytes(cat)


def render(tr, event_type: pa.Array, sides: tuple[ImageBuffers, ImageBuffers],
           at: np.ndarray | None, before_present: pa.Array, after_present: pa.Array,
           is_insert: pa.Array, bad: np.ndarray):
    """(row_before, row_after, changed_columns, key column texts, the UPDATEs that may change
    the key (``TableRenderer.key_changes``), the key texts with theirs from the after image)
    of well-formed rows of one ``TableRenderer``'s table, or ``None``: not for the compiled loops (an absent column, text
    that is not valid UTF-8); values that cannot be rendered are marked in ``bad``.

    ``sides``: the before and after images; the rows are those at positions ``at`` of them
    (all of them, in order, with ``None``), aligned with the other arguments."""
    if not available() or not (_full(before_present) and _full(after_present)):
        return None
    m, n = len(event_type), tr.n
    rows = np.arange(m, dtype=np.int64) if at is None else at.astype(np.int64, copy=False)
    kinds = tr.fast_kinds
    pre_cols = [i for i in range(n) if kinds[i] == _PRE]
    pre = np.full(n, -1, np.int32)
    pre[pre_cols] = np.arange(len(pre_cols), dtype=np.int32)
    marked = bad.copy()
    out_sides = []
    for image in sides:
        texts = _pre_buffers(_pre_texts(tr, image.rows(at) if pre_cols else None, pre_cols,
                                        marked), m)
        side = _Side(image, rows, kinds, pre, texts, tr.fast_names)
        if not side.ok:
            return None
        out_sides.append(side)
    b, a = out_sides
    bad |= marked
    both_np = true_bytes(pc.equal(event_type, UPDATE)) & b.valid & a.valid
    changed = pa.nulls(m, pa.string())
    if both_np.any():
        size = m * (len(tr.fast_items[1]) + 2 * n + 2) + 2
        out = np.empty(size, np.uint8)
        off = np.empty(m + 1, np.int32)
        valid = np.empty(m, np.uint8)
        _JIT.changed_columns(both_np, b.out, b.s, b.e, a.out, a.s, a.e, *tr.fast_items, out,
                             off, valid)
        changed = _strings(off, out, valid, m)
    insert = true_bytes(is_insert)  # the key from the after image
    keys = _keys(tr, b, a, insert, m)
    # UPDATEs that may change the key: their after image's key too (pk_values_after)
    cand = tr.key_changes(event_type, changed)
    after = _keys(tr, b, a, cand.astype(np.uint8), m) if cand.any() else []
    return b.objects, a.objects, changed, keys, cand, after


def _keys(tr, b: "_Side", a: "_Side", from_after: np.ndarray, m: int) -> list[pa.Array]:
    """The key columns' JSON texts: of the after image where ``from_after``, else of the
    before image."""
    keys = []
    for i in tr.spec.pk:
        b_s = np.where(b.valid != 0, b.s[:, i], -1)  # no image: its spans are not written
        a_s = np.where(a.valid != 0, a.s[:, i], -1)
        lengths = np.where(from_after, np.where(a_s >= 0, a.e[:, i] - a_s, 0),
                           np.where(b_s >= 0, b.e[:, i] - b_s, 0))
        out = np.empty(int(lengths.sum()) + 1, np.uint8)
        off = np.empty(m + 1, np.int32)
        valid = np.empty(m, np.uint8)
        _JIT.gather(from_after, b.out, b_s, b.e[:, i], a.out, a_s, a.e[:, i], out, off, valid)
        keys.append(_strings(off, out, valid, m))
    return keys
