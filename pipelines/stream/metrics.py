"""``binlake stream --metrics-port N``: the stream's numbers as Prometheus text metrics.

``GET /metrics`` on every interface at port N answers the text exposition format 0.0.4
(https://prometheus.io/docs/instrumenting/exposition_formats/) from the latest sample the
stream's loop took (:meth:`~pipelines.stream.progress.Liveness.sample`, about once a second;
while silver runs inside the loop the sample waits for it). The server runs on a daemon
thread and only reads that sample: it never touches the stream's state.

=====================================================  =======  ==============================
metric                                                 type     what
=====================================================  =======  ==============================
``binlake_stream_lag_seconds{stage}``                  gauge    how far each stage (bronze,
                                                                silver, mirror, gold) is
                                                                behind the source
``binlake_stream_row_changes_total``                   counter  row changes streamed
``binlake_stream_row_changes_per_second``              gauge    over the last seconds
``binlake_stream_events_per_second``                   gauge    binlog events, the same way
``binlake_stream_commits_total``                       counter  bronze commits of this run
``binlake_stream_reconnects_total``                    counter  lost replication connections
``binlake_stream_last_error_timestamp_seconds``        gauge    epoch of the last error, 0: none
``binlake_stream_last_error_info{stage,message}``      gauge    1, while there is a last error
``binlake_stream_running``                             gauge    1 while running, 0 reconnecting
=====================================================  =======  ==============================

Every metric carries ``source`` (``source.name``).
"""

from __future__ import annotations

import http.server
import threading
from typing import Any, Callable

from pipelines.errors import ConfigError

__all__ = ["render", "MetricsServer"]

_HELP = {
    "lag_seconds": ("gauge", "Seconds each stage is behind the source (0: caught up)."),
    "row_changes_total": ("counter", "Row changes streamed into bronze."),
    "row_changes_per_second": ("gauge", "Row changes streamed per second, recently."),
    "events_per_second": ("gauge", "Binlog events read per second, recently."),
    "commits_total": ("counter", "Bronze commits of this run."),
    "reconnects_total": ("counter", "Replication connections lost and reopened."),
    "last_error_timestamp_seconds": ("gauge", "When the last error happened (0: none)."),
    "last_error_info": ("gauge", "The last error: its stage and message."),
    "running": ("gauge", "1 while the stream reads, 0 while it reconnects or stops."),
}


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(sample: dict[str, Any]) -> str:
    """The exposition text of one sample (pure): ``source``, ``lags`` (stage → seconds),
    ``row_changes``, ``rows_per_second``, ``events_per_second``, ``commits``,
    ``reconnects``, ``error`` (None or (epoch, stage, message)), ``state``."""
    src = f'source="{_label(sample["source"])}"'
    error = sample.get("error")
    values: dict[str, list[tuple[str, float]]] = {
        "lag_seconds": [(f'{src},stage="{_label(stage)}"', lag)
                        for stage, lag in sample["lags"].items()],
        "row_changes_total": [(src, sample["row_changes"])],
        "row_changes_per_second": [(src, sample["rows_per_second"])],
        "events_per_second": [(src, sample["events_per_second"])],
        "commits_total": [(src, sample["commits"])],
        "reconnects_total": [(src, sample["reconnects"])],
        "last_error_timestamp_seconds": [(src, error[0] if error else 0)],
        "last_error_info": ([(f'{src},stage="{_label(error[1])}",message="{_label(error[2])}"',
                              1)] if error else []),
        "running": [(src, int(sample["state"] == "running"))],
    }
    out = []
    for name, series in values.items():
        kind, text = _HELP[name]
        out += [f"# HELP binlake_stream_{name} {text}", f"# TYPE binlake_stream_{name} {kind}"]
        out += [f"binlake_stream_{name}{{{labels}}} {_number(v)}" for labels, v in series]
    return "\n".join(out) + "\n"


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.3f}"


class MetricsServer:
    """``/metrics`` on ``port`` (all interfaces) from ``sample()``, on a daemon thread.

    Raises :class:`ConfigError` when the port cannot be bound (taken, privileged).
    """

    def __init__(self, port: int, sample: Callable[[], dict[str, Any] | None]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                doc = sample()
                if self.path.split("?")[0] != "/metrics" or doc is None:
                    self.send_error(404 if doc is not None else 503)
                    return
                body = render(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # no line per scrape on stderr
                pass

        try:
            self.httpd = http.server.ThreadingHTTPServer(("", port), Handler)
        except OSError as exc:
            raise ConfigError(f"--metrics-port {port}: cannot listen there: {exc}") from None
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, name="binlake-metrics",
                         daemon=True).start()

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
