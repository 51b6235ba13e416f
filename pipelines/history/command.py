"""``binlake query``, ``reconstruct`` and ``flashback`` on the command line: their parsers and
handlers (``pipelines.command``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

from pipelines.config import Config
from pipelines.mysql.dsn import resolve_dsn
from pipelines.errors import ConfigError

__all__ = ["add_parser", "build_selection"]

_QUERY_EXAMPLE = """example:
  binlake --lake ./lake query --table shop.orders --pk 42 --format jsonl
  binlake --lake ./lake query --table shop.orders --changed status \\
      --since '2026-11-23 09:00:00' --until 2026-11-23T11:00:00+01:00
  binlake query --gold-dsn mysql://u:pw@gold:3306/binlake --table shop.orders --format jsonl \\
      --query-hash DIGEST   # every change one statement shape made (dbtrail's query_hash)
"""
_RECONSTRUCT_EXAMPLE = """example:
  binlake --lake ./lake reconstruct --table shop.orders --at '2026-11-23 09:30:00' --format csv
  binlake --lake ./lake reconstruct --table shop.orders --gtid 0-1-4711 --format sql > orders.sql
  binlake --lake ./lake reconstruct --table shop.orders --pos mysql-bin.000042:1234 --out ./orders
"""
_FLASHBACK_EXAMPLE = """example:
  binlake --lake ./lake flashback --table shop.orders --since '2026-11-23 09:12:00' \\
      --until '2026-11-23 09:13:00' --dry-run
  binlake --lake ./lake flashback --gtid 0-1-4711,0-1-4712 --format sql | mariadb -h db shop
  binlake --lake ./lake flashback --gtid 0-1-4711 --apply --target-dsn mysql://u:pw@db:3306/
"""


def _selection_arguments(p: argparse.ArgumentParser, *, with_where: bool) -> None:
    p.add_argument("--table", help="schema.table")
    p.add_argument("--schema", help="every table of this schema (without --table)")
    p.add_argument("--pk", help="primary-key values in key order, '|'-joined as in pk_values")
    p.add_argument("--since", help="from this UTC time: 'YYYY-MM-DD HH:MM:SS[.ffffff]' or ISO "
                                   "8601 with an offset")
    p.add_argument("--until", help="up to this time (inclusive), same forms as --since")
    p.add_argument("--gtid", help="one GTID or a set (0-1-5,0-1-9 or uuid:1-5)")
    p.add_argument("--event-type", help="INSERT, UPDATE, DELETE (comma-separated)")
    p.add_argument("--connection-id", type=int, metavar="ID",
                   help="changes made by this session (the server's CONNECTION_ID(); MySQL "
                        "logs it with each transaction, MariaDB only with DDL)")
    if with_where:
        p.add_argument("--changed", metavar="COLUMN", help="UPDATEs that changed COLUMN")
        p.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                       help="before or after image has COLUMN=VALUE (repeatable)")


def add_parser(sub) -> None:
    """Add ``query``, ``reconstruct`` and ``flashback`` to ``binlake``'s sub-parsers."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("query", help="one key's (or a selection's) row changes, oldest first",
                       epilog=_QUERY_EXAMPLE, formatter_class=fmt)
    _selection_arguments(p, with_where=True)
    p.add_argument("--limit", type=int, help="at most this many changes (oldest first)")
    p.add_argument("--format", choices=["table", "jsonl", "csv"], default="table")
    p.add_argument("--gold-dsn", help="ask gold's binlog_events instead of silver")
    p.add_argument("--query-hash", metavar="DIGEST",
                   help="with --gold-dsn: changes whose statement has this STATEMENT_DIGEST")
    p.set_defaults(handler=cmd_query)

    p = sub.add_parser("reconstruct", help="a table's rows at a time, GTID or binlog position",
                       epilog=_RECONSTRUCT_EXAMPLE, formatter_class=fmt)
    p.add_argument("--table", required=True, help="schema.table")
    point = p.add_mutually_exclusive_group(required=True)
    point.add_argument("--at", help="UTC time, or ISO 8601 with an offset")
    point.add_argument("--gtid", help="the state right after this transaction")
    point.add_argument("--pos", help="FILE:POS: every event starting before POS")
    p.add_argument("--pk", help="only this key (pk_values form)")
    p.add_argument("--format", choices=["jsonl", "csv", "sql"], default="jsonl")
    p.add_argument("--out", metavar="DIR", help="write a Delta table here instead")
    p.set_defaults(handler=cmd_reconstruct)

    p = sub.add_parser("flashback", help="SQL undoing a selection of changes, newest first",
                       epilog=_FLASHBACK_EXAMPLE, formatter_class=fmt)
    _selection_arguments(p, with_where=False)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true",
                      help="list what would be undone and the conflicts, no SQL")
    mode.add_argument("--apply", action="store_true", help="run it on --target-dsn")
    p.add_argument("--format", choices=["sql"], default="sql",
                   help="print the script for the mariadb/mysql client (default)")
    p.add_argument("--target-dsn", help="mysql://user:password@host:port/ for --apply")
    p.add_argument("--cascade", action=argparse.BooleanOptionalAction, default=None,
                   help="restore children that ON DELETE CASCADE removed or ON DELETE / "
                        "ON UPDATE SET NULL cleared (default: on when the snapshot shows such "
                        "foreign keys)")
    p.set_defaults(handler=cmd_flashback)


def _selection(args: argparse.Namespace):
    return build_selection(
        table=args.table, schema=args.schema, pk=args.pk, since=args.since, until=args.until,
        gtid=args.gtid, event_type=args.event_type, changed=getattr(args, "changed", None),
        where=getattr(args, "where", []), connection_id=getattr(args, "connection_id", None),
        query_hash=getattr(args, "query_hash", None))


def build_selection(*, table: str | None = None, schema: str | None = None,
                    pk: str | None = None, since: str | None = None, until: str | None = None,
                    gtid: str | None = None, event_type: str | None = None,
                    changed: str | None = None, where=(), connection_id: int | None = None,
                    query_hash: str | None = None):
    """A :class:`~pipelines.history.selection.Selection` from the flags' text (the CLI's and
    ``binlake mcp``'s arguments); :class:`ConfigError` naming the flag for a bad value."""
    from pipelines.history.selection import (EVENT_TYPES, Selection, parse_table,
                                             parse_where)
    from pipelines.history.times import parse_gtid_set, parse_time

    types = tuple(t.strip().upper() for t in (event_type or "").split(",") if t.strip())
    bad = [t for t in types if t not in EVENT_TYPES]
    if bad:
        raise ConfigError(f"--event-type {event_type!r}: expected INSERT, UPDATE, DELETE")
    if table and schema:
        raise ConfigError("--table and --schema exclude each other")
    return Selection(
        table=parse_table(table) if table else None, schema=schema, pk=pk,
        since=parse_time(since, "--since") if since else None,
        until=parse_time(until, "--until") if until else None,
        gtids=parse_gtid_set(gtid) if gtid else None, event_types=types,
        changed=changed, where=[parse_where(w) for w in where],
        connection_id=connection_id, query_hash=query_hash)


def cmd_query(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.history.query import (GOLD_OUTPUT_COLUMNS, OUTPUT_COLUMNS, before_history,
                                         check_names, query_gold, query_silver, write_changes)

    sel = _selection(args)
    if args.pk is not None and sel.table is None:
        raise ConfigError("--pk needs --table")
    if args.limit is not None and args.limit <= 0:
        raise ConfigError("--limit must be positive")
    gold = args.gold_dsn
    if sel.query_hash is not None and not gold:
        raise ConfigError("--query-hash is answered from gold only (add --gold-dsn): silver "
                          "has no STATEMENT_DIGEST")
    if gold:
        rows = iter(query_gold(gold, sel, args.limit, cfg.gold))
    else:
        from pipelines.engine.session import get_spark

        spark = get_spark(cfg.engine)
        rows = query_silver(spark, cfg, sel, args.limit)
    first = next(rows, None)
    if first is None:
        note = ""
        if not gold:
            check_names(spark, cfg, sel)
            note = before_history(spark, cfg, sel)
        print(f"query: no row changes match{note}", file=sys.stderr)
        return 0
    write_changes(itertools.chain([first], rows), args.format, sys.stdout,
                  GOLD_OUTPUT_COLUMNS if gold else OUTPUT_COLUMNS)
    return 0


def _csv_value(raw: str | None) -> str:
    if raw is None or raw == "null":
        return ""
    return json.loads(raw) if raw.startswith('"') else raw


def cmd_reconstruct(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.history.reconstruct import reconstruct, resolve_point
    from pipelines.history.selection import parse_table
    from pipelines.history.times import parse_time
    from pipelines.engine.session import get_spark

    schema, table = parse_table(args.table)
    spark = get_spark(cfg.engine)
    point = resolve_point(spark, cfg, at=parse_time(args.at, "--at") if args.at else None,
                          gtid=args.gtid, pos=args.pos)
    rec = reconstruct(spark, cfg, schema, table, point, pk=args.pk)
    for w in rec.warnings:
        print(f"reconstruct: warning: {w}", file=sys.stderr)
    if args.out:
        from pipelines.history.output import write_delta

        n = write_delta(rec, args.out)
        print(f"reconstruct: {schema}.{table} at {point.text}: {n} row(s) -> {args.out} "
              f"(history from {rec.start})")
        return 0
    from pipelines.history.flashback import generated_columns
    from pipelines.history.output import write_rows

    generated = (generated_columns(spark, cfg).get((schema, table), frozenset())
                 if args.format == "sql" else frozenset())
    n = write_rows(rec, args.format, sys.stdout, generated)
    if n == 0:
        print(f"reconstruct: {schema}.{table} had no rows at {point.text}", file=sys.stderr)
    return 0


def cmd_flashback(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.history.flashback import apply_plan, plan_flashback, render_script
    from pipelines.engine.session import get_spark

    sel = _selection(args)
    if not any((sel.table, sel.schema, sel.pk, sel.since, sel.until, sel.gtids,
                sel.connection_id is not None)):
        raise ConfigError("flashback needs a selection: --since/--until, --gtid, --table, "
                          "--pk or --connection-id (undoing the whole history is never what "
                          "you want)")
    if args.apply and not args.target_dsn:
        raise ConfigError("--apply needs --target-dsn mysql://user:password@host:port/")
    if sel.pk is not None and sel.table is None:
        raise ConfigError("--pk needs --table")
    spark = get_spark(cfg.engine)
    plan = plan_flashback(spark, cfg, sel, cascade=args.cascade)
    for w in plan.warnings:
        print(f"flashback: warning: {w}", file=sys.stderr)
    if plan.changes == 0:
        from pipelines.history.query import before_history, check_names

        check_names(spark, cfg, sel)
        print(f"flashback: no row changes match: nothing to undo"
              f"{before_history(spark, cfg, sel)}", file=sys.stderr)
        return 0
    if args.dry_run:
        print(f"flashback: {plan.changes} change(s) selected, {plan.statements} undo "
              f"statement(s) in {len(plan.transactions)} transaction(s), "
              f"{len(plan.conflicts)} conflict(s)")
        for c in plan.conflicts:
            print(c.describe())
        return 0
    if args.apply:
        from pipelines.gold.client import connect

        target = resolve_dsn(args.target_dsn, cfg.source, section="source",
                             setting="--target-dsn")  # TLS/password: [source] when not given
        conn = connect(target, database=False, autocommit=True, section="source")
        try:
            report = apply_plan(plan, conn)
        finally:
            conn.close()
        for c in plan.conflicts:
            print(c.describe())
        for r in report.rolled_back:
            print(f"conflict on the target, rolled back: {r}")
        print(f"flashback: {report.applied} transaction(s) applied, "
              f"{len(report.rolled_back)} rolled back, {len(plan.conflicts)} conflict(s) "
              "left out")
        return 1 if report.rolled_back else 0
    sys.stdout.write(render_script(plan))
    for c in plan.conflicts:
        print(f"flashback: {c.describe()}", file=sys.stderr)
    return 0
