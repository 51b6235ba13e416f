"""The acceptance scenarios' checks, shared by the per-stage acceptance tests and the engine
matrix (tests/acceptance/test_engine_matrix.py): each check compares the lake with what the real server
or its own tool says, never with our decoder.

- :func:`assert_bronze_equals_reference`: bronze's row changes equal ``mariadb-binlog -vv``'s.
- :func:`assert_pre_alter_orders_quarantined`: MINIMAL metadata + mid-stream ALTER + only a
  late snapshot quarantines exactly the unnamable ``shop.orders`` rows, and misnames none.
- :func:`assert_gold_equals_silver`: gold holds every silver row once, hashes and partitions
  as the server computes them, JSON text byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.gold.digest import TRUNCATION_MARKER, gold_query_text
from tests.support.binlog_verbose import is_unsigned, printed_matches

__all__ = ["bronze_rows", "assert_bronze_equals_reference", "ORDERS_CHANGES_AFTER_ALTER",
           "assert_pre_alter_orders_quarantined", "assert_gold_equals_silver"]

ORDERS_CHANGES_AFTER_ALTER = 7  # workload._alter_orders: 5 UPDATE, 1 INSERT, 1 DELETE


def bronze_rows(spark, lake: Path) -> dict[tuple, dict]:
    """Bronze's row changes keyed by (binlog_file, start_pos, row_in_event)."""
    rows = spark.sql(
        "SELECT binlog_file, start_pos, end_pos, row_in_event, gtid, schema_name, table_name, "
        "event_type, row_before, row_after FROM delta.`%s` "
        "WHERE event_type IN ('INSERT','UPDATE','DELETE')" % (Path(lake) / "bronze" / "binlog_events")
    ).collect()
    return {(r["binlog_file"], r["start_pos"], r["row_in_event"]): r.asDict() for r in rows}


def assert_bronze_equals_reference(bronze: dict[tuple, dict], reference: list) -> None:
    """Same row changes as ``mariadb-binlog -vv`` (``read_row_changes``): keys, GTIDs, tables,
    kinds and every printed value."""
    ref = {(rc.file, rc.start_pos, rc.row_in_event): rc for rc in reference}
    assert sorted(bronze) == sorted(ref), "bronze and mariadb-binlog list different row changes"
    mismatches = []
    for key, rc in ref.items():
        b = bronze[key]
        assert (b["end_pos"], b["gtid"], b["schema_name"], b["table_name"], b["event_type"]) == (
            rc.end_pos, rc.gtid, rc.schema, rc.table, rc.event_type), key
        unsigned = [is_unsigned(t) for t in rc.column_types] if rc.column_types else None
        for side, printed, types in (("before", rc.before, rc.before_types),
                                     ("after", rc.after, rc.after_types)):
            image = b[f"row_{side}"]
            assert (image is None) == (printed is None), (key, side)
            if printed is None:
                continue
            assert len(image) == len(printed), (key, side)
            for i, (text, comment) in enumerate(zip(printed, types)):
                value = None if image[i] is None else bytes(image[i])
                if not printed_matches(text, comment, value,
                                       unsigned=unsigned[i] if unsigned else None):
                    mismatches.append((key, side, i, comment, text, value))
    assert not mismatches, f"{len(mismatches)} values differ, first: {mismatches[:5]}"


def assert_pre_alter_orders_quarantined(summary: Any, silver: list[dict],
                                        quarantine: list[dict]) -> None:
    """Every pre-ALTER change of ``shop.orders`` is quarantined, nothing else, none misnamed."""
    orders_total = sum(n for (t, _), n in summary.row_changes.items() if t == "shop.orders")
    assert {(q["schema_name"], q["table_name"]) for q in quarantine} == {("shop", "orders")}
    assert len(quarantine) == orders_total - ORDERS_CHANGES_AFTER_ALTER
    assert all("no schema" in q["reason"] or "column count" in q["reason"] for q in quarantine)
    # None misnamed: the orders rows in silver are the post-ALTER ones, with the new column.
    orders = [r for r in silver if r["table_name"] == "orders"]
    assert len(orders) == ORDERS_CHANGES_AFTER_ALTER
    assert all('"note"' in (r["row_after"] or r["row_before"]) for r in orders)


def assert_gold_equals_silver(server: Any, db: str, silver: list[dict]) -> None:
    """Gold (``db`` on ``server``) holds each silver row once: ``pk_hash = SHA2(pk_values,
    256)`` by the server, every row in its hour's partition, none in ``p_future``, and the JSON
    text (images, pk_values) equal byte for byte."""
    n = len(silver)
    total, distinct, bad_hash, p_future = server.execute(
        "SELECT COUNT(*), COUNT(DISTINCT source_id, binlog_file, start_pos, row_in_event), "
        "SUM(NOT (pk_hash <=> SHA2(pk_values, 256))), "
        "(SELECT COUNT(*) FROM binlog_events PARTITION (p_future)) FROM binlog_events",
        db=db)[0]
    assert (total, distinct, int(bad_hash or 0), p_future) == (n, n, 0, 0)
    misplaced = server.execute(
        "SELECT COUNT(*) FROM information_schema.PARTITIONS p JOIN binlog_events e "
        "ON DATE_FORMAT(e.event_timestamp, 'p_%%Y%%m%%d%%H') = p.PARTITION_NAME "
        "WHERE p.TABLE_SCHEMA = %s AND p.TABLE_NAME = 'binlog_events'", (db,), db=db)[0][0]
    assert misplaced == n  # every row's hour has its partition
    silver_json = {(r["binlog_file"], r["start_pos"], r["row_in_event"]):
                   (r["row_before"], r["row_after"], r["pk_values"],
                    gold_query_text(r["query_text"]),  # over 16 KiB: cut as dbtrail cuts
                    r["commit_ts_us"], r["connection_id"]) for r in silver}
    gold_json = {(f, int(s), int(i)): (b, a, p, q, None if c is None else int(c),
                                       None if t is None else int(t))
                 for f, s, i, b, a, p, q, c, t in server.execute(
        "SELECT binlog_file, start_pos, row_in_event, row_before, row_after, pk_values, "
        "query_text, commit_ts_us, connection_id FROM binlog_events", db=db)}
    assert gold_json == silver_json
    # MariaDB annotates row events by default: with bronze.statement_text the statements
    # reached gold (dbtrail's column); the callers turn it on
    assert any(v[3] and not v[3].endswith(TRUNCATION_MARKER) for v in gold_json.values())
