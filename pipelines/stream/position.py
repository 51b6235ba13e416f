"""Where the stream is: the place after the last event read, the last transaction boundary,
and the last committed place. Pure state, no I/O.

Three places matter (``docs/stream.md``):

* ``here`` — after the last event read (file, position of the next event, GTID state);
* ``boundary`` — after the last complete transaction: what a commit may cover, and where a
  reconnect resumes (everything after it is read again from the server);
* ``committed`` — the (file, position) of the last CHECKPOINT written to bronze.

Invariants: ``boundary`` only moves forward by :meth:`mark` at a transaction boundary (or by
:meth:`jump` over a gap); :meth:`rollback` puts ``here`` and the counters back at
``boundary``; a GTID enters the executed set only when its transaction ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.stream.gtid import GtidState
from pipelines.stream.protocol import StartAt

__all__ = ["Where", "StreamPosition"]


@dataclass
class Where:
    """A place in the stream: file, position of the next event, GTID state up to there."""

    file: str
    pos: int
    gtid: GtidState

    def copy(self) -> "Where":
        return Where(self.file, self.pos, self.gtid.copy())


class StreamPosition:
    """The stream's places and counters (module docstring)."""

    def __init__(self, mode: str = "position") -> None:
        self.mode = mode  # position | gtid: how a reconnect asks for the dump
        self.here: Where | None = None
        self.boundary: Where | None = None
        self.committed: tuple[str, int] | None = None
        self.trx_gtid: str | None = None  # the open transaction's GTID
        self.last_gtid: str | None = None  # the last complete transaction's GTID
        self.events = 0
        self.row_changes = 0
        self.last_event_ts = 0
        self.caught_up = False
        self.last_ddl: tuple[str, int] | None = None  # where the last DDL read ends
        self._marked = (0, 0, None)  # (events, row_changes, last_ddl) at the boundary

    # -- moving ------------------------------------------------------------------------------
    def resume(self, *, events: int, row_changes: int, last_gtid: str | None,
               last_ddl: tuple[str, int] | None = None) -> None:
        """Counters carried over from a checkpoint."""
        self.events, self.row_changes, self.last_gtid = events, row_changes, last_gtid
        self.last_ddl = last_ddl
        self._marked = (events, row_changes, last_ddl)

    def start(self, where: Where) -> None:
        """Reading starts at ``where`` (also the boundary: nothing is open yet)."""
        self.here = where
        self.boundary = where.copy()

    def jump(self, where: Where) -> None:
        """Skip to ``where`` (a gap): both ``here`` and ``boundary`` move there."""
        self.start(where)

    def heartbeat(self, next_pos: int) -> None:
        """A HEARTBEAT: caught up when the server has nothing past ``here``."""
        self.caught_up = next_pos <= self.here.pos

    def event(self, next_pos: int, timestamp: int) -> None:
        """An event at a file offset was read; the next one starts at ``next_pos``."""
        self.caught_up = False
        self.events += 1
        self.here.pos = next_pos
        self.last_event_ts = timestamp

    def rows(self, n: int) -> None:
        self.row_changes += n

    def ddl(self) -> None:
        """The event just read may change a schema: a snapshot is owed past ``here``."""
        self.last_ddl = (self.here.file, self.here.pos)

    def gtid(self, gtid: str) -> None:
        """The open transaction's GTID (it counts once the transaction ends)."""
        self.trx_gtid = gtid

    def rotate(self, name: str, pos: int, *, timestamp: int | None = None) -> None:
        """Reading continues in ``name`` at ``pos``; a real ROTATE (``timestamp`` given) is an
        event of the file it ends."""
        self.caught_up = False
        if timestamp is not None:
            self.events += 1
            self.last_event_ts = timestamp
        self.here.file, self.here.pos = name, pos

    def transaction_end(self) -> None:
        """No transaction is open after the last event: its GTID counts, the boundary moves."""
        if self.trx_gtid:
            self.here.gtid.add(self.trx_gtid)
            self.last_gtid = self.trx_gtid
        self.trx_gtid = None
        self.mark()

    def mark(self) -> None:
        self.boundary = self.here.copy()
        self._marked = (self.events, self.row_changes, self.last_ddl)

    def rollback(self) -> None:
        """Forget everything after the boundary (the server sends it again)."""
        self.here = self.boundary.copy()
        self.events, self.row_changes, self.last_ddl = self._marked
        self.trx_gtid = None

    def committed_boundary(self) -> None:
        self.committed = (self.boundary.file, self.boundary.pos)

    # -- reading -----------------------------------------------------------------------------
    @property
    def moved(self) -> bool:
        """The boundary is past the last checkpoint."""
        return (self.boundary.file, self.boundary.pos) != self.committed

    def resume_point(self) -> StartAt:
        """Where a (re)connect asks the server to start: the boundary."""
        b = self.boundary
        if self.mode == "gtid":
            return StartAt(b.file or None, b.pos, gtid=str(b.gtid) or None)
        return StartAt(b.file, b.pos)

    def lag(self, now: float) -> float:
        """Seconds between ``now`` (epoch) and the last event's timestamp; 0 when caught up."""
        if self.caught_up or not self.last_event_ts:
            return 0.0
        return max(0.0, now - self.last_event_ts)
