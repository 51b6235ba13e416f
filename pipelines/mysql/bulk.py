"""Prepared statements and commands: the packets of MariaDB's bulk INSERT.

Prepared statements (:func:`prepare_statement`, :func:`send_command`, :func:`read_ok`) are
the packets of MariaDB's bulk INSERT, which gold's export sends (``gold/bulk.py``); a
connection asks for it at login with ``connect(..., bulk=True)``. pymysql has no prepared
statements; these speak the three packets gold's bulk method needs.
"""

from __future__ import annotations

import struct

from pipelines.mysql.client import read_packet

__all__ = ["prepare_statement", "send_command", "read_ok"]

_COM_STMT_PREPARE = 0x16
_DEPRECATE_EOF = 1 << 24  # CLIENT_DEPRECATE_EOF: no EOF packet after column definitions
_MAX_PACKET = 0xFFFFFF  # a protocol packet's payload; a longer command continues in the next


def prepare_statement(conn, sql: str) -> tuple[int, int]:
    """COM_STMT_PREPARE on a pymysql connection: (statement id, parameter count). An error
    packet raises the server's error as pymysql does."""
    conn._execute_command(_COM_STMT_PREPARE, sql)
    first = read_packet(conn).get_all_data()
    stmt_id, columns, params = struct.unpack("<IHH", first[1:9])
    eof = not conn.client_flag & _DEPRECATE_EOF
    for count in (params, columns):  # their definitions, each list closed by an EOF packet
        for _ in range(count + (1 if count and eof else 0)):
            read_packet(conn)
    return stmt_id, params


def send_command(conn, command: int, head: bytes, body: memoryview) -> None:
    """As pymysql's ``_execute_command``: ``command``, then ``head`` and ``body`` as its
    payload, in packets of at most 16 MiB; but the body goes to the socket from the memory
    that holds it (an Arrow buffer), without being joined into one bytes object first."""
    pending = conn._result
    if conn._sock is None or (pending is not None and (pending.unbuffered_active
                                                       or pending.has_next)):
        conn._execute_command(command, head + bytes(body))  # pymysql settles those
        return
    conn._result = None
    first = bytes([command]) + head
    total, at, seq = len(first) + len(body), 0, 0
    while True:
        size = min(_MAX_PACKET, total - at)
        conn._write_bytes(struct.pack("<I", size)[:3] + bytes([seq]))
        end = at + size
        if at < len(first):  # only the first packet: the head is far below 16 MiB
            conn._write_bytes(first)
            at = len(first)
        if end > at:
            conn._write_bytes(body[at - len(first):end - len(first)])
        at, seq = end, (seq + 1) % 256
        if at == total and size < _MAX_PACKET:  # a full last packet is followed by an empty one
            break
    conn._next_seq_id = seq


def read_ok(conn) -> int:
    """The rows the server's OK packet reports affected; an error packet raises."""
    from pymysql.protocol import OKPacketWrapper

    return OKPacketWrapper(read_packet(conn)).affected_rows
