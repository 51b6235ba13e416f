"""A TCP forwarder in front of a real server whose gate can hold new connections.

Connections made while the gate is open are forwarded both ways for as long as they live.
After :meth:`TcpGate.hold`, a new connection is accepted but not forwarded (the client waits
in its handshake) until :meth:`TcpGate.release`; :attr:`TcpGate.held` counts them. A test
uses it to stop a process at the moment it opens its next connection to the server — for
the stream, the schema snapshot right after a DDL's commit — and kill it exactly there.
"""

from __future__ import annotations

import socket
import threading

__all__ = ["TcpGate"]


class TcpGate:
    """``with TcpGate(port) as gate:`` → forwards ``127.0.0.1:gate.port`` to ``port``."""

    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (host, upstream_port)
        self.held = 0
        self._open = threading.Event()
        self._open.set()
        self._refusing = False
        self.refused = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server((host, 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []

    def hold(self) -> None:
        """New connections wait from now on (open ones keep flowing)."""
        self._refusing = False
        self._open.clear()

    def refuse(self) -> None:
        """New connections are closed at once from now on (open ones keep flowing)."""
        self._refusing = True

    def release(self) -> None:
        self._refusing = False
        self._open.set()

    def __enter__(self) -> "TcpGate":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._open.set()
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                try:
                    s.close()
                except OSError:
                    pass

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        if self._refusing:
            with self._lock:
                self.refused += 1
            client.close()
            return
        if not self._open.is_set():
            with self._lock:
                self.held += 1
            self._open.wait()
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets += [client, upstream]
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
