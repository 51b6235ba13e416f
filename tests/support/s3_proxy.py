"""A forwarding HTTP proxy in front of a real MinIO, playing two kinds of trouble.

* ``strip_conditions=True``: ``If-None-Match`` and ``If-Match`` are removed, so MinIO plays an
  S3-compatible store without conditional writes (the kind the lease must refuse);
* ``lose_answers=N``: the next N PUTs reach MinIO and are done, but their answers are dropped
  (the connection closes without a response), as when a connection resets after the store
  wrote: the client retries a request that already succeeded.

Every request goes to MinIO with the same ``Host`` header, so the SigV4 signature matches.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

__all__ = ["S3Proxy"]

_HOP = {"connection", "keep-alive", "proxy-connection"}
_CONDITIONS = {"if-none-match", "if-match"}


class S3Proxy:
    """``with S3Proxy(minio.endpoint, ...) as url:`` → ``http://127.0.0.1:PORT``."""

    def __init__(self, upstream: str, *, strip_conditions: bool = False) -> None:
        self.upstream = urlsplit(upstream).netloc
        self.strip_conditions = strip_conditions
        self.lose_answers = 0
        self.lost = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                drop = _HOP | (_CONDITIONS if proxy.strip_conditions else set())
                conn = http.client.HTTPConnection(proxy.upstream, timeout=30)
                conn.putrequest(self.command, self.path, skip_host=True,
                                skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in drop:
                        conn.putheader(name, value)
                conn.endheaders(body)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                if self.command == "PUT" and proxy._lose():
                    self.close_connection = True  # done upstream, answer never sent
                    return
                self.send_response(resp.status)
                for name, value in resp.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_DELETE = do_HEAD = do_POST = _forward

            def log_message(self, *_args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _lose(self) -> bool:
        with self._lock:
            if self.lose_answers <= 0:
                return False
            self.lose_answers -= 1
            self.lost += 1
            return True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "S3Proxy":
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.server.shutdown()
        self.server.server_close()
