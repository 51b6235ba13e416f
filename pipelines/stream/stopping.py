"""A stopping stream's last catch-up, bounded: at most ``stream.stop_seconds``, and a second
SIGTERM/SIGINT (Ctrl-C again) ends it at once.

Both interrupt the catch-up where it is, as Ctrl-C interrupts any Python program: the signal
handler raises :class:`CutShort` in the main thread. That is safe for the stages it can cut
(silver, mirror, gold): each commits by one Delta commit or not at all and finds its own
place again from its watermark, exactly as after a kill -9; the stream itself has committed
bronze before. Off the main thread (no signals there) the catch-up runs unbounded.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

__all__ = ["CutShort", "bounded"]


class CutShort(BaseException):
    """The catch-up was interrupted: its bound passed, or a second signal came.

    A :class:`BaseException` like :class:`KeyboardInterrupt`, not an error of the tree in
    ``pipelines/errors.py``: no ``except Exception`` on the way (a stage's own error
    handling) may swallow it, and :func:`bounded`'s caller always catches it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Run the body for at most ``seconds``; raise :class:`CutShort` when they pass or
    SIGTERM/SIGINT arrives meanwhile (the handlers before are restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def cut(signum, _frame) -> None:
        raise CutShort("its bound passed" if signum == signal.SIGALRM
                       else f"{signal.Signals(signum).name} again")

    old = {s: signal.signal(s, cut) for s in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT)}
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in old.items():
            signal.signal(s, handler)
