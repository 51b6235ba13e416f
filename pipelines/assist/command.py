"""``binlake mcp`` and ``binlake console`` on the command line: their parsers and handlers
(``pipelines.command``).
"""

from __future__ import annotations

import argparse
import os

from pipelines.config import Config
from pipelines.errors import ConfigError

__all__ = ["add_parser", "LOOPBACK"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

_MCP_EXAMPLE = """example:
  binlake --lake ./lake mcp                  # stdio (an assistant starts it)
  binlake --lake ./lake mcp --port 8765      # streamable HTTP at http://127.0.0.1:8765/mcp
"""
_CONSOLE_EXAMPLE = """example:
  binlake --lake ./lake console --port 8080                       # http://127.0.0.1:8080/
  BINLAKE_CONSOLE_TOKEN=s3cret binlake --lake ./lake console --port 8080 --host 0.0.0.0
"""


def add_parser(sub) -> None:
    """Add ``mcp`` and ``console`` to ``binlake``'s sub-parsers."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("mcp", help="read-only MCP tools over the lake (stdio, or HTTP with "
                                   "--port)", epilog=_MCP_EXAMPLE, formatter_class=fmt)
    p.add_argument("--port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT/mcp "
                                            "instead of stdio")
    _limit_arguments(p)
    p.set_defaults(handler=cmd_mcp)

    p = sub.add_parser("console", help="a web console over the lake's history (loopback)",
                       epilog=_CONSOLE_EXAMPLE, formatter_class=fmt)
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (other than loopback needs --token)")
    p.add_argument("--token", help="every request must carry it (?token=, or the header "
                                   "Authorization: Bearer TOKEN); env BINLAKE_CONSOLE_TOKEN")
    _limit_arguments(p)
    p.set_defaults(handler=cmd_console)


def _limit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-rows", type=int, default=200, help="rows per result (default 200)")
    p.add_argument("--max-bytes", type=int, default=256 * 1024,
                   help="bytes of rows per result (default 256 KiB)")


def _limits(args: argparse.Namespace):
    from pipelines.assist.mcp_tools import Limits

    if args.max_rows <= 0 or args.max_bytes <= 0:
        raise ConfigError("--max-rows and --max-bytes must be positive")
    return Limits(rows=args.max_rows, bytes=args.max_bytes)


def _port(port: int | None) -> None:
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"--port {port}: expected 1-65535")


def cmd_mcp(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.assist.mcp_server import serve_http, serve_stdio

    _port(args.port)
    limits = _limits(args)
    if args.port is None:
        serve_stdio(cfg, limits)
    else:
        serve_http(cfg, args.port, limits)
    return 0


def cmd_console(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.assist.console_app import serve

    _port(args.port)
    token = args.token or os.environ.get("BINLAKE_CONSOLE_TOKEN") or None
    if args.host not in LOOPBACK and not token:
        raise ConfigError(f"--host {args.host}: a console reachable beyond this machine needs "
                          "--token (or BINLAKE_CONSOLE_TOKEN); every request must carry it")
    serve(cfg, host=args.host, port=args.port, token=token, limits=_limits(args))
    return 0
