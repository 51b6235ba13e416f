"""Gold's pure parts without a server: partition names and plans, the pk_values rule, the
two wire forms (SQL tuples, LOAD DATA lines), rotation plans."""

from __future__ import annotations

import datetime as dt
import hashlib
import random

import pyarrow as pa
import pytest

from pipelines.config import load_config, parse_retain
from pipelines.errors import ConfigError
from pipelines.gold.ddl import (Partition, create_events_sql, partition_clause, partition_hour,
                                partition_name, plan_partitions)
from pipelines.gold.rotate import epoch_hour, plan_rotation
from pipelines.gold.event_ids import event_id
from pipelines.gold.rows import (PK_MARK, gold_pk_values, sql_rows, sql_values, to_gold,
                                 tsv_rows)

H = dt.datetime(2024, 3, 10, 12)


def hours(first: dt.datetime, n: int) -> list[dt.datetime]:
    return [first + dt.timedelta(hours=i) for i in range(n)]


@pytest.mark.parametrize("hour, name", [
    (dt.datetime(2024, 3, 10, 12), "p_2024031012"),
    (dt.datetime(2023, 12, 31, 23), "p_2023123123"),
])
def test_partition_names_round_trip(hour, name) -> None:
    assert partition_name(hour) == name
    assert partition_hour(name) == hour


@pytest.mark.parametrize("name", ["p_future", "p_2024131012", "p_202403101", "x_2024031012"])
def test_other_partition_names_have_no_hour(name) -> None:
    assert partition_hour(name) is None


def test_partition_bound_is_the_next_hour() -> None:
    assert partition_clause(dt.datetime(2024, 3, 10, 23)) == (
        "PARTITION p_2024031023 VALUES LESS THAN (TO_SECONDS('2024-03-11 00:00:00'))")


def test_create_sql_lists_hours_then_future() -> None:
    sql = create_events_sql(H, 3)
    assert sql.count("PARTITION p_20240310") == 3
    assert sql.rstrip().endswith("PARTITION p_future VALUES LESS THAN MAXVALUE\n)")
    assert "PARTITION BY RANGE (TO_SECONDS(event_timestamp))" in sql
    assert "UNIQUE KEY uq_event_row (source_id, binlog_file, start_pos, row_in_event, " \
           "event_timestamp)" in sql


@pytest.mark.parametrize("existing, lo, hi, below, above", [
    # data inside the existing hours: nothing to add
    (hours(H, 5), H + dt.timedelta(hours=1), H + dt.timedelta(hours=3), [], []),
    # data after the newest: split p_future up to the data's last hour
    (hours(H, 2), H, H + dt.timedelta(hours=4), [], hours(H + dt.timedelta(hours=2), 3)),
    # data far after: the empty hours between need no partitions
    (hours(H, 2), H + dt.timedelta(hours=10), H + dt.timedelta(hours=11), [],
     hours(H + dt.timedelta(hours=10), 2)),
    # data before the oldest: split the oldest partition
    (hours(H, 2), H - dt.timedelta(hours=3), H, hours(H - dt.timedelta(hours=3), 3), []),
    # only p_future left (everything rotated)
    ([], H, H + dt.timedelta(hours=1), [], hours(H, 2)),
])
def test_plan_partitions(existing, lo, hi, below, above) -> None:
    plan = plan_partitions(existing, lo, hi)
    assert (plan.below, plan.above) == (below, above)


def test_plan_partitions_never_goes_below_the_rotation_floor() -> None:
    plan = plan_partitions(hours(H, 2), H - dt.timedelta(hours=5), H, floor=H - dt.timedelta(hours=2))
    assert plan.below == hours(H - dt.timedelta(hours=2), 2)


def test_plan_partitions_stays_within_the_partition_limit() -> None:
    plan = plan_partitions(hours(H, 3), H - dt.timedelta(hours=100), H + dt.timedelta(hours=10),
                           max_partitions=10)
    # 3 existing + p_future + 6 new: the newest data hours get theirs, older ones share
    assert plan.above == hours(H + dt.timedelta(hours=5), 6)
    assert plan.below == []
    plan = plan_partitions(hours(H, 3), H - dt.timedelta(hours=100), H, max_partitions=10)
    assert plan.below == hours(H - dt.timedelta(hours=6), 6)


def test_short_pk_values_are_kept() -> None:
    for pk in (None, "", "1", "a\\|b|2", "x" * 512):
        assert gold_pk_values(pk) == pk


def test_long_pk_values_are_marked_never_truncated_silently() -> None:
    pk = "k\\|" * 200  # 600 characters of escaped pipes
    out = gold_pk_values(pk)
    assert len(out) <= 512
    prefix, _, digest = out.rpartition(PK_MARK)
    assert digest == hashlib.sha256(pk.encode()).hexdigest()
    assert pk.startswith(prefix)
    # the cut never leaves half an escape pair: the prefix parses as silver's escaping
    assert (len(prefix) - len(prefix.rstrip("\\"))) % 2 == 0
    assert gold_pk_values("é" * 600).endswith(hashlib.sha256(("é" * 600).encode()).hexdigest())


def _silver_batch(**over) -> pa.RecordBatch:
    row = {
        "source_id": "default", "binlog_file": "mysql-bin.000001", "start_pos": 256,
        "end_pos": 556, "row_in_event": 1,
        "event_timestamp": pa.array([dt.datetime(2024, 3, 10, 12, 30, 5)], pa.timestamp("us", "UTC")),
        "gtid": None, "connection_id": pa.array([None], pa.int64()), "schema_name": "shop",
        "table_name": "orders", "event_type": "UPDATE", "pk_values": "7|a\\|b\\\\c",
        "changed_columns": '["note"]',
        "row_before": '{"big":18446744073709551615,"note":"it\'s\\t\\\\"}',
        "row_after": None, "schema_version": "binlog",
        "query_text": "UPDATE orders SET note = 'it''s'", "commit_ts_us": 1703581289681456,
    }
    row.update(over)
    return pa.RecordBatch.from_pydict({k: v if isinstance(v, pa.Array) else [v]
                                       for k, v in row.items()})


def test_sql_tuple_escapes_quotes_and_backslashes() -> None:
    gold, marked = to_gold(_silver_batch())
    assert marked == 0
    # event_id: source 1, file 1, position 256, row 1 (pipelines/gold/event_ids.py)
    assert event_id(1, "mysql-bin.000001", 256, 556, 1) == ((1 << 20 | 1) << 32 | 256) << 8 | 1
    assert sql_rows(gold) == [
        f"({event_id(1, 'mysql-bin.000001', 256, 556, 1)},'default','mysql-bin.000001',256,556,1,'2024-03-10 12:30:05',NULL,NULL,'shop',"
        "'orders',2,'7|a\\\\|b\\\\\\\\c','[\"note\"]',"
        "'{\"big\":18446744073709551615,\"note\":\"it\\'s\\\\t\\\\\\\\\"}',NULL,0,"
        "'UPDATE orders SET note = \\'it\\'\\'s\\'',NULL,1703581289681456)"]


def test_load_data_line_escapes_tabs_newlines_and_backslashes() -> None:
    gold, _ = to_gold(_silver_batch(row_after='{"a":"x\ty\nz"}'))
    line = tsv_rows(gold).decode()
    assert line.endswith("\n") and line.count("\n") == 1
    fields = line[:-1].split("\t")
    assert len(fields) == 20
    assert fields[7] == fields[8] == "\\N"
    assert fields[12] == "7|a\\\\|b\\\\\\\\c"
    assert fields[15] == '{"a":"x\\ty\\nz"}'



_WIRE = {"tsv": {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\x00": "\\0"},
         "sql": {"\\": "\\\\", "'": "\\'", "\x00": "\\0"}}


def _reference_line(row: dict, wire: str) -> str:
    """One row as the wire form spells it, a value at a time (the rule, not the code)."""
    out = []
    for name, v in row.items():
        if v is None:
            out.append("\\N" if wire == "tsv" else "NULL")
        elif isinstance(v, int):
            out.append(str(v))
        else:
            text = "".join(_WIRE[wire].get(ch, ch) for ch in v)
            out.append(text if wire == "tsv" else f"'{text}'")
    return "\t".join(out) + "\n" if wire == "tsv" else "(" + ",".join(out) + ")"


@pytest.mark.parametrize("seed", range(40))
def test_wire_forms_escape_every_row_that_needs_it(seed: int) -> None:
    # Rows needing escapes mixed with rows needing none, in sliced batches: the export
    # rewrites only the rows holding an escaped character, and slices keep their place.
    rnd = random.Random(seed)
    alphabet = ["a", "\\", "\t", "\n", "\r", "\x00", "'", "é", "\U0001F600", '"', "|"]
    n = rnd.randint(0, 40)

    def text() -> str | None:
        if rnd.random() < 0.1:
            return None
        plain = rnd.random() < 0.5
        return "".join(rnd.choice(["a", "é", "{"] if plain else alphabet)
                       for _ in range(rnd.randint(0, 9)))

    batch = pa.RecordBatch.from_pydict({
        "schema_name": pa.array([text() for _ in range(n)], pa.string()),
        "start_pos": pa.array([rnd.randint(0, 10**12) for _ in range(n)], pa.int64()),
        "connection_id": pa.array([None if rnd.random() < 0.2 else rnd.randint(0, 10**6)
                                   for _ in range(n)], pa.int64()),
        "row_after": pa.array([text() for _ in range(n)], pa.string())})
    lo = rnd.randint(0, n)
    for part in (batch, batch.slice(lo, rnd.randint(0, n - lo))):
        rows = part.to_pylist()
        assert tsv_rows(part).decode() == "".join(_reference_line(r, "tsv") for r in rows)
        assert sql_rows(part) == [_reference_line(r, "sql") for r in rows]
        tuples = [_reference_line(r, "sql").encode() for r in rows]
        assert sql_values(part) == ([b",".join(tuples)] if rows else [])
        lists = sql_values(part, 60)  # split where the next row would pass 60 bytes
        want: list[bytes] = []
        for t in tuples:  # greedy: a row (with its comma) joins the list unless the list
            # with its comma would pass 60 bytes
            if want and len(want[-1]) + 1 + len(t) + 1 <= 60:
                want[-1] += b"," + t
            else:
                want.append(t)
        assert lists == want

def test_unknown_event_type_is_an_error() -> None:
    with pytest.raises(ValueError, match="QUERY"):
        to_gold(_silver_batch(event_type="QUERY"))


def test_rotation_drops_only_hours_silver_holds() -> None:
    parts = [Partition(partition_name(h), h, 0) for h in hours(H, 4)] + [Partition("p_future", None, 0)]
    gold = {epoch_hour(H) + i: 10 for i in range(4)}
    silver = {epoch_hour(H): 10, epoch_hour(H) + 1: 4, epoch_hour(H) + 2: 12}
    plan = plan_rotation(parts, H + dt.timedelta(hours=3), gold, silver)
    assert [c.partition.name for c in plan.drop] == ["p_2024031012", "p_2024031014"]
    assert [(c.partition.name, c.gold_rows, c.silver_rows) for c in plan.keep] == [
        ("p_2024031013", 10, 4)]


def test_oldest_partition_range_is_open_below() -> None:
    parts = [Partition(partition_name(H), H, 0)]
    old = epoch_hour(H) - 50  # a row older than the oldest partition's hour lands in it
    plan = plan_rotation(parts, H + dt.timedelta(hours=1), {old: 1}, {})
    assert [c.partition.name for c in plan.keep] == ["p_2024031012"]


def test_gold_settings_are_validated() -> None:
    assert parse_retain("48h") == 48 and parse_retain("7d") == 168
    for bad in ({"gold.retain": "7 weeks"}, {"gold.method": "copy"}, {"gold.batch_rows": 0},
                {"gold.log_retention": "30 days"}):
        with pytest.raises(ConfigError, match="gold."):
            load_config(env={}, overrides=bad)
    cfg = load_config(env={"BINLAKE_GOLD_BATCH_ROWS": "700"})
    assert cfg.gold.batch_rows == 700


def test_rotation_compares_hour_by_hour_in_the_open_oldest_partition() -> None:
    parts = [Partition(partition_name(H), H, 0)]
    # silver holds plenty of rows of older, already rotated hours: they must not mask the
    # gold row of this hour that silver lacks
    silver = {epoch_hour(H) - 2: 100, epoch_hour(H) - 1: 100, epoch_hour(H): 100}
    gold = {epoch_hour(H): 101}
    plan = plan_rotation(parts, H + dt.timedelta(hours=1), gold, silver)
    assert [c.partition.name for c in plan.keep] == ["p_2024031012"]


def test_chunks_never_cross_an_hour() -> None:
    from pipelines.gold.exporter import hour_chunks

    stamps = [dt.datetime(2024, 3, 10, 12, 59, 58), dt.datetime(2024, 3, 10, 12, 59, 59),
              dt.datetime(2024, 3, 10, 13, 0, 0), dt.datetime(2024, 3, 10, 13, 0, 1),
              dt.datetime(2024, 3, 10, 13, 5), dt.datetime(2024, 3, 10, 14, 0)]
    batch = pa.concat_batches([_silver_batch(event_timestamp=pa.array([t], pa.timestamp("us", "UTC")))
                               for t in stamps]) if hasattr(pa, "concat_batches") else None
    if batch is None:
        batch = pa.Table.from_batches([_silver_batch(event_timestamp=pa.array([t], pa.timestamp("us", "UTC")))
                                       for t in stamps]).combine_chunks().to_batches()[0]
    gold, _ = to_gold(batch)
    sizes = [c.num_rows for c in hour_chunks(gold, 2)]
    assert sizes == [2, 2, 1, 1]


def _stamped(stamps: list[dt.datetime]) -> pa.RecordBatch:
    """Gold values of one row per time, ``start_pos`` numbering them in the given order."""
    batch = pa.Table.from_batches([
        _silver_batch(event_timestamp=pa.array([t], pa.timestamp("us", "UTC")), start_pos=i)
        for i, t in enumerate(stamps)]).combine_chunks().to_batches()[0]
    return to_gold(batch)[0]


def test_chunks_keep_each_hours_rows_in_the_order_they_came() -> None:
    """Rows of several hours out of order are grouped by hour, but within an hour they stay
    in silver's order (the unique key's), not re-sorted by second: the server then appends
    to ``uq_event_row``."""
    from pipelines.gold.exporter import hour_chunks

    t = dt.datetime(2024, 3, 10, 12)
    stamps = [t + dt.timedelta(hours=1, seconds=9), t + dt.timedelta(seconds=50),
              t + dt.timedelta(seconds=10), t + dt.timedelta(hours=1, seconds=1),
              t + dt.timedelta(seconds=30)]
    chunks = list(hour_chunks(_stamped(stamps), 10))
    assert [c.column("start_pos").to_pylist() for c in chunks] == [[1, 2, 4], [0, 3]]


def test_chunks_of_rows_in_hour_order_are_slices_of_the_batch() -> None:
    """A batch whose hours ascend is cut as it is: every chunk shares the batch's buffers
    (no copy of ~400-byte rows per row change), and its rows keep their order."""
    from pipelines.gold.exporter import hour_chunks

    t = dt.datetime(2024, 3, 10, 12, 59)
    stamps = [t + dt.timedelta(seconds=s) for s in (40, 5, 59, 61, 62, 60)]
    gold = _stamped(stamps)
    chunks = list(hour_chunks(gold, 2))
    assert [c.column("start_pos").to_pylist() for c in chunks] == [[0, 1], [2], [3, 4], [5]]
    data = gold.column("row_before").buffers()[2].address
    assert all(c.column("row_before").buffers()[2].address == data for c in chunks)


def test_query_text_is_capped_as_dbtrail_caps_it() -> None:
    from pipelines.gold.digest import MAX_QUERY_TEXT_BYTES, TRUNCATION_MARKER, gold_query_text

    short = "INSERT INTO t VALUES ('é')"
    assert gold_query_text(short) == short and gold_query_text(None) is None
    long = "INSERT INTO t VALUES ('" + "é" * 9000 + "')"  # 18 KB of UTF-8
    cut = gold_query_text(long)
    assert cut.endswith(TRUNCATION_MARKER)
    body = cut[:-len(TRUNCATION_MARKER)]
    assert long.startswith(body)  # cut at a character boundary, never inside 'é'
    assert MAX_QUERY_TEXT_BYTES - 1 <= len(body.encode()) <= MAX_QUERY_TEXT_BYTES
    gold, _ = to_gold(_silver_batch(query_text=long), lambda texts: {t: "d" for t in texts})
    assert gold.column("query_text")[0].as_py() == cut
    assert gold.column("query_hash")[0].as_py() == "d"  # the lookup decides (a cut text: NULL)
    gold, _ = to_gold(_silver_batch(query_text=pa.array([None], pa.string())))
    assert gold.column("query_hash")[0].as_py() is None


def test_statement_digest_on_mariadb_is_null_and_asked_once(mariadb) -> None:
    from pipelines.gold.digest import StatementDigests

    conn = mariadb.connect()
    try:
        d = StatementDigests(conn)
        assert d.lookup(["SELECT 1", "SELECT 2", None]) == {"SELECT 1": None, "SELECT 2": None}
        assert d.available is False  # error 1305: MariaDB has no STATEMENT_DIGEST
        assert d.lookup(["SELECT 3"]) == {"SELECT 3": None}
    finally:
        conn.close()
