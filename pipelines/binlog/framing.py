"""Binlog file framing: magic, the 19-byte v4 event header, and the CRC32 trailer.

A binlog file is ``\\xfebin`` followed by events. Each event starts with a v4 header
(MySQL ``libbinlogevents/include/binlog_event.h``, ``Log_event_header``)::

    timestamp u32 | type_code u8 | server_id u32 | event_length u32 | next_pos u32 | flags u16

``event_length`` covers header, body and (when the FORMAT_DESCRIPTION says CRC32) the 4-byte
checksum trailer. Files are read as a stream, one event at a time, so memory is bounded by the
largest event, never by the file.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from pipelines.errors import ChecksumError, NotABinlogError, TruncatedError

# The v4 event header every binlog event starts with, in files and on the wire (the stream's
# dump packets carry the same 19 bytes after their OK byte).
EVENT_HEADER = struct.Struct("<IBIIIH")
HEADER_SIZE = EVENT_HEADER.size  # 19

__all__ = [
    "MAGIC",
    "HEADER_SIZE",
    "EventHeader",
    "RawEvent",
    "iter_raw_events",
    "event_starts_before",
    "verify_crc32",
    "check_crc",
    "LOG_EVENT_BINLOG_IN_USE_F",
]

MAGIC = b"\xfebin"
LOG_EVENT_BINLOG_IN_USE_F = 0x1
_MAX_EVENT = 1 << 31  # a length beyond this is corruption, not a real event


@dataclass(frozen=True, slots=True)
class EventHeader:
    """The common v4 header of one event; ``pos`` is where the event starts in its file."""

    timestamp: int
    type_code: int
    server_id: int
    event_length: int
    next_pos: int
    flags: int
    pos: int


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One framed event: its header and the bytes after the header (checksum included)."""

    header: EventHeader
    body: bytes


def verify_crc32(header_bytes: bytes, body: bytes) -> bool:
    """True when the last 4 bytes of ``body`` are the CRC32 of header + the rest of body."""
    crc = zlib.crc32(body[:-4], zlib.crc32(header_bytes))
    return crc == int.from_bytes(body[-4:], "little")


def iter_raw_events(
    stream: BinaryIO, *, file: str = "<stream>", start: int = 4, allow_partial_tail: bool = False
) -> Iterator[RawEvent]:
    """Yield every complete event of a binlog byte stream, in order.

    The stream must be positioned at 0 (the magic is checked) or, with ``start > 4``, at a
    known event boundary. A stream ending inside an event raises :class:`TruncatedError` unless
    ``allow_partial_tail`` is set (a file a server is still writing): then iteration stops
    after the last complete event. Raises :class:`NotABinlogError` for a bad magic number.
    Header fields only are checked here; checksums need the FORMAT_DESCRIPTION (the parser).
    """
    if start == 4:
        magic = stream.read(4)
        if magic != MAGIC:
            raise NotABinlogError(
                "not a binlog file: expected magic fe 62 69 6e", file=file, pos=0, preview=magic
            )
    else:
        stream.seek(start, os.SEEK_SET)
    pos = start
    read = stream.read
    unpack = EVENT_HEADER.unpack
    while True:
        head = read(HEADER_SIZE)
        if not head:
            return
        if len(head) < HEADER_SIZE:
            if allow_partial_tail:
                return
            raise TruncatedError(
                f"file ends inside an event header ({len(head)} of {HEADER_SIZE} bytes)",
                file=file, pos=pos, preview=head,
            )
        ts, type_code, server_id, length, next_pos, flags = unpack(head)
        if length < HEADER_SIZE or length > _MAX_EVENT:
            raise TruncatedError(
                f"impossible event length {length}", file=file, pos=pos,
                event_type=type_code, preview=head,
            )
        body = read(length - HEADER_SIZE)
        if len(body) < length - HEADER_SIZE:
            if allow_partial_tail:
                return
            raise TruncatedError(
                f"file ends inside an event: {HEADER_SIZE + len(body)} of {length} bytes",
                file=file, pos=pos, event_type=type_code, preview=head,
            )
        yield RawEvent(EventHeader(ts, type_code, server_id, length, next_pos, flags, pos), body)
        pos += length


def event_starts_before(stream: BinaryIO, offsets: list[int]) -> list[int]:
    """For each byte offset of ``offsets`` (ascending), the position of the last event that
    starts at or before it (at least 4): where to begin framing a file from its middle.

    Reads only the headers (19 bytes, then a seek past the body), so splitting a 1 GB file
    into many chunks costs one pass over its headers instead of one pass per chunk over
    everything before the chunk. A header that cannot be read ends the walk: the remaining
    offsets get the last good position (the reader reports the damage from there).
    """
    out: list[int] = []
    pos, last = 4, 4
    read, seek, unpack = stream.read, stream.seek, EVENT_HEADER.unpack
    for target in offsets:
        while pos <= target:
            seek(pos)
            head = read(HEADER_SIZE)
            if len(head) < HEADER_SIZE:
                break
            length = unpack(head)[3]
            if length < HEADER_SIZE:
                break
            last, pos = pos, pos + length
        out.append(last)
    return out


def check_crc(raw: RawEvent, file: str) -> None:
    """Raise :class:`ChecksumError` when ``raw``'s CRC32 trailer does not match."""
    h = raw.header
    flags = h.flags
    if h.type_code == 15:
        # The server sets BINLOG_IN_USE on the FORMAT_DESCRIPTION after computing its CRC
        # (and clears it on close), so the checksum covers the flag cleared.
        flags &= ~LOG_EVENT_BINLOG_IN_USE_F
    head = EVENT_HEADER.pack(h.timestamp, h.type_code, h.server_id, h.event_length, h.next_pos,
                             flags)
    if not verify_crc32(head, raw.body):
        raise ChecksumError(
            f"CRC32 mismatch (stored {raw.body[-4:].hex()})",
            file=file, pos=h.pos, event_type=h.type_code, preview=raw.body[:32],
        )
