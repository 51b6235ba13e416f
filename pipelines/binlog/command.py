"""``binlake decode`` on the command line: its parser and its handler (``pipelines.command``)."""

from __future__ import annotations

import argparse
import sys

from pipelines.config import Config

__all__ = ["add_parser", "cmd_decode"]


def add_parser(sub) -> None:
    """Add ``decode`` to ``binlake``'s sub-parsers."""
    p = sub.add_parser("decode", help="print a binlog file's decoded events")
    p.add_argument("file")
    p.add_argument("--format", choices=["text", "jsonl"], default="text")
    p.set_defaults(handler=cmd_decode)


def cmd_decode(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.binlog.parser import ChecksumPolicy
    from pipelines.binlog.reader import BinlogFileReader
    from pipelines.binlog.show import write_events

    reader = BinlogFileReader(args.file, checksum=ChecksumPolicy(cfg.bronze.checksum))
    write_events(reader, sys.stdout, args.format)
    if reader.partial_tail:
        print(f"# {reader.name}: unfinished tail after pos {reader.end_pos}", file=sys.stderr)
    return 0
