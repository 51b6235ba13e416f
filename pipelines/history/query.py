"""``binlake query``: the row changes a selection names, oldest first, as table/jsonl/csv.

From silver (the filters of :mod:`pipelines.history.selection`), or from gold's MySQL
``binlog_events`` with ``--gold-dsn`` (bintrail's lookup: ``schema_name, table_name,
pk_hash`` on its ``idx_pk_hash`` index). Each change is printed with ``seq, event_timestamp,
gtid, event_type, pk_values, changed_columns, row_before, row_after`` and dbtrail's
``connection_id, commit_ts_us, query_text`` (gold adds ``query_hash``); in jsonl the images
are JSON objects with values in silver's forms (``docs/types.md``), copied as stored.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any, Iterable, Iterator, TextIO

from pipelines.config import Config
from pipelines.mysql.dsn import resolve_dsn
from pipelines.lake.delta_ops import sql_string
from pipelines.errors import ConfigError, SourceError
from pipelines.gold.ddl import EVENT_TYPE_CODES
from pipelines.history import lake
from pipelines.history.selection import Selection, apply_selection
from pipelines.history.text_table import write_rows

__all__ = ["OUTPUT_COLUMNS", "GOLD_OUTPUT_COLUMNS", "query_silver", "query_gold",
           "write_changes", "check_names", "before_history"]

OUTPUT_COLUMNS = ["seq", "event_timestamp", "gtid", "event_type", "pk_values",
                  "changed_columns", "row_before", "row_after", "connection_id",
                  "commit_ts_us", "query_text"]
GOLD_OUTPUT_COLUMNS = OUTPUT_COLUMNS + ["query_hash"]


def known_tables(spark, cfg: Config) -> set[tuple[str, str]]:
    """Tables silver holds changes of, plus those the snapshots know."""
    from pipelines.silver.snapshot_store import load_snapshots

    out = {(r[0], r[1]) for r in lake.silver(spark, cfg)
           .select("schema_name", "table_name").distinct().collect()}
    for snap in load_snapshots(spark, cfg):
        out |= set(snap.tables)
    return out


def table_columns(spark, cfg: Config, schema: str, table: str) -> list[str]:
    """Column names the table has had: from the snapshots and one silver image of it."""
    from pipelines.silver.image_values import raw_values
    from pipelines.silver.snapshot_store import load_snapshots

    names: list[str] = []
    for snap in load_snapshots(spark, cfg):
        ts = snap.tables.get((schema, table))
        if ts is not None:
            names += [c for c in ts.column_names if c not in names]
    row = (lake.silver(spark, cfg).where(f"schema_name = {sql_string(schema)} AND "
                                         f"table_name = {sql_string(table)}")
           .select("row_before", "row_after").limit(1).collect())
    for r in row:
        for image in (r["row_before"], r["row_after"]):
            names += [c for c in (raw_values(image) or {}) if c not in names]
    return names


def check_names(spark, cfg: Config, sel: Selection) -> None:
    """Raise :class:`ConfigError` for an unknown ``--table`` or column (called when a
    selection came back empty, so a typo is told apart from a quiet table)."""
    if sel.table is None:
        return
    schema, table = sel.table
    tables = known_tables(spark, cfg)
    if (schema, table) not in tables:
        listed = ", ".join(f"{s}.{t}" for s, t in sorted(tables)[:20])
        raise ConfigError(f"--table {schema}.{table}: unknown table (the lake knows: "
                          f"{listed or 'none'})")
    columns = table_columns(spark, cfg, schema, table)
    for name in sel.columns_named():
        if name not in columns:
            raise ConfigError(f"unknown column {name!r} in {schema}.{table} (columns: "
                              f"{', '.join(columns)})")


def before_history(spark, cfg: Config, sel: Selection) -> str:
    """For an empty result: ``""``, or a note saying where the history of the selected
    table (schema, lake) starts when ``--until`` lies before it."""
    if sel.until is None:
        return ""
    df, what = lake.silver(spark, cfg), "the lake"
    if sel.table:
        df = df.where(f"schema_name = {sql_string(sel.table[0])} AND "
                      f"table_name = {sql_string(sel.table[1])}")
        what = f"{sel.table[0]}.{sel.table[1]}"
    elif sel.schema:
        df, what = df.where(f"schema_name = {sql_string(sel.schema)}"), sel.schema
    first = df.agg({"event_timestamp": "min"}).collect()[0][0]
    if first is None or _naive_utc(first) <= _naive_utc(sel.until):
        return ""
    return (f" (--until {_ts(sel.until)} is before the history of {what}, which starts at "
            f"{_ts(first)})")


def _naive_utc(t: dt.datetime) -> dt.datetime:
    return t.astimezone(dt.timezone.utc).replace(tzinfo=None) if t.tzinfo else t


def query_silver(spark, cfg: Config, sel: Selection, limit: int | None
                 ) -> Iterator[dict[str, Any]]:
    """The selected changes from silver, oldest first, at most ``limit``; streamed from the
    engine one partition at a time (``toLocalIterator``)."""
    df = lake.silver(spark, cfg)
    if sel.table:
        # A renamed table's history goes on under its earlier names (silver.renames)
        from dataclasses import replace

        from pipelines.lake.tables import Lake
        from pipelines.silver.renames import lineage, load_renames, segments_where

        segments = lineage(load_renames(spark, Lake.of(cfg)), *sel.table, 1 << 62)
        if len(segments) > 1:
            df, sel = df.where(segments_where(segments)), replace(sel, table=None)
    extra = ["schema_name", "table_name", "schema_version"]
    df = apply_selection(df, sel).select(*OUTPUT_COLUMNS, *extra).orderBy("seq")
    if limit is not None:
        df = df.limit(limit)
    reading = _json_reading(spark, cfg)
    for r in df.toLocalIterator():
        yield reading(r.asDict())


def _json_reading(spark, cfg: Config):
    """A function: a change's images with MariaDB JSON values read once: as
    the newest snapshot naming the table renders them, whatever its own ``schema_version``
    rendered (``images.reread``). The identity where no snapshot names such a column."""
    from pipelines.history.images import JsonReadings, reread
    from pipelines.silver.image_values import raw_values
    from pipelines.silver.snapshot_store import load_snapshots

    snaps = load_snapshots(spark, cfg)
    readings = JsonReadings(snaps)
    newest: dict[tuple[str, str], frozenset[str]] = {}
    for snap in snaps:  # oldest first: the newest naming a table wins
        for table in snap.tables:
            newest[table] = readings.rendered(snap.snapshot_id, *table)
    if not any(newest.values()):
        return lambda d: d

    def text(values: dict[str, str] | None) -> str | None:
        if values is None:
            return None
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {v}"
                               for k, v in values.items()) + "}"

    def read(d: dict[str, Any]) -> dict[str, Any]:
        table = (d.get("schema_name"), d.get("table_name"))
        want = newest.get(table, frozenset())
        was = readings.rendered(d.get("schema_version"), *table)
        if want == was:
            return d
        for side in ("row_before", "row_after"):
            d[side] = text(reread(raw_values(d[side]), was, want))
        return d

    return read


_GOLD_TYPES = {v: k for k, v in EVENT_TYPE_CODES.items()}  # gold's event_type codes


def query_gold(dsn_url: str, sel: Selection, limit: int | None,
               settings: Any = None) -> list[dict[str, Any]]:
    """The selected changes from gold's ``binlog_events`` (parameters, never pasted values).

    Supported there: --table/--schema, --pk (by pk_hash), --since/--until, --event-type,
    --gtid (MariaDB GTIDs and single MySQL GTIDs, exact), --connection-id, --query-hash.
    """
    from pipelines.gold.client import connect

    if sel.changed or sel.where:
        raise ConfigError("--changed and --where are answered from silver only (drop "
                          "--gold-dsn)")
    conds, params = [], []
    if sel.table:
        conds += ["schema_name = %s", "table_name = %s"]
        params += list(sel.table)
    elif sel.schema:
        conds.append("schema_name = %s")
        params.append(sel.schema)
    if sel.pk is not None:
        conds += ["pk_hash = %s", "pk_values = %s"]
        params += [hashlib.sha256(sel.pk.encode("utf-8")).hexdigest(), sel.pk]
    if sel.since is not None:
        conds.append("event_timestamp >= %s")
        params.append(sel.since.replace(microsecond=0))
    if sel.until is not None:
        conds.append("event_timestamp <= %s")
        params.append(sel.until)
    if sel.event_types:
        conds.append("event_type IN (" + ", ".join(["%s"] * len(sel.event_types)) + ")")
        params += [EVENT_TYPE_CODES[t] for t in sel.event_types]
    if sel.gtids is not None:
        gtids = list(sel.gtids.mariadb) + [f"{u}:{n}" for u, a, b in sel.gtids.mysql
                                           for n in range(a, min(b, a + 10000) + 1)]
        conds.append("gtid IN (" + ", ".join(["%s"] * len(gtids)) + ")")
        params += gtids
    if sel.connection_id is not None:
        conds.append("connection_id = %s")
        params.append(sel.connection_id)
    if sel.query_hash is not None:
        conds.append("query_hash = %s")
        params.append(sel.query_hash)
    sql = ("SELECT binlog_file, start_pos, row_in_event, event_timestamp, gtid, event_type, "
           "pk_values, changed_columns, row_before, row_after, connection_id, commit_ts_us, "
           "query_text, query_hash FROM binlog_events"
           + (" WHERE " + " AND ".join(conds) if conds else "")
           + " ORDER BY binlog_file, start_pos, row_in_event"
           + (" LIMIT %s" % int(limit) if limit is not None else ""))
    import pymysql

    from pipelines.silver.naming import position_key

    # TLS and password from the [gold] settings when the URL lacks them (mysql/dsn.py)
    conn = connect(resolve_dsn(dsn_url, settings, section="gold", setting="--gold-dsn"))
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()
    except pymysql.err.MySQLError as exc:
        raise SourceError(f"gold query failed: {exc.args[-1]}") from None
    finally:
        conn.close()
    out = []
    for (f, pos, row_in_event, ts, gtid, et, pk, changed, before, after, conn_id, commit_ts,
         text, digest) in rows:
        out.append({"seq": position_key(f, pos) + row_in_event, "event_timestamp": ts,
                    "gtid": gtid, "event_type": _GOLD_TYPES.get(et, str(et)),
                    "pk_values": pk, "changed_columns": changed, "row_before": before,
                    "row_after": after, "connection_id": conn_id, "commit_ts_us": commit_ts,
                    "query_text": text, "query_hash": digest})
    return out


def _ts(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat(" ")
    return str(value)


def _json_text(c: str, v: Any) -> str:
    if c in ("changed_columns", "row_before", "row_after"):
        return v if v is not None else "null"  # already JSON text: copied as stored
    if c == "event_timestamp":
        return json.dumps(_ts(v))
    return json.dumps(v, ensure_ascii=False)


def _text(c: str, v: Any) -> str:
    return _ts(v) if c == "event_timestamp" else str(v)


def write_changes(rows: Iterable[dict[str, Any]], fmt: str, out: TextIO,
                  columns: list[str] | None = None) -> int:
    """Print the changes in ``fmt`` (table|jsonl|csv, ``text_table.write_rows``) with
    ``columns`` (default :data:`OUTPUT_COLUMNS`); return how many were printed."""
    columns = columns or OUTPUT_COLUMNS
    return write_rows(columns, ([r[c] for c in columns] for r in rows), fmt, out,
                      text=_text, as_json=_json_text, width=70)

