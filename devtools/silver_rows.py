"""A realistic silver table made fast by the engine, for the gold tests and ``bench/gold_export.py``.

Silver's declared columns (``pipelines.lake.tables.SILVER_EVENTS``), written as Delta partitioned by
``event_date``. Values a gold export must keep exact: 64-bit unsigned and signed extremes and
long decimals inside the JSON text, ``pk_values`` with escaped ``|`` and ``\\``, one in a
thousand ``pk_values`` longer than 512 characters, several hours of events. Columns the
generator does not make (``pk_kind``, ``absent_columns``, dbtrail's) are NULL.
"""

from __future__ import annotations

import datetime as dt

from pipelines.lake.tables import SILVER_EVENTS

__all__ = ["silver_frame", "write_silver", "BIG_UNSIGNED", "BIG_NEGATIVE", "DECIMAL_TEXT",
           "RAW_DECIMAL", "LONG_PK", "ESCAPED_PK_TAIL"]

BIG_UNSIGNED = "18446744073709551615"
BIG_NEGATIVE = "-9223372036854775808"
DECIMAL_TEXT = "12345678901234567890.123456789012345678"
RAW_DECIMAL = "0.1000000000000000055511151231257827"
LONG_PK = "k\\|" * 200  # 600 characters: escaped pipes all the way
ESCAPED_PK_TAIL = "|a\\|b\\\\c"  # a second PK column holding `a|b\c`


def silver_frame(spark, n: int, *, end: dt.datetime | None = None, hours: int = 6,
                 source_id: str = "default", file_no: int = 1, first_id: int = 0):
    """``n`` silver rows (three per rows event) spread evenly over the ``hours`` hours
    before ``end`` (default: the start of the current UTC hour)."""
    from pyspark.sql import functions as F

    end = end or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, minute=0, second=0,
                                                          microsecond=0)
    end_epoch = int((end - dt.datetime(1970, 1, 1)).total_seconds())
    span = hours * 3600
    idc = F.col("id")
    ev = F.floor((idc - F.lit(first_id)) / 3)
    etype = (F.when(ev % 3 == 0, "INSERT").when(ev % 3 == 1, "UPDATE").otherwise("DELETE"))
    pk = (F.when(idc % 1000 == 7, F.lit(LONG_PK))
          .when(idc % 5 == 0, F.concat(idc.cast("string"), F.lit(ESCAPED_PK_TAIL)))
          .otherwise(idc.cast("string")))
    image = F.concat(
        F.lit('{"id":'), idc.cast("string"),
        F.lit(f',"big":{BIG_UNSIGNED},"neg":{BIG_NEGATIVE},"amount":"{DECIMAL_TEXT}",'
              f'"doc":{{"raw":{RAW_DECIMAL}}},"note":"caf\u00e9 \\"q\\" \\\\ tab\\t '),
        idc.cast("string"), F.lit('"}'))
    start_pos = F.lit(256) + ev * 300
    secs = F.lit(end_epoch - span) + F.floor((idc - F.lit(first_id)) * F.lit(span) / F.lit(max(n, 1)))
    df = spark.range(first_id, first_id + n).select(
        F.lit(source_id).alias("source_id"),
        F.lit(1).cast("bigint").alias("server_id"),
        F.lit("3e11fa47-71ca-11e1-9e33-c80aa9429562").alias("server_uuid"),
        F.lit(f"mysql-bin.{file_no:06d}").alias("binlog_file"),
        start_pos.cast("bigint").alias("start_pos"),
        (start_pos + 300).cast("bigint").alias("end_pos"),
        (idc % 3).cast("int").alias("row_in_event"),
        (F.lit(file_no * 2**32) + start_pos + idc % 3).cast("bigint").alias("seq"),
        F.timestamp_seconds(secs).alias("event_timestamp"),
        F.concat(F.lit("3e11fa47-71ca-11e1-9e33-c80aa9429562:"), (ev + 1).cast("string")
                 ).alias("gtid"),
        (F.lit(40) + ev % 7).cast("bigint").alias("connection_id"),
        F.lit("shop").alias("schema_name"),
        F.when(idc % 2 == 0, "orders").otherwise("order_items").alias("table_name"),
        etype.alias("event_type"),
        pk.alias("pk_values"),
        F.when(etype == "UPDATE", F.lit('["note"]')).alias("changed_columns"),
        F.when(etype != "INSERT", image).alias("row_before"),
        F.when(etype != "DELETE", image).alias("row_after"),
        F.when(idc % 4 == 0, "binlog").otherwise("1").alias("schema_version"),
    )
    df = df.withColumn("event_date", F.to_date("event_timestamp"))
    df = df.withColumn("pk_hash", F.sha2("pk_values", 256))
    made = set(df.columns)
    return df.select(*[(F.col(c) if c in made else F.lit(None)).cast(t).alias(c)
                       for c, t in SILVER_EVENTS.columns])


def write_silver(spark, path: str, n: int, *, mode: str = "append", **kw) -> None:
    (silver_frame(spark, n, **kw).write.format("delta").mode(mode)
     .partitionBy("event_date").save(path))
