"""When the stream reconnects after a lost connection: pure, no clock, no I/O.

The wait doubles from 1 s up to ``stream.reconnect_max_seconds``; ``stream.reconnect_attempts``
failures in a row give up (0 = never). Any event read resets the count (:meth:`Backoff.ok`).
"""

from __future__ import annotations

from pipelines.errors import SourceError

__all__ = ["Backoff"]


class Backoff:
    """Failed connects in a row, and how long to wait before the next one."""

    def __init__(self, *, attempts: int, max_seconds: float) -> None:
        self.attempts = attempts  # 0: never give up
        self.max_seconds = max_seconds
        self.failures = 0

    def ok(self) -> None:
        """The connection delivered an event: the next failure waits 1 s again."""
        self.failures = 0

    def failed(self, why: BaseException) -> float:
        """One more failure; the seconds to wait before reconnecting.

        Raises :class:`SourceError` (naming ``why``) once ``attempts`` failures in a row
        have been exceeded.
        """
        self.failures += 1
        if self.attempts and self.failures > self.attempts:
            raise SourceError(f"{why} (gave up after {self.attempts} reconnects)") from None
        return min(2 ** (self.failures - 1), self.max_seconds)
