"""``binlake mcp``: the tools of :mod:`pipelines.assist.mcp_tools` as an MCP server (the
``mcp`` package's FastMCP), over stdio or, with ``--port``, streamable HTTP at
``http://127.0.0.1:PORT/mcp`` (loopback only).

Every tool is read-only; results pass :func:`~pipelines.assist.mcp_tools.scrub` (no
password of the configuration, no ``user:pw@`` URL) and a binlake error becomes the tool's
error result with its one-line message (also scrubbed). The Spark session comes from the one
factory (:func:`pipelines.engine.session.get_spark`), made on the first call; calls are serialised
on it. On stdio, file descriptor 1 carries only the protocol: anything else writing to
stdout (the engine, a library) is sent to stderr.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from pipelines.assist.lake_handle import LakeHandle
from pipelines.assist.mcp_tools import (Limits, tool_flashback, tool_quality, tool_query,
                                        tool_reconstruct, tool_schema_changes, tool_status)
from pipelines.config import Config
from pipelines.errors import BinlakeError

__all__ = ["build_server", "serve_stdio", "serve_http"]

_INSTRUCTIONS = (
    "Read-only questions to a binlake lake (MySQL/MariaDB row changes indexed into Delta): "
    "query a key's changes, reconstruct a table at a moment, plan flashback SQL (never "
    "applied), status, schema changes, data quality. Tables are named schema.table; times are "
    "UTC 'YYYY-MM-DD HH:MM:SS' or ISO 8601 with an offset; pk is the primary-key values in key "
    "order, '|'-joined.")


class _Tools(LakeHandle):
    """The lake, with a binlake error turned into the tool's error result."""

    def call(self, fn: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        from mcp.server.fastmcp.exceptions import ToolError

        try:
            return self.run(fn, limits=self.limits, **kwargs)
        except BinlakeError as exc:
            raise ToolError(self.clean(str(exc))) from None


def build_server(cfg: Config, *, limits: Limits = Limits(), host: str = "127.0.0.1",
                 port: int = 8000):
    """The FastMCP server with the six tools registered."""
    from mcp.server.fastmcp import FastMCP

    lake = _Tools(cfg, limits)
    mcp = FastMCP("binlake", instructions=_INSTRUCTIONS, host=host, port=port,
                  log_level="WARNING")

    @mcp.tool()
    def query(table: str | None = None, schema: str | None = None, pk: str | None = None,
              since: str | None = None,
              until: str | None = None, gtid: str | None = None,
              event_type: str | None = None, changed: str | None = None,
              where: list[str] | None = None, limit: int | None = None) -> dict[str, Any]:
        """A key's (pk) or a selection's row changes of table (schema.table) or of every
        table of schema, oldest first:
        seq, event_timestamp, gtid, event_type, pk_values, changed_columns, row_before,
        row_after, the statement (query_text). Filters: since/until (inclusive), gtid (one or
        a set), event_type (INSERT,UPDATE,DELETE), changed (a column an UPDATE changed),
        where (['col=value', …] on either image). Bounded by limit and the server's caps
        (truncated: true when cut)."""
        return lake.call(tool_query, table=table, schema=schema, pk=pk, since=since,
                         until=until, gtid=gtid, event_type=event_type, changed=changed,
                         where=where, limit=limit)

    @mcp.tool()
    def reconstruct(table: str, at: str | None = None, gtid: str | None = None,
                    pos: str | None = None, pk: str | None = None,
                    limit: int | None = None) -> dict[str, Any]:
        """The rows of table (schema.table) at one point: at (a UTC time), gtid (right after
        that transaction) or pos (FILE:POS, every event before it); pk for one key. Rows are
        objects keyed by the columns of that moment, values in silver's forms."""
        return lake.call(tool_reconstruct, table=table, at=at, gtid=gtid, pos=pos, pk=pk,
                         limit=limit)

    @mcp.tool()
    def flashback(table: str | None = None, schema: str | None = None, pk: str | None = None,
                  since: str | None = None, until: str | None = None, gtid: str | None = None,
                  event_type: str | None = None) -> dict[str, Any]:
        """Undo SQL for a selection of changes (newest first, one transaction per source
        transaction) with its conflicts: a dry run for review, never applied by this server."""
        return lake.call(tool_flashback, table=table, schema=schema, pk=pk, since=since,
                         until=until, gtid=gtid, event_type=event_type)

    @mcp.tool()
    def status() -> dict[str, Any]:
        """What the lake holds: binlog files and their outcome, bronze/silver counts and
        versions, the stream's lag, leases, faults, the latest quality run, gold."""
        return lake.call(tool_status)

    @mcp.tool()
    def schema_changes(table: str | None = None) -> dict[str, Any]:
        """Per table (or one, schema.table): its DDL in binlog order (position, kind, the
        statement) and the schema snapshots describing it (coordinates, columns)."""
        return lake.call(tool_schema_changes, table=table)

    @mcp.tool()
    def quality() -> dict[str, Any]:
        """The latest data-quality run (status, rules not passed) and the last runs' trend."""
        return lake.call(tool_quality)

    return mcp


def serve_stdio(cfg: Config, limits: Limits = Limits()) -> None:
    """Serve on stdin/stdout until stdin closes."""
    import anyio
    from mcp.server.stdio import stdio_server

    protocol_out = os.fdopen(os.dup(1), "w", encoding="utf-8", newline="\n")
    os.dup2(2, 1)  # stray prints (and child processes) write to stderr, not the protocol
    sys.stdout = sys.stderr
    mcp = build_server(cfg, limits=limits)

    async def run() -> None:
        async with stdio_server(stdout=anyio.wrap_file(protocol_out)) as (read, write):
            server = mcp._mcp_server
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def serve_http(cfg: Config, port: int, limits: Limits = Limits()) -> None:
    """Serve streamable HTTP at ``http://127.0.0.1:port/mcp`` until interrupted."""
    print(f"binlake mcp: streamable HTTP at http://127.0.0.1:{port}/mcp (read-only tools)",
          file=sys.stderr, flush=True)
    build_server(cfg, limits=limits, port=port).run(transport="streamable-http")
