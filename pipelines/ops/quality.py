"""``binlake quality`` on the command line: its parser and its handler (``pipelines.command``;
the rules and their run are ``pipelines.quality``'s, imported when the command runs)."""

from __future__ import annotations

import argparse

from pipelines.config import Config

__all__ = ["add_parser", "cmd_quality"]


def add_parser(sub) -> None:
    """Add ``quality`` to ``binlake``'s sub-parsers."""
    p = sub.add_parser("quality", help="run the data-quality rules (conf/quality.toml)")
    p.add_argument("--window", default=None,
                   help="last-run (default: rows of the latest silver commit), all, or Nh/Nd")
    p.add_argument("--rules", help="rules file (default conf/quality.toml)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(handler=cmd_quality)


def cmd_quality(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.quality import exit_code, load_rules, render_result, run_quality
    from pipelines.engine.session import get_spark

    res = run_quality(get_spark(cfg.engine), cfg, window=args.window,
                      rules=load_rules(args.rules))
    print(render_result(res, args.format))
    return exit_code(res)
