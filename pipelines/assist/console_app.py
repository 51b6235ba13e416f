"""``binlake console``: a Starlette app over the tools of :mod:`pipelines.assist.mcp_tools`
(the history, status and quality functions the CLI uses), rendered by
:mod:`pipelines.assist.console_pages`.

Pages: ``/`` (tables, change volume per hour, stream lag), ``/key?table=&pk=`` (a key's
timeline, changed columns highlighted), ``/asof?table=&at=`` (a table at a moment),
``/quality`` (the latest report and its trend). With a token (required beyond loopback:
:func:`pipelines.assist.command.cmd_console`), every request must carry it as ``?token=`` or
``Authorization: Bearer``; else 401. Read-only, GET only. Results pass
:func:`~pipelines.assist.mcp_tools.scrub`.
"""

from __future__ import annotations

import hmac
from typing import Any, Callable

from pipelines.assist import console_pages as pages
from pipelines.assist.lake_handle import LakeHandle
from pipelines.assist.mcp_tools import (Limits, change_volume, known_table_names, tool_quality,
                                        tool_query, tool_reconstruct, tool_status)
from pipelines.config import Config
from pipelines.errors import BinlakeError

__all__ = ["build_app", "serve"]


def build_app(cfg: Config, *, token: str | None = None, limits: Limits = Limits()):
    """The Starlette application."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse
    from starlette.routing import Route

    lake = LakeHandle(cfg, limits)

    class TokenCheck(BaseHTTPMiddleware):
        async def dispatch(self, request: Request, call_next):
            if token is not None:
                given = request.query_params.get("token") or ""
                auth = request.headers.get("authorization", "")
                if auth.lower().startswith("bearer "):
                    given = auth[7:].strip()
                if not hmac.compare_digest(given.encode(), token.encode()):
                    return PlainTextResponse("binlake console: a token is required "
                                             "(?token= or Authorization: Bearer)", 401)
            return await call_next(request)

    def respond(title: str, body: Callable[[], str]) -> HTMLResponse:
        try:
            return HTMLResponse(pages.page(title, body(), token))
        except BinlakeError as exc:
            msg = lake.clean(str(exc))
            return HTMLResponse(pages.page(title, pages.error_body(msg), token), 400)

    def home(request: Request) -> HTMLResponse:
        return respond("Tables", lambda: pages.home_body(
            lake.run(known_table_names), lake.run(change_volume),
            lake.run(tool_status, limits=limits), token))

    def key(request: Request) -> HTMLResponse:
        table, pk = request.query_params.get("table"), request.query_params.get("pk")

        def body() -> str:
            result = (lake.run(tool_query, table=table, pk=pk, limits=limits)
                      if table and pk else None)
            return pages.key_body(table, pk, result, token)
        return respond("Key timeline", body)

    def asof(request: Request) -> HTMLResponse:
        table, at = request.query_params.get("table"), request.query_params.get("at")

        def body() -> str:
            result = (lake.run(tool_reconstruct, table=table, at=at, limits=limits)
                      if table and at else None)
            return pages.asof_body(table, at, result, token)
        return respond("Table as of a moment", body)

    def quality(request: Request) -> HTMLResponse:
        def body() -> str:
            from pipelines.quality.trends import load_trends, render_trends

            result = lake.run(tool_quality, limits=limits)
            svg = (lake.run(lambda spark, c: render_trends(load_trends(spark, c)))
                   if result.get("latest") else "")
            return pages.quality_body(result, svg)
        return respond("Quality", body)

    return Starlette(routes=[Route("/", home), Route("/key", key), Route("/asof", asof),
                             Route("/quality", quality)],
                     middleware=[Middleware(TokenCheck)])


def serve(cfg: Config, *, host: str, port: int, token: str | None, limits: Limits) -> None:
    """Serve until interrupted."""
    import sys

    import uvicorn

    print(f"binlake console: http://{host}:{port}/"
          f"{' (token required)' if token else ''}", file=sys.stderr, flush=True)
    uvicorn.run(build_app(cfg, token=token, limits=limits), host=host, port=port,
                log_level="warning")
