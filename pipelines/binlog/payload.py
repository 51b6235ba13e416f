"""The events inside a MySQL 8.0.20+ TRANSACTION_PAYLOAD (``binlog_transaction_compression``).

The payload is a zstd frame (or, with compression type NONE, plain bytes) holding the
transaction's events back to back, each with its own 19-byte v4 header and **no** checksum
trailer (mysql-server ``Transaction_payload_event``, ``binlog::Decompressing_event_object_istream``).
They are decoded with the same parser state as the outer events (TABLE_MAPs defined inside
are in force for the rows events after them, inside and outside).

Positions: an inner event does not exist at any offset of the file, so bronze gives every
inner event the TRANSACTION_PAYLOAD event's own header position, length and next position
(``start_pos``/``end_pos`` of its rows are those of the payload event; resuming at
``end_pos`` skips the whole transaction). Timestamp, server id, type and flags are the inner
header's. Rows of several inner rows events stay distinct through ``RowsEvent.row_base``
(rows are numbered on across the payload). Memory is bounded by the largest inner event:
the frame is decompressed as a stream.
"""

from __future__ import annotations

import io
from typing import Iterator

from pipelines.binlog.events import TransactionPayload
from pipelines.binlog.framing import EVENT_HEADER, HEADER_SIZE, EventHeader, RawEvent
from pipelines.errors import DecodeError, TruncatedError

__all__ = ["iter_payload_events", "ZSTD", "NONE"]

ZSTD = 0
NONE = 255
_MAX_INNER = 1 << 30


def _stream(event: TransactionPayload) -> io.RawIOBase | io.BufferedIOBase:
    if event.compression == NONE:
        return io.BytesIO(event.payload)
    if event.compression != ZSTD:
        raise DecodeError(f"TRANSACTION_PAYLOAD compression type {event.compression} is not "
                          "ZSTD (0) or NONE (255)")
    try:
        import zstandard
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise DecodeError("TRANSACTION_PAYLOAD needs the zstandard package") from exc
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(event.payload),
                                                      read_across_frames=True)


def _read(stream, n: int) -> bytes:
    chunks = []
    got = 0
    while got < n:
        part = stream.read(n - got)
        if not part:
            break
        chunks.append(part)
        got += len(part)
    return b"".join(chunks)


def iter_payload_events(event: TransactionPayload) -> Iterator[tuple[int, RawEvent]]:
    """Yield ``(offset inside the payload, RawEvent)`` for each inner event, in order.

    Inner headers are rewritten to carry the payload event's position, length and next
    position (see the module docstring). Raises :class:`DecodeError` (with the offset in
    its reason; the parser adds file and position) for a payload that does not decompress
    or whose inner events do not tile it exactly.
    """
    outer = event.header
    try:
        stream = _stream(event)
        offset = 0
        while True:
            head = _read(stream, HEADER_SIZE)
            if not head:
                break
            if len(head) < HEADER_SIZE:
                raise TruncatedError(f"TRANSACTION_PAYLOAD ends inside an inner event header "
                                     f"at payload offset {offset}", preview=head)
            ts, code, server_id, length, _next, flags = EVENT_HEADER.unpack(head)
            limit = event.uncompressed_size - offset if event.uncompressed_size else _MAX_INNER
            if length < HEADER_SIZE or length > limit:
                raise DecodeError(f"TRANSACTION_PAYLOAD inner event at payload offset {offset} "
                                  f"has impossible length {length}", preview=head)
            body = _read(stream, length - HEADER_SIZE)
            if len(body) < length - HEADER_SIZE:
                raise TruncatedError(f"TRANSACTION_PAYLOAD ends inside the inner event at "
                                     f"payload offset {offset}", preview=head)
            hdr = EventHeader(ts, code, server_id, outer.event_length, outer.next_pos, flags,
                              outer.pos)
            yield offset, RawEvent(hdr, body)
            offset += length
    except DecodeError:
        raise
    except Exception as exc:  # zstandard.ZstdError and friends
        raise DecodeError(f"TRANSACTION_PAYLOAD does not decompress: {exc}",
                          preview=event.payload[:32]) from exc
    if event.uncompressed_size and offset != event.uncompressed_size:
        raise DecodeError(f"TRANSACTION_PAYLOAD inflates to {offset} bytes, its header says "
                          f"{event.uncompressed_size}")
