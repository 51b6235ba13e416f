"""Pure: one column's bronze values (an Arrow binary array) → their silver JSON texts, at once.

The vectorised form of :mod:`pipelines.silver.render` (``docs/types.md``): a kernel is built
once per column (:func:`column_kernel`) and renders a whole array per call with Arrow compute
functions, one pass per column kind:

* numbers are their bronze text; temporal and DECIMAL values that text in quotes; UNSIGNED
  integers that the binlog logged as signed are re-read through a wrapping integer cast;
* UTF-8 text is validated by one cast and JSON-escaped by substring replacement (the rare
  value with a control character goes through ``json.dumps``, so the text is exactly what
  ``render.make_renderer`` writes);
* every other kind (ENUM, SET, byte strings, other character sets, JSON-valued text) renders
  each *distinct* value once with the per-value renderer and spreads the results with a take.

A kernel returns the JSON texts (null where the value is null) and the positions whose value
cannot be rendered (:class:`SchemaMismatchError` from the per-value renderer): silver
quarantines those rows, with the reason :func:`value_error` gives.
"""

from __future__ import annotations

import json
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.binlog import coltypes as T
from pipelines.errors import SchemaMismatchError
from pipelines.silver.render import ColumnSpec, make_renderer

__all__ = ["ImageColumns", "Kernel", "column_kernel", "value_error"]

# (texts, positions that cannot be rendered or None)
Kernel = Callable[[pa.Array], "tuple[pa.Array, np.ndarray | None]"]

_UTF8 = ("utf8mb4", "utf8mb3", "utf8")
_CONTROL = "[\\x00-\\x1f]"
_NON_BMP = "[\\x{10000}-\\x{10ffff}]"


def value_error(spec: ColumnSpec, value: bytes) -> SchemaMismatchError | None:
    """Why ``value`` of ``spec``'s column cannot be rendered (None if it can)."""
    try:
        make_renderer(spec)(value)
    except SchemaMismatchError as exc:
        return exc
    return None


def _as_text(values: pa.Array) -> pa.Array:
    return values.cast(pa.string())


def _numbers(values: pa.Array) -> tuple[pa.Array, None]:
    return _as_text(values), None


def _quoted(values: pa.Array) -> tuple[pa.Array, None]:
    return pc.binary_join_element_wise('"', _as_text(values), '"', ""), None


def _unsigned(width: int) -> Kernel:
    unsigned = pa.uint64() if width == 8 else pa.int64()
    wrap = 1 << (8 * width)

    def render(values: pa.Array) -> tuple[pa.Array, None]:
        n = _as_text(values).cast(pa.int64())
        if width == 8:
            fixed = n.cast(unsigned, safe=False)  # two's complement: -1 → 2**64 - 1
        else:
            fixed = pc.if_else(pc.less(n, 0), pc.add(n, wrap), n)
        return fixed.cast(pa.string()), None

    return render


def _distinct(spec: ColumnSpec) -> Kernel:
    """Render each distinct value once with the per-value renderer."""
    try:
        one = make_renderer(spec)
    except SchemaMismatchError:
        one = None  # every non-null value is an error (the reason: value_error)

    def render(values: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        codes = values.dictionary_encode()
        texts: list[str | None] = []
        bad: list[int] = []
        for j, value in enumerate(codes.dictionary.to_pylist()):
            try:
                if one is None:
                    raise SchemaMismatchError(spec.name)
                texts.append(one(value))
            except SchemaMismatchError:
                texts.append(None)
                bad.append(j)
        rendered = pa.array(texts, pa.string()).take(codes.indices)
        if not bad:
            return rendered, None
        hit = pc.is_in(codes.indices, pa.array(bad, codes.indices.type))
        return rendered, np.flatnonzero(hit.fill_null(False).to_numpy(zero_copy_only=False))

    return render


def _utf8_text(spec: ColumnSpec) -> Kernel:
    slow = _distinct(spec)
    bmp_only = spec.charset in ("utf8mb3", "utf8")

    def render(values: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        try:
            text = _as_text(values)
        except pa.ArrowInvalid:
            return slow(values)  # invalid UTF-8 somewhere: find and name it value by value
        if bmp_only and pc.any(pc.match_substring_regex(text, _NON_BMP)).as_py():
            return slow(values)
        escaped = pc.replace_substring(pc.replace_substring(text, "\\", "\\\\"), '"', '\\"')
        out = pc.binary_join_element_wise('"', escaped, '"', "")
        control = pc.match_substring_regex(text, _CONTROL).fill_null(False)
        if pc.any(control).as_py():
            where = np.flatnonzero(control.to_numpy(zero_copy_only=False))
            exact = [json.dumps(s, ensure_ascii=False)
                     for s in text.take(pa.array(where)).to_pylist()]
            out = pc.replace_with_mask(out, control, pa.array(exact, pa.string()))
        return out, None

    return render


def column_kernel(spec: ColumnSpec) -> Kernel:
    """The kernel rendering ``spec``'s column (``make_renderer``'s texts, a whole array at once)."""
    t = spec.col_type
    if t in T.INTEGER_TYPES:
        return _unsigned(T.INTEGER_WIDTH[t]) if spec.fix_unsigned else _numbers
    if t in (T.FLOAT, T.DOUBLE, T.YEAR, T.BIT):
        return _numbers
    if t in T.QUOTED_TYPES:
        return _quoted
    if t == T.JSON:
        return _numbers  # the JSON text itself; invalid UTF-8 raises, as make_renderer does
    if (t in T.BYTES_TYPES and t not in (T.GEOMETRY, T.VECTOR) and not spec.is_json
            and spec.charset in _UTF8):
        return _utf8_text(spec)
    return _distinct(spec)


class ImageColumns:
    """One image side (``list<binary>``) split by table column: each column's values for the
    rows that have an image (``rows``, ``k`` of them), and :meth:`aligned` back to every row."""

    def __init__(self, image: pa.Array, n: int) -> None:
        valid = image.is_valid().to_numpy(zero_copy_only=False)
        self.valid, self.n = valid, n
        self.rows = np.flatnonzero(valid)
        self.k = len(self.rows)
        self.every = self.k == len(image)
        self.lists = image if self.every else image.take(pa.array(self.rows))
        self.flat = self.lists.flatten()
        self._spread: pa.Array | None = None

    def column(self, i: int) -> pa.Array:
        """Column ``i``'s values of the rows with an image."""
        return self.flat.take(pa.array(np.arange(i, self.k * self.n, self.n)))

    def aligned(self, texts: pa.Array) -> pa.Array:
        """``texts`` (one per row with an image) spread to every row, null where none."""
        if self.every:
            return texts
        if self._spread is None:
            self._spread = pa.array(np.cumsum(self.valid) - 1, pa.int64(), mask=~self.valid)
        return texts.take(self._spread)
