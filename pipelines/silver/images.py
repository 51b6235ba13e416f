"""Pure: row changes of one table (Arrow arrays) → silver's JSON images, changed_columns,
pk_values (and pk_values_after, the after image's key where an UPDATE changes it) and
absent_columns, a whole batch at once.

The JSON text of an image is assembled from per-column pieces (``, "name": value``), each
column rendered in one pass by its kernel (``render_columns``); a column absent from a
MINIMAL/NOBLOB image has no piece. A row that cannot be rendered (an image of the wrong
length, a value its column cannot hold, a key image or key column missing) is left out of
the result with its quarantine reason, found by walking that row value by value in the order
the checks are documented in ``docs/silver.md``: the before image, the after image, the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.binlog import coltypes as T
from pipelines.errors import SchemaMismatchError
from pipelines.silver import render_fast
from pipelines.silver.naming import TableSpec
from pipelines.silver.render import make_renderer
from pipelines.silver.render_columns import ImageColumns, column_kernel, value_error
from pipelines.vocabulary import INSERT, UPDATE

__all__ = ["SilverImages", "TableRenderer"]

_join = pc.binary_join_element_wise
_NULL = pa.scalar(None, pa.string())
# Types whose JSON text is a bare number (or null): as pk_values text, it stays as it is.
_BARE = T.INTEGER_TYPES | {T.FLOAT, T.DOUBLE, T.YEAR, T.BIT, T.NULL}


@dataclass
class SilverImages:
    """The rendered columns of the rows that render (``rows``: their positions in the input)."""

    rows: np.ndarray
    row_before: pa.Array
    row_after: pa.Array
    changed_columns: pa.Array
    pk_values: pa.Array
    absent_columns: pa.Array
    errors: list[tuple[int, str]]  # (position in the input, quarantine reason)
    # The after image's key of an UPDATE whose key it changes (NULL otherwise): docs/silver.md
    pk_values_after: pa.Array | None = None

    def after_keys(self) -> pa.Array:
        """``pk_values_after``, all NULL when none was set."""
        if self.pk_values_after is None:
            return _nulls(len(self.pk_values))
        return self.pk_values_after


def _pieces_joined(pieces: list[pa.Array], m: int, opening: str, closing: str) -> pa.Array:
    """``opening + ", ".join(non-null pieces) + closing`` per row; each piece starts ", "."""
    if not pieces:
        return pa.array([opening + closing] * m, pa.string())
    body = _join(*[p.fill_null("") if p.null_count else p for p in pieces], "")
    return _join(opening, pc.utf8_slice_codeunits(body, 2), closing, "")


def _nulls(n: int) -> pa.Array:
    return pa.nulls(n, pa.string())


class TableRenderer:
    """Renders row changes of one :class:`TableSpec` (kernels built once)."""

    def __init__(self, spec: TableSpec, compiled: bool = True) -> None:
        self.spec = spec
        self.compiled = compiled  # full images through render_fast's compiled loops
        self.n = len(spec.columns)
        self.names = [json.dumps(c.name, ensure_ascii=False) for c in spec.columns]
        self.plain = [c.name for c in spec.columns]
        self._error: SchemaMismatchError | None = None
        try:
            for c in spec.columns:
                make_renderer(c)
        except SchemaMismatchError as exc:
            self._error = exc  # raised only for rows with an image to render
        self._kernels = [column_kernel(c) for c in spec.columns]
        self._keys = [", " + name + ": " for name in self.names]
        self._items = [", " + name for name in self.names]
        self._free_form_key = [spec.columns[i].is_json or spec.columns[i].col_type == T.JSON
                               for i in spec.pk]
        self._bare_key = [spec.columns[i].col_type in _BARE for i in spec.pk]
        # for the compiled loops (render_fast): each column's kind, its key and item texts
        self.fast_kinds = render_fast.column_kinds(spec)
        self.fast_names = render_fast.name_table([name + ": " for name in self.names])
        self.fast_items = render_fast.name_table(self.names)

    # -- quarantine reasons (value by value; only for rows found unrenderable) -------------

    def reason(self, event_type: str, before, after, before_present, after_present) -> str | None:
        """Why this row change cannot be rendered; None when it can."""
        for image, present in ((before, before_present), (after, after_present)):
            if image is None:
                continue
            if len(image) != self.n:
                return f"image has {len(image)} values, schema has {self.n} columns"
            if present is not None and len(present) != self.n:
                return f"image has {len(present)} presence flags, schema has {self.n} columns"
            if self._error is not None:
                return str(self._error)
            for i, value in enumerate(image):
                if value is not None and (present is None or present[i]):
                    err = value_error(self.spec.columns[i], value)
                    if err is not None:
                        return str(err)
        key, present = (after, after_present) if event_type == INSERT else (before,
                                                                                before_present)
        if key is None:
            return f"{event_type} without its key image"
        for i in self.spec.pk:
            if present is not None and not present[i]:
                return f"primary key column {self.plain[i]} absent from the image"
        return None

    # -- the vectorised path ---------------------------------------------------------------

    def column_texts(self, cols: ImageColumns, i: int, bad: np.ndarray,
                     values: pa.Array | None = None) -> pa.Array:
        """Column ``i``'s JSON texts for ``cols``' rows (``values``: those values already
        taken out); rows whose value cannot be rendered are marked in ``bad``."""
        texts, failed = self._kernels[i](cols.column(i) if values is None else values)
        if failed is not None:
            bad[cols.rows[failed]] = True
        return texts

    def _side(self, image: pa.Array, present: pa.Array, bad: np.ndarray
              ) -> tuple[list[pa.Array], bool]:
        """Per column: JSON texts aligned to the rows (null: no image, or column absent); and
        whether any column is absent from an image."""
        m, n = len(image), self.n
        cols = ImageColumns(image, n)
        k = cols.k
        if k == 0:
            return [_nulls(m)] * n, False
        shown = None
        pres = present if cols.every else present.take(pa.array(cols.rows))
        if pres.null_count < k:
            shown = np.ones((k, n), dtype=bool)
            has = pres.is_valid().to_numpy(zero_copy_only=False)
            shown[has] = pres.flatten().to_numpy(zero_copy_only=False).reshape(-1, n)
        out = []
        partial = False
        for i in range(n):
            values = cols.column(i)
            shown_i = None if shown is None or shown[:, i].all() else pa.array(shown[:, i])
            if shown_i is not None:
                partial = True
                values = pc.if_else(shown_i, values, pa.nulls(k, values.type))
            texts = self.column_texts(cols, i, bad, values)
            if texts.null_count:
                texts = texts.fill_null("null")
            if shown_i is not None:
                texts = pc.if_else(shown_i, texts, _nulls(k))
            out.append(cols.aligned(texts))
        return out, partial

    def _object(self, cols: list[pa.Array], valid: pa.Array, partial: bool) -> pa.Array:
        if not partial and cols:  # every column present: one join (null where no image)
            parts = [self._keys[0][2:]]
            for key, col in zip(self._keys, cols):
                parts += [key, col] if len(parts) > 1 else [col]
            return _join("{" + parts[0], *parts[1:], "}", "")
        pieces = [_join(key, col, "") for key, col in zip(self._keys, cols)]
        obj = _pieces_joined(pieces, len(valid), "{", "}")
        return obj if valid.false_count == 0 else pc.if_else(valid, obj, _nulls(len(valid)))

    def _pk(self, key_cols: list[pa.Array]) -> pa.Array:
        parts = []
        for col, free_form, bare in zip(key_cols, self._free_form_key, self._bare_key):
            if bare:  # a number (or null): no quotes, no escapes
                parts.append(col)
                continue
            quoted = pc.starts_with(col, '"').fill_null(False)
            text = pc.if_else(quoted, pc.utf8_slice_codeunits(col, 1, -1), col)
            # A quoted text with an escape, or JSON text (not written by us), is read as JSON.
            escaped = quoted if free_form else pc.and_(
                quoted, pc.match_substring(col, "\\").fill_null(False))
            if pc.any(escaped).as_py():
                where = np.flatnonzero(escaped.to_numpy(zero_copy_only=False))
                exact = [json.loads(v) for v in col.take(pa.array(where)).to_pylist()]
                text = pc.replace_with_mask(text, escaped, pa.array(exact, pa.string()))
            parts.append(pc.replace_substring(pc.replace_substring(text, "\\", "\\\\"),
                                              "|", "\\|"))
        return _join(*parts, "|")

    def key_changes(self, event_type: pa.Array, changed: pa.Array) -> np.ndarray:
        """UPDATE rows whose ``changed_columns`` name a key column (any column of a table
        without PRIMARY KEY, whose key is every column): those whose after image may have
        another key. A cheap superset (a name is matched as its JSON text); the key texts
        themselves decide (:meth:`after_key`)."""
        if not self.spec.pk or not changed.null_count < len(changed):
            return np.zeros(len(changed), dtype=bool)
        is_update = render_fast.true_bytes(pc.equal(event_type, UPDATE)) != 0
        if self.spec.pk_kind != "primary_key":
            some = pc.not_equal(changed, "[]").fill_null(False)
            return is_update & (render_fast.true_bytes(some) != 0)
        hit = np.zeros(len(changed), dtype=bool)
        for i in self.spec.pk:
            hit |= render_fast.true_bytes(
                pc.match_substring(changed, self.names[i]).fill_null(False)) != 0
        return is_update & hit

    def after_key(self, cand: np.ndarray, key: pa.Array, after_cols: list[pa.Array]
                  ) -> pa.Array | None:
        """``pk_values_after``: the key of ``after_cols`` (the key columns' JSON texts of the
        after images) where ``cand`` and it differs from ``key``; None when no row has one."""
        if not cand.any():
            return None
        after = self._pk(after_cols)
        keep = pc.and_(pa.array(cand), pc.not_equal(after, key).fill_null(False))
        if not keep.true_count:
            return None
        return pc.if_else(keep, after, _nulls(len(key)))

    def render(self, event_type: pa.Array, before: pa.Array, after: pa.Array,
               before_present: pa.Array, after_present: pa.Array) -> SilverImages:
        """Render every row change of the ``list<binary>`` images ``before``/``after`` (aligned
        with the other arguments); the unrenderable ones come back in ``errors``."""
        sides = (render_fast.ImageBuffers(before), render_fast.ImageBuffers(after))
        return self.render_at(event_type, sides, None, before_present, after_present)

    def render_at(self, event_type: pa.Array, sides: tuple, at: np.ndarray | None,
                  before_present: pa.Array, after_present: pa.Array) -> SilverImages:
        """Render the row changes whose images lie at positions ``at`` of ``sides``
        (``render_fast.ImageBuffers``, e.g. a whole batch's; all of them, in order, with
        ``None``); the other arguments are aligned with the rows. The unrenderable ones come
        back in ``errors``. The compiled loops read the images where they lie; they are taken
        into the rows' order only for the Arrow path (MINIMAL images, text the loops leave
        to it) and for the refused rows' reasons."""
        m, n = len(event_type), self.n
        rows = np.arange(m, dtype=np.int64) if at is None else at.astype(np.int64, copy=False)
        bad = np.zeros(m, dtype=bool)
        shown = []
        for image, present in zip(sides, (before_present, after_present)):
            has = image.lvalid[rows] != 0
            bad |= has & (image.loff[rows + 1] - image.loff[rows] != n)
            bad |= pc.not_equal(pc.list_value_length(present), n).fill_null(False).to_numpy(
                zero_copy_only=False)
            if self._error is not None:
                bad |= has
            shown.append(has)
        is_insert = pc.equal(event_type, INSERT)
        bad |= ~np.where(render_fast.true_bytes(is_insert) != 0, shown[1], shown[0])  # the key
        if bad.any():  # render the well-formed rows only
            ok = np.flatnonzero(~bad)
            keep = pa.array(ok)
            inner = None if not len(ok) else self.render_at(
                event_type.take(keep), sides, rows[ok], before_present.take(keep),
                after_present.take(keep))
            return self._finish(ok, inner, event_type, sides, rows, before_present,
                                after_present, bad)
        fast = render_fast.render(self, event_type, sides, at, before_present, after_present,
                                  is_insert, bad) if self.compiled else None
        if fast is not None:  # full images: one compiled pass per side
            images = self._compiled_images(fast, m)
        else:
            before, after = (side.rows(at) for side in sides)
            images = self._arrow(event_type, before, after, before_present, after_present,
                                 is_insert, before.is_valid(), after.is_valid(), bad)
        if not bad.any():
            return images
        ok = np.flatnonzero(~bad)
        return self._finish(ok, _subset(images, ok), event_type, sides, rows, before_present,
                            after_present, bad)

    def _compiled_images(self, fast: tuple, m: int) -> SilverImages:
        row_before, row_after, changed, key, cand, after_key = fast
        pk = self._pk(key) if key else pa.array([""] * m, pa.string())
        return SilverImages(np.arange(m), row_before, row_after, changed, pk, _nulls(m), [],
                            self.after_key(cand, pk, after_key) if after_key else None)

    def _arrow(self, event_type, before, after, before_present, after_present, is_insert,
               b_valid, a_valid, bad: np.ndarray) -> SilverImages:
        """The images column by column with Arrow kernels (any image, MINIMAL ones too)."""
        m = len(event_type)
        b, b_partial = self._side(before, before_present, bad)
        a, a_partial = self._side(after, after_present, bad)
        inserts = is_insert.true_count
        key = [a[i] if inserts == m else b[i] if inserts == 0 else
               pc.if_else(is_insert, a[i], b[i]) for i in self.spec.pk]
        if b_partial or a_partial:
            for col in key:
                bad |= col.is_null().to_numpy(zero_copy_only=False)  # key column absent
        both = pc.and_(pc.equal(event_type, UPDATE), pc.and_(b_valid, a_valid))
        changed = _nulls(m)
        if both.true_count:
            changed = pc.if_else(both, _pieces_joined(
                [pc.if_else(pc.not_equal(bi, ai).fill_null(False), item, _NULL)
                 for bi, ai, item in zip(b, a, self._items)], m, "[", "]"), changed)
        absent = _nulls(m)
        if b_partial or a_partial:
            absent = _pieces_joined(
                [pc.if_else(pc.or_(pc.and_(b_valid, bi.is_null()),
                                   pc.and_(a_valid, ai.is_null())), item, _NULL)
                 for bi, ai, item in zip(b, a, self._items)], m, "[", "]")
            absent = pc.if_else(pc.equal(absent, "[]"), _nulls(m), absent)
        pk = self._pk(key) if key else pa.array([""] * m, pa.string())
        cand = self.key_changes(event_type, changed)
        # A MINIMAL after image holds the changed columns only: the others keep their value.
        after_key = [pc.coalesce(a[i], b[i]) for i in self.spec.pk] if cand.any() else []
        return SilverImages(
            np.arange(m), self._object(b, b_valid, b_partial), self._object(a, a_valid, a_partial),
            changed, pk, absent, [], self.after_key(cand, pk, after_key) if after_key else None)

    def _finish(self, ok: np.ndarray, inner: SilverImages | None, event_type, sides: tuple,
                rows: np.ndarray, before_present, after_present, bad: np.ndarray
                ) -> SilverImages:
        """Map ``inner`` (rendered rows ``ok``) back to input positions; name the bad rows
        (row ``i``'s images at position ``rows[i]`` of ``sides``)."""
        errors = []
        for i in np.flatnonzero(bad):
            before, after = (side.array[int(rows[i])].as_py() for side in sides)
            why = self.reason(event_type[i].as_py(), before, after, before_present[i].as_py(),
                              after_present[i].as_py())
            if why is None:
                raise SchemaMismatchError(f"row {i} was refused without a reason (bug)")
            errors.append((int(i), why))
        if inner is None:
            empty = _nulls(0)
            return SilverImages(np.empty(0, dtype=np.int64), empty, empty, empty, empty, empty,
                                errors, None)
        inner.rows = ok[inner.rows]
        inner.errors = [(int(ok[i]), why) for i, why in inner.errors] + errors
        return inner


def _subset(images: SilverImages, ok: np.ndarray) -> SilverImages:
    idx = pa.array(ok)
    return SilverImages(np.arange(len(ok)), images.row_before.take(idx),
                        images.row_after.take(idx), images.changed_columns.take(idx),
                        images.pk_values.take(idx), images.absent_columns.take(idx), [],
                        None if images.pk_values_after is None
                        else images.pk_values_after.take(idx))
