"""``binlake serve``: one long-running engine with the lake's views, for notebooks and BI.

On the embedded engine it starts a Sail Spark Connect server on ``--host``/``--port``; with
``--spark-remote`` it uses that server. Every lake table and mirror table is registered as
a *global* temporary view, which every session of the server sees as ``global_temp.<name>``
(a plain temp view lives in one session only). Views are re-registered every ``--refresh``
seconds so new data and new mirror tables show up (a Delta view reads the table version it
was made from). It prints the Spark Connect URL clients connect with::

    SparkSession.builder.remote("sc://127.0.0.1:15002").getOrCreate()
    spark.sql("SELECT * FROM global_temp.shop__orders")

and runs until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import threading

from pipelines.config import Config, EngineConfig
from pipelines.errors import ConfigError

__all__ = ["add_parser", "cmd_serve", "register_global_views"]


def add_parser(sub) -> None:
    """Add ``serve`` to ``binlake``'s sub-parsers."""
    p = sub.add_parser("serve", help="keep an engine running with the lake's views "
                                     "(Spark Connect)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    p.add_argument("--port", type=int, default=15002, help="port (0 = any free port)")
    p.add_argument("--refresh", type=float, default=30.0,
                   help="re-register the views every this many seconds (0 = never)")
    p.set_defaults(handler=cmd_serve)


def register_global_views(spark, cfg: Config) -> list[str]:
    """Every existing lake table and mirror table as a global temp view; the names."""
    from pipelines.ops.views import register_views

    return register_views(spark, cfg, global_views=True)


def cmd_serve(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.engine.session import get_spark, start_sail_server

    if args.port < 0 or args.port > 65535:
        raise ConfigError(f"--port: expected 0..65535, got {args.port}")
    server = None
    if cfg.engine.remote:
        url = cfg.engine.remote
    else:
        if cfg.engine.kind == "spark":
            raise ConfigError("binlake serve runs the embedded engine (Sail) or registers "
                              "views on --spark-remote; --engine spark has no Connect server")
        server = start_sail_server(args.host, args.port)
        host, port = server.listening_address
        url = f"sc://{host}:{port}"
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    spark = None
    try:
        spark = get_spark(EngineConfig(kind="connect", remote=url))
        names = register_global_views(spark, cfg)
        print(f"binlake serve: Spark Connect at {url}", flush=True)
        print(f'  SparkSession.builder.remote("{url}").getOrCreate()', flush=True)
        print(f"  {len(names)} views as global_temp.<name>: {', '.join(names)}", flush=True)
        while not stop.wait(args.refresh if args.refresh > 0 else None):
            register_global_views(spark, cfg)
    finally:
        if spark is not None and server is not None:
            spark.stop()  # the client first: its channel would wait on the stopped server
        if server is not None:
            server.stop()
    print("binlake serve: stopped", flush=True)
    return 0
