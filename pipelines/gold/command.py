"""``binlake init | gold | rotate | vacuum``: their parsers and handlers (``pipelines.command``).

``python -m pipelines.gold`` runs ``gold`` on its own. Handlers take the parsed arguments and
the loaded :class:`Config`, print one line per fact, and return the exit code. The DSN is
printed only in its redacted form.
"""

from __future__ import annotations

import argparse
import sys

from pipelines.config import Config

__all__ = ["GOLD_HELP", "add_parser", "cmd_init", "cmd_gold", "report_gold", "cmd_rotate",
           "cmd_vacuum", "render_gold_status"]

GOLD_HELP = "export new silver rows to gold, exactly once"


def _dsn_option(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--gold-dsn", required=required,
                   help="gold MySQL/MariaDB: mysql://user:password@host:port/db "
                        "(default gold.dsn / BINLAKE_GOLD_DSN; db created when missing)")


def add_parser(sub) -> None:
    """Add ``init``, ``gold``, ``rotate`` and ``vacuum`` to ``binlake``'s sub-parsers."""
    p = sub.add_parser("init", help="create the gold database and tables")
    _dsn_option(p)
    p.add_argument("--partitions", type=int, help="hourly partitions from the current hour "
                   "(default gold.partitions: 48)")
    p.set_defaults(handler=cmd_init)

    p = sub.add_parser("gold", help=GOLD_HELP)
    _dsn_option(p)
    p.set_defaults(handler=cmd_gold)

    p = sub.add_parser("rotate", help="drop expired gold hours, add future ones")
    _dsn_option(p)
    p.add_argument("--retain", help="keep this much gold history: Nd or Nh (default gold.retain)")
    p.add_argument("--add-future", type=int,
                   help="hourly partitions kept ahead of now (default gold.partitions_ahead)")
    p.set_defaults(handler=cmd_rotate)

    p = sub.add_parser("vacuum", help="Delta retention properties + VACUUM")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed")
    p.set_defaults(handler=cmd_vacuum)


def cmd_init(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.gold.job import resolve_dsn, run_init

    res = run_init(cfg, gold_dsn=args.gold_dsn, partitions=args.partitions)
    dsn = resolve_dsn(cfg, args.gold_dsn)
    _warn_feedback(cfg, args.gold_dsn)
    print(f"init: {dsn}: database {res.database} "
          f"{'created' if res.created_database else 'exists'}; tables {', '.join(res.tables)}; "
          f"{res.partitions} partitions ({res.partitions_added} added)")
    return 0


def cmd_gold(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.gold.job import run_gold
    from pipelines.engine.session import get_spark

    spark = get_spark(cfg.engine)
    code = report_gold(run_gold(spark, cfg, gold_dsn=args.gold_dsn))
    _warn_feedback(cfg, args.gold_dsn, spark)
    return code


def _warn_feedback(cfg: Config, gold_dsn: str | None, spark=None) -> None:
    """Warn (stderr) when gold writes to the server whose binlogs are indexed
    (``bronze.excluded.feedback_warning``); with ``spark``, also when silver holds rows of
    gold's database."""
    from pipelines.bronze.excluded import feedback_warning

    schemas = None
    # silver is scanned only when the source server is unknown (binlogs read from files):
    # with source.dsn, same_server already decides
    if spark is not None and not cfg.source.dsn:
        from pipelines.lake.tables import SILVER_EVENTS, Lake

        lake = Lake.of(cfg)
        if lake.exists(spark, SILVER_EVENTS):
            schemas = {r[0] for r in lake.read(spark, SILVER_EVENTS)
                       .select("schema_name").distinct().collect()}
    text = feedback_warning(cfg, gold_dsn, schemas)
    if text:
        print(f"{'gold' if spark is not None else 'init'}: {text}", file=sys.stderr)


def report_gold(res) -> int:
    """Print a gold run's result (``job.GoldResult``); the exit code."""
    if res.note:
        print(f"gold: {res.note}")
    if res.mode != "none":
        rate = res.rows_read / res.seconds if res.seconds else 0.0
        span = (f"silver v{res.to_version} from the start" if res.from_version is None
                or res.from_version < 0 else f"silver v{res.from_version} -> v{res.to_version}")
        print(f"gold: {span} ({res.mode}"
              f"{'' if res.files is None else f', {res.files} file(s)'}): {res.rows_read} rows "
              f"read, {res.rows_inserted} inserted, {res.rows_read - res.rows_inserted} already "
              f"there; {res.pk_marked} pk_values over 512 chars stored marked; method "
              f"{res.method}, {res.tasks} task(s), {res.partitions_added} partition(s) added; "
              f"{res.seconds:.1f}s ({rate:,.0f} rows/s)")
    if res.snapshot_rows:
        print(f"gold: {res.snapshot_rows} schema snapshot row(s) added")
    return 0


def cmd_rotate(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.gold.job import run_rotate
    from pipelines.engine.session import get_spark

    res = run_rotate(get_spark(cfg.engine), cfg, gold_dsn=args.gold_dsn, retain=args.retain,
                     add_future=args.add_future)
    print(f"rotate: cut-off {res.cutoff:%Y-%m-%d %H:00} UTC; dropped {len(res.dropped)} "
          f"partition(s){': ' + ', '.join(res.dropped) if res.dropped else ''}; "
          f"{res.partitions_added} future partition(s) added")
    for k in res.kept:
        print(f"rotate: kept {k['partition']}: gold has {k['gold_rows']} rows, silver only "
              f"{k['silver_rows']}")
    return 0


def cmd_vacuum(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.gold.job import run_vacuum
    from pipelines.engine.session import get_spark

    # The session finds catalog tables' files, and runs VACUUM where its engine has it.
    for t in run_vacuum(cfg, dry_run=args.dry_run, spark=get_spark(cfg.engine)):
        props = ", ".join(f"{k}={v}" for k, v in sorted(t["properties"].items()))
        verb = "would remove" if t["dry_run"] else "removed"
        print(f"vacuum: {t['table']}: {verb} {t['files_removed']} file(s); version "
              f"{t['version']}; via {t['via']}; {props}")
    return 0


def render_gold_status(g: dict) -> list[str]:
    """Text lines for ``binlake status`` from :func:`pipelines.gold.job.gold_status`."""
    if not g.get("configured"):
        return ["gold: not configured (gold.dsn)"]
    if "error" in g:
        return [f"gold: {g.get('dsn')}: {g['error']}"]
    w = g["watermark"]
    lines = [f"gold: {g['dsn']}: watermark silver v{w['silver_version']} ({w['status']}, "
             f"finished {w['finished_at']}), silver at v{g['silver_version']}, lag "
             f"{g['lag_versions']} version(s) / {g['lag_seconds']}s since the latest event; "
             f"{g['pk_values_marked_last_run']} pk_values marked in the last run"]
    parts = g["partitions"]
    lines.append(f"  partitions: {len(parts)} ({parts[0]['name']} .. {parts[-1]['name']}), "
                 f"p_future ~{g['p_future_estimated_rows']} rows")
    lines += [f"    {p['name']}: ~{p['estimated_rows']} rows" for p in parts
              if p["estimated_rows"]]
    return lines
