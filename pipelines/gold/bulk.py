"""MariaDB's bulk protocol for gold's rows: one prepared INSERT, thousands of rows a command.

``COM_STMT_BULK_EXECUTE`` (MariaDB 10.2.7+) sends a prepared statement's parameters for many
rows in one command, in the binary protocol: the server parses the INSERT once per
connection, not once per row, and reads each value as it is sent instead of lexing a quoted,
escaped literal. Exporting the bench's 681,449 silver rows, the server used 18-22 CPU-s
against 24-27 for multi-row INSERT text (docs/performance.md, Gold export). Same statement, same
rows, same duplicate-key no-op as the ``insert`` method (``exporter``).

Wire form of one command (after the command byte ``0xFA``): the statement id (4 bytes), the
flags (2 bytes, ``SEND_TYPES``), each parameter's type (2 bytes: ``LONGLONG`` for gold's
integer columns, ``STRING`` for the rest); then per row, per parameter an indicator byte (0 a
value follows, 1 NULL) and the value: 8 bytes little-endian, or a length-encoded string.
:func:`bulk_rows` builds every row's bytes with pyarrow and numpy, no Python object per value.

The connection must have asked for ``MARIADB_CLIENT_STMT_BULK_OPERATIONS`` when it logged in
(``mysql/client.py``'s ``connect(..., bulk=True)``); MySQL has no such command. The packets
themselves (prepare, send, read the OK) are ``mysql/bulk.py``'s, as every pymysql internal is
``pipelines/mysql/``'s.
"""

from __future__ import annotations

import struct
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.gold.rows import INT_COLUMNS, byte_slices, concat_body
from pipelines.mysql.bulk import prepare_statement, read_ok, send_command

__all__ = ["COM_STMT_BULK_EXECUTE", "BulkInsert", "bulk_rows", "command_parts"]

COM_STMT_BULK_EXECUTE = 0xFA
_SEND_TYPES = 128  # STMT_BULK_FLAG_CLIENT_SEND_TYPES
_LONGLONG, _STRING = 8, 254  # MYSQL_TYPE_*
_NULL = b"\x01"  # STMT_INDICATOR_NULL (0: a value follows)
_NULL_PIECE = pa.scalar(_NULL, pa.binary())


def _int_values(arr: pa.Array) -> pa.Array | pa.Scalar:
    """Each value as its indicator byte and 8 bytes little-endian; NULL as the NULL byte (a
    column of NULLs: the NULL byte as one scalar piece)."""
    n = len(arr)
    if arr.null_count == n:
        return _NULL_PIECE
    values = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    if arr.null_count == 0:
        cells = np.zeros((n, 9), np.uint8)
        cells[:, 1:] = values.astype("<i8").view(np.uint8).reshape(n, 8)
        return _binary(n, np.arange(0, 9 * n + 1, 9, dtype=np.int32), cells)
    valid = _valid(arr)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.where(valid, 9, 1), out=offsets[1:])
    out = np.zeros(int(offsets[-1]), np.uint8)
    at = offsets[:-1]
    out[at[~valid]] = 1
    rows = at[valid]
    out[rows[:, None] + np.arange(1, 9)] = values[valid].astype("<i8").view(np.uint8).reshape(-1, 8)
    return _binary(n, offsets, out)


def _valid(arr: pa.Array) -> np.ndarray:
    return pc.is_valid(arr).to_numpy(zero_copy_only=False)


def _binary(n: int, offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(data)])


def _length_prefixes(lengths: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """Per value: the indicator byte (0) and the length-encoded length (1, 3, 4 or 9 bytes:
    below 251 one byte; else 0xFC, 0xFD or 0xFE and 2, 3 or 8 bytes little-endian); where
    ``valid`` is False, the NULL indicator byte alone."""
    n = len(lengths)
    if valid is None and (n == 0 or int(lengths.max()) < 251):
        out = np.zeros(2 * n, np.uint8)  # the common case: every value shorter than 251 bytes
        out[1::2] = lengths
        return _binary(n, np.arange(0, 2 * n + 1, 2, dtype=np.int64), out)
    size = 1 + 2 * (lengths >= 251) + (lengths >= 1 << 16) + 5 * (lengths >= 1 << 24)
    if valid is not None:
        size = np.where(valid, size, 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(size + 1, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), np.uint8)
    if valid is not None:
        out[offsets[:-1][~valid]] = 1
    at = offsets[:-1] + 1  # after the indicator byte
    small = size == 1
    out[at[small]] = lengths[small]
    for width, mark in ((3, 0xFC), (4, 0xFD), (9, 0xFE)):
        rows = np.flatnonzero(size == width)
        if len(rows):
            where, length = at[rows], lengths[rows]
            out[where] = mark
            for k in range(width - 1):
                out[where + 1 + k] = (length >> (8 * k)) & 0xFF
    return _binary(n, offsets, out)


def _text_pieces(arr: pa.Array) -> list[pa.Array | pa.Scalar]:
    """A text column's two pieces: each value's prefix (NULL: the NULL byte) and its bytes
    (a column of NULLs: the NULL byte as one scalar piece)."""
    if arr.null_count == len(arr):
        return [_NULL_PIECE]
    text = arr.cast(pa.string()).cast(pa.binary())
    lengths = pc.fill_null(pc.binary_length(text), 0).to_numpy(zero_copy_only=False)
    valid = _valid(text) if text.null_count else None
    return [_length_prefixes(lengths.astype(np.int64), valid), text]


def param_types(names: list[str]) -> bytes:
    """The types the command declares, a (type, flags) pair per column in order."""
    return b"".join(bytes([_LONGLONG if n in INT_COLUMNS else _STRING, 0]) for n in names)


def bulk_rows(batch: pa.RecordBatch) -> pa.Array:
    """Pure: each row's parameters in the bulk command's wire form, one binary value a row
    (columns in the batch's order; gold's integer columns as LONGLONG, the rest as text)."""
    pieces: list[pa.Array] = []
    for name, arr in zip(batch.schema.names, batch.columns):
        if name in INT_COLUMNS:
            pieces.append(_int_values(arr))
        else:
            pieces += _text_pieces(arr)
    return pc.binary_join_element_wise(*pieces, b"", null_handling="replace",
                                       null_replacement=b"")


def command_parts(stmt_id: int, batch: pa.RecordBatch, max_bytes: int | None = None
                  ) -> Iterator[tuple[bytes, pa.Buffer]]:
    """Pure: the bulk commands writing ``batch``, each as its head and its rows' bytes (the
    payload without the command byte), each at most ``max_bytes`` (a row longer alone)."""
    if batch.num_rows == 0:
        return
    head = struct.pack("<IH", stmt_id, _SEND_TYPES) + param_types(batch.schema.names)
    limit = None if max_bytes is None else max(max_bytes - len(head) - 1, 1)
    for rows in byte_slices(bulk_rows(batch), limit):
        yield head, concat_body(rows)


class BulkInsert:
    """One INSERT prepared on a connection that negotiated bulk operations; :meth:`write`
    sends a batch's rows with it and returns the rows the server reports affected."""

    def __init__(self, conn, sql: str, params: int) -> None:
        self.conn = conn
        self.stmt_id, count = prepare_statement(conn, sql)
        if count != params:
            raise ValueError(f"prepared INSERT takes {count} parameters, expected {params}")

    def write(self, batch: pa.RecordBatch, max_bytes: int | None = None) -> int:
        affected = 0
        for head, rows in command_parts(self.stmt_id, batch, max_bytes):
            send_command(self.conn, COM_STMT_BULK_EXECUTE, head, memoryview(rows))
            affected += read_ok(self.conn)
        return affected
