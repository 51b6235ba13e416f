"""Job entry point of the stream: ``python -m pipelines.stream [global opts] --server-id N ...``.

Same options as ``binlake stream`` (``command.py``) plus the global ``--lake``, ``--conf``,
``--spark-remote``, ``--engine`` and ``-v``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from pipelines.config import load_config
from pipelines.errors import BinlakeError, ConfigError
from pipelines.stream.command import add_stream_arguments, cmd_stream


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m pipelines.stream",
                                 description="follow a live MySQL/MariaDB server into the lake")
    ap.add_argument("--lake", help="lake root directory (default from conf: ./lake)")
    ap.add_argument("--conf", help="TOML config file (default conf/binlake.toml)")
    ap.add_argument("--spark-remote", help="Spark Connect URL sc://HOST:PORT")
    ap.add_argument("--engine", choices=["sail", "spark", "connect"])
    ap.add_argument("-v", "--verbose", action="store_true")
    add_stream_arguments(ap)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(args.conf, overrides={
            "lake.root": args.lake, "engine.remote": args.spark_remote,
            "engine.kind": args.engine, "source.name": args.source})
        return cmd_stream(args, cfg)
    except ConfigError as exc:
        print(f"binlake stream: configuration error: {exc}", file=sys.stderr)
        return 2
    except BinlakeError as exc:
        print(f"binlake stream: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
