"""Lake tables written before a column was declared (an older binlake's lake) read and grow
like current ones.

- :func:`with_declared_columns`: a table's DataFrame with the declared columns it lacks as
  typed NULLs (``Lake.read`` applies it);
- :func:`read_data_files`: data files a Delta version added, read by the declared columns (a
  mix of older and newer files gives NULL where a file lacks one, whatever file the engine
  reads first);
- ``Lake.append`` adds ``mergeSchema`` when the table lacks declared columns: Delta schema
  evolution adds them on that commit, on Sail and on JVM Spark with delta-spark, by path and
  as catalog tables.
"""

from __future__ import annotations

from typing import Iterable, Protocol, Sequence


class Declared(Protocol):
    """What these functions read of a lake table's declaration (``lake.LakeTable``)."""

    columns: tuple[tuple[str, str], ...]
    partition_by: tuple[str, ...]

    def ddl(self, *, exclude: Iterable[str] = ()) -> str: ...


__all__ = ["with_declared_columns", "read_data_files", "Declared"]


def with_declared_columns(df, table: Declared):
    """``df`` with every declared column of ``table`` it lacks added as a typed NULL: a table
    (or data files) written before those columns existed reads like a current one. ``df``
    itself when it lacks none (``Lake.read`` relies on that to remember a complete table)."""
    have = set(df.columns)
    missing = [(c, t) for c, t in table.columns if c not in have]
    if not missing:
        return df
    from pyspark.sql import functions as F

    return df.withColumns({c: F.lit(None).cast(t) for c, t in missing})


def read_data_files(spark, table: Declared, files: Sequence[str]):
    """Data files of ``table`` (e.g. those a Delta version added) read by its declared
    columns less the partition columns (those live in the directory names): files written
    before a column was declared give it as NULL, whatever file the engine looks at first."""
    return spark.read.schema(table.ddl(exclude=table.partition_by)).parquet(*files)
