"""Pure: one Arrow batch of bronze row changes → its silver rows and its quarantine rows.

The batch is split into groups that one :class:`TableSpec` names: rows of one table, in one
schema epoch (between two DDLs touching it), with one TABLE_MAP (``naming.py``). Each group is
named once and rendered column by column (``images.TableRenderer``, built once per spec and
kept for the next batches); every row lands in exactly one of the two outputs.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.binlog.names import file_number, position_key, seq_of
from pipelines.errors import SchemaMismatchError
from pipelines.lake.tables import BRONZE_EVENTS, SILVER_EVENTS, SILVER_QUARANTINE
from pipelines.silver import render_fast
from pipelines.silver.images import SilverImages, TableRenderer
from pipelines.silver.naming import TABLE_MAP_COLUMNS, BronzeTableMap, NamingPlan, TableSpec

__all__ = ["BatchRenderer", "RENDERED", "HASHED", "QUARANTINE", "DAY_US"]

# Declared once in the lake registry: the rendered rows are silver's columns less pk_hash and
# pk_hash_after (computed by the engine), the quarantine rows the quarantine's less
# quarantined_at.
HASHED = ("pk_hash", "pk_hash_after")
RENDERED = SILVER_EVENTS.arrow_schema(exclude=HASHED)
QUARANTINE = SILVER_QUARANTINE.arrow_schema(exclude=["quarantined_at"])
_TM = TABLE_MAP_COLUMNS
_IMAGE_LISTS = ("row_before", "row_after")  # the images: read where they lie, not taken
_FLAGS = ("event_type", "before_present", "after_present")
# What rendering makes: the images, and the silver columns bronze has not (the registry's).
_RENDERED_COLS = ({f.name for f in RENDERED} - set(BRONZE_EVENTS.column_names)) | set(_IMAGE_LISTS)
DAY_US = 86_400_000_000  # event_date: the UTC day of event_timestamp
# The columns a batch keeps once grouped, put in group order: what the outputs copy from the
# bronze row, and what rendering reads besides the images (not the TABLE_MAP facts).
_KEPT = list(dict.fromkeys(
    [f.name for f in RENDERED if f.name not in _RENDERED_COLS]
    + [f.name for f in QUARANTINE if f.name != "reason"] + list(_FLAGS)))


def _table_map(tm_cols: list[pa.Array], j: int) -> BronzeTableMap:
    return BronzeTableMap.of({c: col[j].as_py() for c, col in zip(_TM, tm_cols)})


def _fingerprint(col: pa.Array) -> pa.Array:
    """Per row, a string equal between two rows exactly when their values are equal.

    Elements are escaped (``\\x01`` → ``\\x01\\x02``, ``\\x00`` → ``\\x01\\x03``), marked with a
    leading ``\\x05`` and joined with ``\\x00``; a null is ``\\x01\\x04``, which no escaped text
    holds. Nested lists are fingerprinted from the inside out.
    """
    if pa.types.is_list(col.type):
        inner = pa.ListArray.from_arrays(col.offsets, _fingerprint(col.values))
        text = pc.binary_join(inner, "\x00")
    else:
        text = col.cast(pa.string())
        text = pc.replace_substring(pc.replace_substring(text, "\x01", "\x01\x02"),
                                    "\x00", "\x01\x03")
        text = pc.binary_join_element_wise("\x05", text, "")
    return pc.if_else(col.is_valid(), text, pa.scalar("\x01\x04"))


def _runs(batch: pa.RecordBatch, columns: list[str]) -> np.ndarray:
    """Where each run of rows with equal ``columns`` begins (a null counts as a change)."""
    n = batch.num_rows
    change = np.ones(n, dtype=bool)
    if n > 1:
        same = np.ones(n - 1, dtype=bool)
        for c in columns:
            col = batch.column(c)
            same &= render_fast.true_bytes(pc.equal(col.slice(1), col.slice(0, n - 1))) != 0
        change[1:] = ~same
    return np.flatnonzero(change)


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The positions ``starts[k]`` … ``ends[k] - 1`` of every k, in order (int64)."""
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return np.empty(0, np.int64)
    shift = np.repeat(starts - np.cumsum(np.append(0, lengths[:-1])), lengths)
    return np.arange(total, dtype=np.int64) + shift


class BatchRenderer:
    """Renders bronze batches with one :class:`NamingPlan` (specs and renderers cached).

    ``compiled``: full row images through the compiled loops (``render_fast``), for runs
    big enough to pay for loading them (about a second per process, ``render_warm``)."""

    def __init__(self, plan: NamingPlan, compiled: bool = True) -> None:
        self.plan = plan
        self.compiled = compiled
        self._renderers: dict[TableSpec, TableRenderer] = {}
        self._start_pos = np.empty(0, dtype=np.int64)

    def _groups(self, batch: pa.RecordBatch) -> Iterator[tuple[np.ndarray, object]]:
        """(row positions, TableSpec or the SchemaMismatchError naming them) per group."""
        keys = ["source_id", "schema_name", "table_name", "binlog_file"]
        # The rows of one rows event share its TABLE_MAP, so fingerprint one row per event
        # (an event: a position and a table; the inner events of a TRANSACTION_PAYLOAD share
        # their position). Bronze keeps an event's rows together: each run of rows with the
        # same event is fingerprinted once (were an event's rows apart, each run would be,
        # and the runs would still meet in one group).
        starts = _runs(batch, ["source_id", "binlog_file", "start_pos", "schema_name",
                               "table_name"])
        ends = np.append(starts[1:], batch.num_rows)[:len(starts)]
        first = pa.array(starts)
        tm_cols = [batch.column(c).take(first) for c in _TM]
        hashes = batch.column("table_map_hash").take(first)
        table = pa.table([batch.column(k).take(first) for k in keys]
                         + [_fingerprint(c) for c in tm_cols]
                         + [hashes, pa.array(np.arange(len(starts)))],
                         names=keys + _TM + ["h", "e"])
        grouped = table.group_by(keys + _TM + ["h"], use_threads=False).aggregate(
            [("e", "list")])
        members = grouped.column("e_list").combine_chunks()
        for g, key in enumerate(grouped.select(keys + ["h"]).to_pylist()):
            evs = members[g].values.to_numpy(zero_copy_only=False)
            rows = _ranges(starts[evs], ends[evs])
            tm = self._table_map(tm_cols, int(evs[0]), key["h"])
            if isinstance(tm, SchemaMismatchError):
                yield rows, tm
            else:
                yield from self._epochs(key, rows, tm)

    def _table_map(self, tm_cols: list[pa.Array], j: int, table_map_hash: int | None
                   ) -> BronzeTableMap | SchemaMismatchError:
        """The TABLE_MAP facts of event ``j``: its own (bronze written before the TABLE_MAP
        rows), else those its ``table_map_hash`` names (the plan's ``table_maps``)."""
        if table_map_hash is None or tm_cols[0][j].is_valid:
            return _table_map(tm_cols, j)
        facts = self.plan.table_maps.get(table_map_hash)
        if facts is None:
            return SchemaMismatchError(f"the TABLE_MAP row {table_map_hash} its rows name is "
                                       "missing from bronze")
        return BronzeTableMap.of(facts)

    def _epochs(self, key: dict, rows: np.ndarray, tm: BronzeTableMap
                ) -> Iterator[tuple[np.ndarray, object]]:
        """``rows`` (one table, one TABLE_MAP) split by the table's schema epochs."""
        source, schema, name, binlog_file = (key[k] for k in
                                             ("source_id", "schema_name", "table_name",
                                              "binlog_file"))
        pos = position_key(binlog_file, self._start_pos[rows])
        while len(rows):
            start, end = self.plan.epoch(source, schema, name, int(pos.min()))
            inside = (pos > start) & (pos <= end)
            part = rows[inside]
            try:  # the epoch, not the row, decides: any row of the group names it
                spec = self.plan.resolve(source, schema, name, binlog_file,
                                         int(self._start_pos[part[0]]), tm)
            except SchemaMismatchError as exc:
                spec = exc
            yield part, spec
            rows, pos = rows[~inside], pos[~inside]

    def render(self, batch: pa.RecordBatch) -> tuple[pa.Table, pa.RecordBatch]:
        """(silver rows in ``RENDERED``, quarantine rows in ``QUARANTINE``) of ``batch``.

        The silver rows are a table of one chunk per group that renders: each group's texts
        stay in the buffers they were written to (joining them copied every text once more,
        into memory the process had to fault in: ~0.14 CPU-s per 681k rows in the engine).

        The batch's other columns are put in group order once (one take), so that each group
        is a slice of them and the rendered rows line up with them. The images stay where
        they are: the compiled loops read a group's rows at their positions, and only a group
        they do not render takes its images (``TableRenderer.render_at``).
        """
        self._start_pos = batch.column("start_pos").to_numpy(zero_copy_only=False)
        groups = list(self._groups(batch))
        order = np.concatenate([rows for rows, _ in groups]) if groups else np.empty(0, np.int64)
        sides = tuple(render_fast.ImageBuffers(batch.column(c)) for c in _IMAGE_LISTS)
        if not np.array_equal(order, np.arange(batch.num_rows)):
            batch = batch.select(_KEPT).take(pa.array(order))
        ok_rows, rendered, specs = [], [], []
        bad_rows: list[int] = []
        reasons: list[str] = []
        start = 0
        for group, spec in groups:
            rows = np.arange(start, start + len(group))
            start += len(group)
            if isinstance(spec, SchemaMismatchError):
                bad_rows += rows.tolist()
                reasons += [str(spec)] * len(rows)
                continue
            tr = self._renderers.get(spec)
            if tr is None:
                tr = self._renderers[spec] = TableRenderer(spec, self.compiled)
            event_type, before_present, after_present = (
                batch.column(c).slice(int(rows[0]), len(rows)) for c in _FLAGS)
            out = tr.render_at(event_type, sides, group, before_present, after_present)
            for i, why in out.errors:
                bad_rows.append(int(rows[i]))
                reasons.append(why)
            if len(out.rows):
                ok_rows.append(rows[out.rows])
                rendered.append(out)
                specs.append((spec, len(out.rows)))
        return (self._silver(batch, ok_rows, rendered, specs),
                self._quarantine(batch, bad_rows, reasons))

    def _silver(self, batch: pa.RecordBatch, ok_rows: list[np.ndarray],
                rendered: list[SilverImages], specs: list[tuple[TableSpec, int]]
                ) -> pa.Table:
        if not ok_rows:
            return RENDERED.empty_table()
        ok = np.concatenate(ok_rows)
        if len(ok) == batch.num_rows:  # every row rendered, in the batch's order
            batch = batch.slice(0)
            ok = None
        else:
            batch = batch.take(pa.array(ok))
        cat = {f: pa.chunked_array([getattr(r, f) for r in rendered])
               for f in ("pk_values", "changed_columns", "row_before", "row_after",
                         "absent_columns")}
        cat["pk_values_after"] = pa.chunked_array([r.after_keys() for r in rendered],
                                                  pa.string())
        cat["pk_kind"] = pa.chunked_array([pa.repeat(s.pk_kind, n) for s, n in specs],
                                          pa.string())
        cat["origin"] = pa.repeat(pa.scalar("binlog"), batch.num_rows)
        cat["schema_version"] = pa.chunked_array(
            [pa.repeat(s.schema_version, n).cast(pa.string()) for s, n in specs])
        files = batch.column("binlog_file")
        codes = files.dictionary_encode()
        numbers = np.array([file_number(f) for f in codes.dictionary.to_pylist()],
                           dtype=np.int64)
        start = batch.column("start_pos").to_numpy(zero_copy_only=False)
        row_in_event = batch.column("row_in_event").to_numpy(zero_copy_only=False)
        cat["seq"] = pa.array(seq_of(numbers[codes.indices.to_numpy(zero_copy_only=False)],
                                     start + row_in_event))
        ts = batch.column("event_timestamp")
        micros = ts.cast(pa.int64()).to_numpy(zero_copy_only=False)
        cat["event_date"] = pa.array(np.floor_divide(micros, DAY_US).astype(np.int32),
                                     pa.date32())
        cols = []
        for f in RENDERED:
            if f.name in _RENDERED_COLS:
                cols.append(cat[f.name].cast(f.type))
            elif f.name == "event_timestamp":
                cols.append(ts.cast(f.type))
            else:
                cols.append(batch.column(f.name).cast(f.type))
        return pa.Table.from_arrays(cols, schema=RENDERED)

    def _quarantine(self, batch: pa.RecordBatch, rows: list[int], reasons: list[str]
                    ) -> pa.RecordBatch:
        idx = pa.array(rows, pa.int64())
        cols = [pa.array(reasons, pa.string()) if f.name == "reason"
                else batch.column(f.name).take(idx).cast(f.type) for f in QUARANTINE]
        return pa.RecordBatch.from_arrays(cols, schema=QUARANTINE)
