"""One bronze image column (``row_before`` or ``row_after``, ``list<binary>``) being built.

The buffers are those of the Arrow array itself: the values' bytes, their offsets and
validity, and per row the list offsets and validity, in numpy arrays that grow by doubling.
The compiled row loop (``rowkernel``) writes into them directly; images decoded in Python
(events the loop does not take, the stream, or no numba) are added as lists and copied in
through Arrow in one step per run of such rows. Values the loop only measured (FLOAT, DOUBLE,
JSON, old temporals: *fix-ups*) are rendered in Python and put in place when the array is
built. :meth:`mark` / :meth:`rollback` undo an event that failed half-way, so the column and
the batch's other columns always hold the same rows.

Growth is by need: :meth:`reserve` makes one buffer at least the size asked (doubling, so
appends stay amortised) and checks the arithmetic first: Arrow's ``binary`` and ``list``
arrays offset with int32, so a column holds at most :data:`MAX_SIZE` values and data bytes;
a size past that (or negative) raises :class:`ImageTooLargeError` before any allocation.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.errors import ImageTooLargeError

__all__ = ["ImageSink", "IMAGE_TYPE", "MAX_SIZE"]

IMAGE_TYPE = pa.list_(pa.binary())
# The most rows, values or data bytes one column can hold: Arrow's offsets are int32.
MAX_SIZE = 2**31 - 1


class ImageSink:
    """Buffers of one ``list<binary>`` column; see the module docstring."""

    def __init__(self, rows: int = 1024, values: int = 16384, data: int = 1 << 20) -> None:
        self.data = np.empty(data, np.uint8)
        self.voff = np.zeros(values + 1, np.int32)
        self.vvalid = np.empty(values, np.uint8)
        self.loff = np.zeros(rows + 1, np.int32)
        self.lvalid = np.empty(rows, np.uint8)
        self.cnt = np.zeros(3, np.int64)  # values, data bytes, rows (what the loop writes)
        self._fix_at: list[int] = []  # value index of each fix-up …
        self._fix_value: list[bytes] = []  # … and its bronze text
        self._python: list = []  # images added in Python, not copied in yet

    # -- size -----------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        return int(self.cnt[1])

    @property
    def used(self) -> tuple[int, int, int]:
        """(rows, values, data bytes) written so far."""
        nv, nb, nr = (int(x) for x in self.cnt)
        return nr, nv, nb

    def grow(self, rows: int = 0, values: int = 0, data: int = 0) -> bool:
        """Room for at least this many more rows, values and data bytes (:meth:`reserve`)."""
        nr, nv, nb = self.used
        return self.reserve(rows=nr + rows, values=nv + values, data=nb + data)

    def reserve(self, rows: int = 0, values: int = 0, data: int = 0) -> bool:
        """Buffers holding at least ``rows`` rows, ``values`` values and ``data`` bytes in
        all; whether any buffer grew. Raises :class:`ImageTooLargeError` (not located: the
        caller knows the event) for a size past :data:`MAX_SIZE`, allocating nothing."""
        for what, size in (("rows", rows), ("values", values), ("data bytes", data)):
            if not 0 <= size <= MAX_SIZE:
                raise ImageTooLargeError(
                    f"a bronze image column would need {size:,} {what}: more than the "
                    f"{MAX_SIZE:,} one Arrow column holds (the event's images are too large "
                    f"for one batch)")
        nr, nv, nb = self.used
        grew = False
        if data > self.data.shape[0]:
            self.data = _grown(self.data, data, nb)
            grew = True
        if values > self.vvalid.shape[0]:
            self.vvalid = _grown(self.vvalid, values, nv)
            self.voff = _grown(self.voff, values + 1, nv + 1)
            grew = True
        if rows > self.lvalid.shape[0]:
            self.lvalid = _grown(self.lvalid, rows, nr)
            self.loff = _grown(self.loff, rows + 1, nr + 1)
            grew = True
        return grew

    # -- undo -----------------------------------------------------------------------------
    def mark(self) -> tuple:
        self.flush_python()
        return (self.cnt.copy(), len(self._fix_at))

    def rollback(self, mark: tuple) -> None:
        self._python.clear()
        self.cnt[:] = mark[0]
        del self._fix_at[mark[1]:], self._fix_value[mark[1]:]

    # -- adding ---------------------------------------------------------------------------
    def add_nulls(self, n: int) -> None:
        """``n`` rows without this image (NULL lists)."""
        if self._python:
            self._python.extend([None] * n)
            return
        self.grow(rows=n)
        r = int(self.cnt[2])
        self.loff[r + 1:r + n + 1] = self.loff[r]
        self.lvalid[r:r + n] = 0
        self.cnt[2] = r + n

    def add_python(self, images) -> None:
        """Rows decoded in Python: each a list of ``bytes``/``None`` values, or ``None``."""
        self._python.extend(images)

    def add_fixup(self, value_index: int, value: bytes) -> None:
        self._fix_at.append(value_index)
        self._fix_value.append(value)

    def add_fixups(self, value_indexes: list[int], values: list[bytes]) -> None:
        self._fix_at.extend(value_indexes)
        self._fix_value.extend(values)

    def flush_python(self) -> None:
        """Copy the rows added in Python into the buffers (one Arrow conversion)."""
        if not self._python:
            return
        arr = pa.array(self._python, IMAGE_TYPE)
        self._python = []
        n = len(arr)
        vals = arr.values  # a fresh array: offset 0, its values exactly the rows' values
        nvals = len(vals)
        vbuf = vals.buffers()
        offs = (np.frombuffer(vbuf[1], np.int32)[:nvals + 1] if nvals
                else np.zeros(1, np.int32))
        nbytes = int(offs[-1] - offs[0])
        self.grow(rows=n, values=nvals, data=nbytes)
        nv, nb, nr = (int(x) for x in self.cnt)
        if nbytes:
            start = int(offs[0])
            self.data[nb:nb + nbytes] = np.frombuffer(vbuf[2], np.uint8)[start:start + nbytes]
        self.voff[nv + 1:nv + nvals + 1] = offs[1:] - offs[0] + nb
        self.vvalid[nv:nv + nvals] = _valid(vals)
        loffs = np.frombuffer(arr.buffers()[1], np.int32)[:n + 1]
        self.loff[nr + 1:nr + n + 1] = loffs[1:] - loffs[0] + nv
        self.lvalid[nr:nr + n] = _valid(arr)
        self.cnt[:] = (nv + nvals, nb + nbytes, nr + n)

    # -- the array ------------------------------------------------------------------------
    def to_arrow(self) -> pa.ListArray:
        """The column's array (zero-copy over the buffers; the sink must not be used after)."""
        self.flush_python()
        nv, nb, nr = (int(x) for x in self.cnt)
        vvalid = self.vvalid[:nv]
        vnulls = int(nv - np.count_nonzero(vvalid))
        values = pa.Array.from_buffers(
            pa.binary(), nv,
            [_bitmap(vvalid) if vnulls else None, pa.py_buffer(self.voff[:nv + 1]),
             pa.py_buffer(self.data[:nb])], null_count=vnulls)
        if self._fix_at:
            extra = pa.array(self._fix_value, pa.binary())
            take = np.arange(nv, dtype=np.int64)
            take[np.asarray(self._fix_at, np.int64)] = nv + np.arange(len(extra), dtype=np.int64)
            values = pc.take(pa.concat_arrays([values, extra]), pa.array(take))
        lvalid = self.lvalid[:nr]
        lnulls = int(nr - np.count_nonzero(lvalid))
        return pa.Array.from_buffers(
            IMAGE_TYPE, nr, [_bitmap(lvalid) if lnulls else None,
                             pa.py_buffer(self.loff[:nr + 1])],
            null_count=lnulls, children=[values])


def _grown(arr: np.ndarray, need: int, keep: int) -> np.ndarray:
    """``arr`` in a buffer of at least ``need`` elements: twice its size (at most one past
    :data:`MAX_SIZE`, the offsets' length) unless ``need`` is more; its first ``keep`` kept."""
    out = np.empty(max(need, min(2 * arr.shape[0], MAX_SIZE + 1)), arr.dtype)
    out[:keep] = arr[:keep]
    return out


def _bitmap(valid: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _valid(arr: pa.Array) -> np.ndarray:
    """Per element 1 (valid) or 0 (null), as uint8."""
    if arr.null_count == 0:
        return np.ones(len(arr), np.uint8)
    return np.asarray(arr.is_valid()).astype(np.uint8)
