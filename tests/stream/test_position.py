"""``stream.position``: where the stream is, as statements about the boundary (pure, no server,
no engine). A crash or a reconnect resumes from ``boundary``; these tests pin down when it
moves and what a rollback restores."""

from __future__ import annotations

from pipelines.stream.gtid import GtidState
from pipelines.stream.position import StreamPosition, Where
from pipelines.stream.protocol import StartAt


def _at(file: str = "bin.000001", pos: int = 4, gtid: str = "0-1-10") -> StreamPosition:
    p = StreamPosition()
    p.start(Where(file, pos, GtidState.parse(gtid, mariadb=True)))
    return p


def _transaction(p: StreamPosition, gtid: str, end: int, rows: int = 1) -> None:
    p.gtid(gtid)
    p.event(end - 20, 1_700_000_000)  # GTID event
    p.rows(rows)
    p.event(end, 1_700_000_001)  # ROWS + XID


def test_the_boundary_moves_only_at_a_transaction_end() -> None:
    p = _at()
    _transaction(p, "0-1-11", 400, rows=3)
    assert (p.boundary.file, p.boundary.pos) == ("bin.000001", 4)  # still open
    assert str(p.here.gtid) == "0-1-10"  # an open transaction's GTID does not count yet
    p.transaction_end()
    assert (p.boundary.pos, str(p.boundary.gtid), p.last_gtid) == (400, "0-1-11", "0-1-11")
    assert (p.events, p.row_changes) == (2, 3)


def test_rollback_restores_the_boundary_and_its_counters() -> None:
    p = _at()
    _transaction(p, "0-1-11", 400, rows=3)
    p.transaction_end()
    _transaction(p, "0-1-12", 800, rows=5)  # cut by a lost connection
    p.rollback()
    assert (p.here.pos, str(p.here.gtid), p.trx_gtid) == (400, "0-1-11", None)
    assert (p.events, p.row_changes) == (2, 3)
    assert p.here is not p.boundary  # reading on must not move the boundary
    p.event(500, 1)
    assert p.boundary.pos == 400


def test_a_ddl_counts_from_its_transaction_end_and_a_rollback_forgets_it() -> None:
    p = StreamPosition()
    p.resume(events=9, row_changes=7, last_gtid="0-1-10", last_ddl=("bin.000001", 120))
    p.start(Where("bin.000001", 300, GtidState.parse("0-1-10", mariadb=True)))
    p.event(500, 1)  # a DDL, cut by a lost connection before it ends
    p.ddl()
    assert p.last_ddl == ("bin.000001", 500)
    p.rollback()  # the checkpoint's counters and DDL, not zeros
    assert (p.events, p.row_changes, p.last_ddl) == (9, 7, ("bin.000001", 120))
    p.event(500, 1)
    p.ddl()
    p.transaction_end()
    p.event(700, 1)
    p.rollback()
    assert (p.events, p.last_ddl) == (10, ("bin.000001", 500))


def test_resume_point_is_the_boundary_in_either_mode() -> None:
    p = _at()
    _transaction(p, "0-1-11", 400)
    p.transaction_end()
    _transaction(p, "0-1-12", 800)
    assert p.resume_point() == StartAt("bin.000001", 400)
    p.mode = "gtid"
    assert p.resume_point() == StartAt("bin.000001", 400, gtid="0-1-11")
    empty = StreamPosition("gtid")
    empty.start(Where("", 4, GtidState.parse("", mariadb=True)))
    assert empty.resume_point() == StartAt(None, 4, gtid=None)


def test_moved_says_whether_a_commit_has_something_to_record() -> None:
    p = _at()
    assert p.moved  # nothing committed yet
    p.committed_boundary()
    assert not p.moved
    _transaction(p, "0-1-11", 400)
    assert not p.moved  # an open transaction is not committable
    p.transaction_end()
    assert p.moved


def test_rotate_counts_only_a_real_rotate() -> None:
    p = _at()
    p.rotate("bin.000002", 4)  # the server's artificial ROTATE at the start of a dump
    assert (p.here.file, p.here.pos, p.events) == ("bin.000002", 4, 0)
    p.rotate("bin.000003", 4, timestamp=1_700_000_100)  # a real one ends bin.000002
    assert (p.here.file, p.events, p.last_event_ts) == ("bin.000003", 1, 1_700_000_100)
    assert p.boundary.file == "bin.000001"  # the loop marks it outside transactions


def test_heartbeat_and_lag() -> None:
    p = _at()
    assert p.lag(1_700_000_000) == 0.0  # no event yet
    p.event(400, 1_700_000_000)
    assert p.lag(1_700_000_030) == 30.0
    p.heartbeat(300)
    assert p.caught_up and p.lag(1_700_000_030) == 0.0
    p.heartbeat(900)  # the server is past us
    assert not p.caught_up
