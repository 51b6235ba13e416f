"""``binlake stream`` on the command line: its parser and its handler (``pipelines.command``).

``python -m pipelines.stream`` runs the same command on its own.
"""

from __future__ import annotations

import argparse

from pipelines.config import Config
from pipelines.errors import ConfigError

__all__ = ["HELP", "add_parser", "cmd_stream"]

HELP = "follow a live server as a replica into the lake"


def add_parser(sub) -> None:
    """Add ``stream`` to ``binlake``'s sub-parsers."""
    from pipelines.mirror.command import add_mirror_flag

    p = sub.add_parser("stream", help=HELP)
    p.add_argument("--source-dsn", help="mysql://user:password@host:port/ (default source.dsn)")
    p.add_argument("--server-id", type=int, required=True,
                   help="this replica's server_id (unique among the source's replicas)")
    p.add_argument("--start-file", help="first run (or --reset): binlog file to start in")
    p.add_argument("--start-pos", type=int, help="position in --start-file (default 4)")
    p.add_argument("--start-gtid", help="first run (or --reset): GTID position/set to start "
                                        "after (MariaDB d-s-n,...; MySQL uuid:a-b,...)")
    p.add_argument("--gold-dsn", help="also follow into gold at this server (default gold.dsn)")
    p.add_argument("--reset", action="store_true",
                   help="ignore the saved checkpoint and start from the start flags")
    p.add_argument("--no-gap-fill", dest="gap_fill", action="store_false",
                   help="refuse to skip binlogs the server purged (default: skip, record a gap)")
    p.add_argument("--stop-after", type=float, metavar="SECONDS",
                   help="stop cleanly after this many seconds")
    p.add_argument("--source", help="source name written as source_id (default from conf)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve Prometheus text metrics at http://HOST:PORT/metrics "
                        "(all interfaces; docs/stream.md)")
    add_mirror_flag(p)
    p.set_defaults(handler=cmd_stream)


def cmd_stream(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.engine.session import get_spark
    from pipelines.stream.job import run_stream

    url = args.source_dsn or cfg.source.dsn
    if not url:
        raise ConfigError("stream needs --source-dsn mysql://user:password@host:port/ or "
                          "source.dsn in the configuration")
    from pipelines.lake.lease import lake_lease

    with lake_lease(cfg, f"stream-{cfg.source.name}"):  # one stream per source and lake
        return run_stream(get_spark(cfg.engine), cfg, source_dsn=url,
                          server_id=args.server_id,
                          start_file=args.start_file, start_pos=args.start_pos,
                          start_gtid=args.start_gtid, gold_dsn=args.gold_dsn, reset=args.reset,
                          gap_fill=args.gap_fill, stop_after=args.stop_after,
                          mirror=getattr(args, "mirror", False),
                          metrics_port=args.metrics_port)
