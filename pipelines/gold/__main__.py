"""Job entry point of the gold stage: ``python -m pipelines.gold [global opts] [--gold-dsn URL]``.

Same options as ``binlake gold``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``) may come first or last. The DSN is better passed as ``BINLAKE_GOLD_DSN`` (a
command line is visible to every user of the machine).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from pipelines.config import load_config
from pipelines.errors import BinlakeError, ConfigError
from pipelines.gold.commands import add_gold_arguments, cmd_gold


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="binlake-gold", description="export silver to gold")
    ap.add_argument("--lake")
    ap.add_argument("--conf")
    ap.add_argument("--spark-remote")
    ap.add_argument("--engine", choices=["sail", "spark", "connect"])
    ap.add_argument("-v", "--verbose", action="store_true")
    add_gold_arguments(ap)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(args.conf, overrides={"lake.root": args.lake,
                                                "engine.remote": args.spark_remote,
                                                "engine.kind": args.engine})
        return cmd_gold(args, cfg)
    except ConfigError as exc:
        print(f"binlake gold: configuration error: {exc}", file=sys.stderr)
        return 2
    except BinlakeError as exc:
        print(f"binlake gold: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
