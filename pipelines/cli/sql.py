"""``binlake sql`` on the command line: its parser and its handler (``pipelines.command``): a
one-shot query's result (:func:`write_result`), or the interactive shell (``shell.py``)."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from pipelines.config import Config
from pipelines.errors import ConfigError
from pipelines.history.text_table import FORMATS

__all__ = ["add_parser", "cmd_sql", "write_result", "SQL_TABLE_ROWS"]

SQL_TABLE_ROWS = 50  # a one-shot `binlake sql` table's rows unless --limit says otherwise


def add_parser(sub) -> None:
    """Add ``sql`` to ``binlake``'s sub-parsers."""
    p = sub.add_parser("sql", help="run SQL with the lake's tables registered as views "
                                   "(no query: an interactive shell)")
    p.add_argument("query", nargs="?")
    p.add_argument("--limit", type=int, default=None,
                   help=f"at most this many rows (table: {SQL_TABLE_ROWS}, csv and jsonl: all; "
                        "shell: 1000)")
    p.add_argument("--format", choices=list(FORMATS), default=None,
                   help="one-shot query's output (default table; the shell prints tables)")
    p.set_defaults(handler=cmd_sql)


def cmd_sql(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.engine.session import get_spark
    from pipelines.ops.views import register_views

    if args.limit is not None and args.limit <= 0:
        raise ConfigError("--limit must be positive")
    if args.query is None and args.format not in (None, "table"):
        raise ConfigError(f"--format {args.format} is for a one-shot query (binlake sql "
                          "\"SELECT ...\"); the shell prints tables")
    spark = get_spark(cfg.engine)
    register_views(spark, cfg)
    if args.query is None:
        from pipelines.cli.shell import run_shell
        return run_shell(spark, limit=args.limit or 1000)
    write_result(spark.sql(args.query), args.format or "table", args.limit, sys.stdout)
    return 0


def write_result(df, fmt: str, limit: int | None, out: TextIO) -> int:
    """A one-shot query's result in ``fmt`` (``text_table``): at most ``limit`` rows (None: a
    table's :data:`SQL_TABLE_ROWS`, csv and jsonl every row, streamed). A table ends with
    its row count and how many rows it left out, csv and jsonl say that on stderr (their
    output stays data); a statement without a result prints ``OK`` as a table. Returns the
    rows written. Counting the rows left out runs the query once more, only when some were."""
    from pipelines.history.text_table import CELL_WIDTH, rows_line, write_rows

    columns = df.columns
    if not columns:
        if fmt == "table":
            print("OK", file=out)
        return 0
    if limit is None and fmt == "table":
        limit = SQL_TABLE_ROWS
    if limit is None:
        return write_rows(columns, df.toLocalIterator(), fmt, out)
    rows = df.limit(limit + 1).collect()
    left_out = df.count() - limit if len(rows) > limit else 0
    n = write_rows(columns, rows[:limit], fmt, out, width=CELL_WIDTH)
    if fmt == "table":
        print(rows_line(n, left_out), file=out)
    elif left_out:
        print(f"sql: {n} row{'s' if n != 1 else ''} written, {left_out} left out: raise "
              "--limit", file=sys.stderr)
    return n
