"""A forwarding HTTP proxy in front of a real MinIO that drops the conditional headers.

It plays an S3-compatible store without conditional writes (the kind the lease must refuse):
every request goes to MinIO unchanged (the same ``Host`` header, so the SigV4 signature still
matches) except that ``If-None-Match`` and ``If-Match`` are removed.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

__all__ = ["ConditionStrippingProxy"]

_DROP = {"if-none-match", "if-match", "connection", "keep-alive", "proxy-connection"}


class ConditionStrippingProxy:
    """``with ConditionStrippingProxy(minio.endpoint) as url:`` → ``http://127.0.0.1:PORT``."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream).netloc
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(proxy.upstream, timeout=30)
                conn.putrequest(self.command, self.path, skip_host=True,
                                skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _DROP:
                        conn.putheader(name, value)
                conn.endheaders(body)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for name, value in resp.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_DELETE = do_HEAD = do_POST = _forward

            def log_message(self, *_args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> str:
        self.thread.start()
        return self.url

    def __exit__(self, *_exc) -> None:
        self.server.shutdown()
        self.server.server_close()
