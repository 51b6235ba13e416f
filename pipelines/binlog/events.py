"""Event type codes, event objects, and decoders for the events that are not row data.

Type codes: MySQL ``libbinlogevents/include/binlog_event.h`` (``Log_event_type``) and
MariaDB ``sql/log_event.h`` (160+). Each ``decode_*`` function takes the event header, its
body with the checksum trailer already removed, and the current FORMAT_DESCRIPTION, and
returns an event object. Row events and TABLE_MAP live in ``rows.py`` and ``table_map.py``.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.binlog.framing import EventHeader
from pipelines.binlog.packed_ints import read_packed_int, read_varlen_uint
from pipelines.errors import DecodeError, TruncatedError

if TYPE_CHECKING:
    from pipelines.binlog.table_map import TableMap

__all__ = [
    "EventType", "Event", "FormatDescription", "Query", "Xid", "Rotate", "Stop", "Gtid",
    "PreviousGtids", "GtidList", "BinlogCheckpoint", "RowsQuery", "Incident", "Unknown",
    "RowsEvent", "TransactionPayload", "decode_format_description", "SIMPLE_DECODERS",
    "maria_uncompress",
]


class EventType:
    """Binlog event type codes (MySQL 0–42, MariaDB 160–171; 100 is Aurora's padding)."""

    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS = 30
    UPDATE_ROWS = 31
    DELETE_ROWS = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    GTID_TAGGED = 42
    AURORA_PADDING = 100  # Amazon Aurora MySQL 5.7: non-standard filler, skipped by length
    MARIA_ANNOTATE_ROWS = 160
    MARIA_BINLOG_CHECKPOINT = 161
    MARIA_GTID = 162
    MARIA_GTID_LIST = 163
    MARIA_START_ENCRYPTION = 164
    MARIA_QUERY_COMPRESSED = 165
    MARIA_WRITE_ROWS_COMPRESSED_V1 = 166
    MARIA_UPDATE_ROWS_COMPRESSED_V1 = 167
    MARIA_DELETE_ROWS_COMPRESSED_V1 = 168
    MARIA_WRITE_ROWS_COMPRESSED = 169
    MARIA_UPDATE_ROWS_COMPRESSED = 170
    MARIA_DELETE_ROWS_COMPRESSED = 171


EVENT_NAMES: dict[int, str] = {
    v: k for k, v in vars(EventType).items() if k.isupper() and isinstance(v, int)
}


def event_name(code: int) -> str:
    """The event type's name, or ``TYPE_<n>`` for a code neither server defines."""
    return EVENT_NAMES.get(code, f"TYPE_{code}")


@dataclass(slots=True)
class Event:
    """Base of every decoded event; ``header.pos`` is its start offset in its file."""

    header: EventHeader

    @property
    def name(self) -> str:
        return event_name(self.header.type_code)


@dataclass(slots=True)
class FormatDescription(Event):
    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_lengths: bytes
    checksum_alg: int  # 0 = NONE, 1 = CRC32, 255 = undefined (pre-checksum server)

    @property
    def has_crc32(self) -> bool:
        return self.checksum_alg == 1

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()

    def post_header_len(self, type_code: int) -> int:
        """Post-header length of an event type as this FORMAT_DESCRIPTION declares it."""
        idx = type_code - 1
        if 0 <= idx < len(self.post_header_lengths):
            return self.post_header_lengths[idx]
        return 0


@dataclass(slots=True)
class Query(Event):
    thread_id: int
    exec_time: int
    error_code: int
    schema: str
    query: bytes


@dataclass(slots=True)
class Xid(Event):
    xid: int


@dataclass(slots=True)
class Rotate(Event):
    position: int
    next_file: str


@dataclass(slots=True)
class Stop(Event):
    pass


@dataclass(slots=True)
class Gtid(Event):
    """A transaction's GTID: MySQL ``uuid:gno`` (anonymous: ``None``) or MariaDB ``d-s-n``."""

    gtid: str | None
    standalone: bool = False  # MariaDB: no BEGIN/COMMIT follow (DDL)
    commit_id: int | None = None
    # MySQL 8.0.1+: immediate_commit_timestamp, microseconds since the epoch (dbtrail's
    # commit_ts_us); None for MariaDB, older MySQL and a zero stamp.
    commit_ts_us: int | None = None


@dataclass(slots=True)
class PreviousGtids(Event):
    gtid_set: str


@dataclass(slots=True)
class GtidList(Event):
    gtid_list: str


@dataclass(slots=True)
class BinlogCheckpoint(Event):
    binlog_file: str


@dataclass(slots=True)
class RowsQuery(Event):
    """MySQL ROWS_QUERY or MariaDB ANNOTATE_ROWS: the statement behind the next row events."""

    query: bytes


@dataclass(slots=True)
class Incident(Event):
    incident: int
    message: str


@dataclass(slots=True)
class Unknown(Event):
    """An event binlake does not interpret; kept with its raw bytes and skipped by length."""

    raw: bytes


@dataclass(slots=True)
class TransactionPayload(Event):
    """MySQL 8.0.20+ TRANSACTION_PAYLOAD: a whole transaction's events, compressed.

    ``compression`` is 0 for ZSTD and 255 for NONE; ``payload`` the compressed bytes. The
    reader decodes the inner events right after yielding this event (``payload.py``).
    """

    compression: int
    uncompressed_size: int
    payload: bytes = field(repr=False)


@dataclass(slots=True)
class RowsEvent(Event):
    """A WRITE/UPDATE/DELETE rows event, decoded.

    ``rows`` holds (before, after) pairs of positional images (``None`` for the absent side).
    ``present_before``/``present_after`` are the columns-present bitmaps as lists of bool, or
    ``None`` when every column is present (FULL row image).

    ``row_base`` is the index of this event's first row among the rows sharing its position:
    0 for a rows event of its own; inside a TRANSACTION_PAYLOAD every inner event carries the
    payload event's position, so the inner rows events number their rows on from the earlier
    ones (``row_in_event = row_base + index``) and stay unique per position.

    ``partial_json_flags`` (PARTIAL_UPDATE_ROWS only, else ``None``): one tuple per row of the
    column indexes whose after-image JSON could not be rebuilt from the logged diff (the
    before image lacks the column, or the diff does not apply). Those after values are
    ``None`` meaning *unknown*, not SQL NULL; an empty tuple means the row is complete.
    """

    kind: str  # INSERT | UPDATE | DELETE
    table_id: int
    flags: int
    table: "TableMap"
    rows: list[tuple[list | None, list | None]] = field(default_factory=list)
    present_before: list[bool] | None = None
    present_after: list[bool] | None = None
    row_base: int = 0
    partial_json_flags: list[tuple[int, ...]] | None = None
    pending: "PendingRows | None" = None  # rows left undecoded (decode_rows(columnar=True))


@dataclass(slots=True)
class PendingRows:
    """The undecoded rows of a :class:`RowsEvent`: ``body[pos:]`` (inflated when the event
    was compressed), its type code, and the first bytes of the event body as logged (the
    preview an error shows)."""

    type_code: int
    body: bytes
    pos: int
    preview: bytes


_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def maria_uncompress(buf: bytes, pos: int) -> bytes:
    """Inflate a MariaDB compressed block (``binlog_buf_uncompress``, sql/log_event.cc).

    One header byte (``0x80`` set, algorithm in bits 4–6: 0 = zlib, the size of the length
    field in bits 0–2), that many bytes of uncompressed length (big-endian), then a zlib
    stream. Raises :class:`DecodeError` when the block is malformed or does not inflate to
    its stated length.
    """
    import zlib

    if pos >= len(buf):
        raise TruncatedError("compressed block header runs past the event end")
    head = buf[pos]
    nlen = head & 0x07
    if not head & 0x80 or (head >> 4) & 0x07 or not 1 <= nlen <= 4:
        raise DecodeError(f"bad MariaDB compression header byte {head:#04x}",
                          preview=buf[pos:pos + 16])
    start = pos + 1 + nlen
    if start > len(buf):
        raise TruncatedError("compressed block length runs past the event end")
    size = int.from_bytes(buf[pos + 1:start], "big")
    try:
        d = zlib.decompressobj()
        out = d.decompress(buf[start:], size + 1)
    except zlib.error as exc:
        raise DecodeError(f"compressed block does not inflate: {exc}",
                          preview=buf[start:start + 16]) from None
    if len(out) != size or not d.eof:
        raise DecodeError(f"compressed block inflates to {len(out)} bytes, header says {size}",
                          preview=buf[start:start + 16])
    return out


def _version_tuple(version: str) -> tuple[int, int, int]:
    digits = []
    for part in version.split("-")[0].split(".")[:3]:
        num = "".join(ch for ch in part if ch.isdigit())
        digits.append(int(num) if num else 0)
    while len(digits) < 3:
        digits.append(0)
    return digits[0], digits[1], digits[2]


def decode_format_description(header: EventHeader, body: bytes) -> FormatDescription:
    """Decode a FORMAT_DESCRIPTION (v4) from its full body (checksum trailer included).

    Servers from MySQL 5.6.1 and MariaDB 5.3 on end the event with a checksum-algorithm byte
    and a 4-byte trailer (present even when the algorithm is NONE); older ones have neither.
    """
    if len(body) < 57:
        raise TruncatedError("FORMAT_DESCRIPTION shorter than its fixed part", pos=header.pos,
                             event_type=header.type_code, preview=body)
    binlog_version = body[0] | body[1] << 8
    server_version = body[2:52].split(b"\x00", 1)[0].decode("ascii", "replace")
    create_ts = _U32.unpack_from(body, 52)[0]
    header_length = body[56]
    rest = body[57:]
    is_maria = "mariadb" in server_version.lower()
    major = _version_tuple(server_version)
    has_alg = major >= (5, 6, 1) or (is_maria and major >= (5, 3, 0))
    if has_alg and len(rest) >= 5:
        checksum_alg = rest[-5]
        post = rest[:-5]
    else:
        checksum_alg = 255
        post = rest
    return FormatDescription(header, binlog_version, server_version, create_ts, header_length,
                             bytes(post), checksum_alg)


def decode_query(header: EventHeader, body: bytes, fde: FormatDescription) -> Query:
    """QUERY: thread id, exec time, schema, error code, status vars, then the statement.

    MariaDB's QUERY_COMPRESSED (165) has the same layout with the statement compressed
    (:func:`maria_uncompress`).
    """
    thread_id, exec_time, db_len, error_code = struct.unpack_from("<IIBH", body, 0)
    post = fde.post_header_len(header.type_code) or fde.post_header_len(EventType.QUERY) or 13
    status_len = body[11] | body[12] << 8 if post >= 13 else 0
    pos = post + status_len
    if pos + db_len + 1 > len(body):
        raise TruncatedError(f"QUERY status block ({status_len} bytes) and schema "
                             f"({db_len} bytes) run past the event end")
    schema = body[pos:pos + db_len].decode("utf-8", "replace")
    if header.type_code == EventType.MARIA_QUERY_COMPRESSED:
        query = maria_uncompress(body, pos + db_len + 1)
    else:
        query = body[pos + db_len + 1:]
    return Query(header, thread_id, exec_time, error_code, schema, bytes(query))


def decode_xid(header: EventHeader, body: bytes, fde: FormatDescription) -> Xid:
    return Xid(header, _U64.unpack_from(body, 0)[0])


def decode_rotate(header: EventHeader, body: bytes, fde: FormatDescription) -> Rotate:
    post = fde.post_header_len(EventType.ROTATE) if fde.binlog_version > 1 else 0
    position = _U64.unpack_from(body, 0)[0] if post >= 8 else 4
    return Rotate(header, position, body[post:].decode("utf-8", "replace"))


def decode_stop(header: EventHeader, body: bytes, fde: FormatDescription) -> Stop:
    return Stop(header)


def _uuid(raw: bytes) -> str:
    return str(uuid.UUID(bytes=bytes(raw)))


_COMMIT_TS_AT = 42  # flags 1 + sid 16 + gno 8 + clock type 1 + last_committed 8 + seq 8
_ORIGINAL_FOLLOWS = 1 << 55


def _commit_ts(body: bytes) -> int | None:
    """immediate_commit_timestamp (MySQL 8.0.1+, ``Gtid_event``): 7 bytes little-endian after
    the logical clock; bit 55 set means original_commit_timestamp (7 bytes) follows, else
    the original equals it. Absent (older servers) or zero: None."""
    if len(body) < _COMMIT_TS_AT + 7 or body[25] != 2:
        return None
    value = int.from_bytes(body[_COMMIT_TS_AT:_COMMIT_TS_AT + 7], "little") & ~_ORIGINAL_FOLLOWS
    return value or None


def decode_mysql_gtid(header: EventHeader, body: bytes, fde: FormatDescription) -> Gtid:
    """MySQL GTID / ANONYMOUS_GTID: flags u8, source uuid (16), gno i64, logical clock
    (type 2, last_committed, sequence_number), then the commit timestamps (8.0.1+)."""
    gno = struct.unpack_from("<q", body, 17)[0]
    if header.type_code == EventType.ANONYMOUS_GTID:
        return Gtid(header, None, commit_ts_us=_commit_ts(body))
    return Gtid(header, f"{_uuid(body[1:17])}:{gno}", commit_ts_us=_commit_ts(body))


_TAGGED_GTID_FIELDS = {0: "flags", 1: "sid", 2: "gno", 3: "tag"}


def decode_gtid_tagged(header: EventHeader, body: bytes, fde: FormatDescription) -> Gtid:
    """MySQL 8.4+ GTID_TAGGED_LOG_EVENT (42): ``uuid:tag:gno``.

    Serialization-library message (mysql-server ``libs/mysql/binlog/event/control_events``):
    version byte (2), payload size (varlen, counting the whole message), last non-ignorable
    field id, then (field id, value) pairs: 0 flags, 1 sid (16 varlen bytes), 2 gno (zigzag
    signed), 3 tag (varlen length + bytes), 4 last_committed, 5 sequence_number,
    6 immediate_commit_timestamp (microseconds), 7.. original timestamp, length, versions
    (not needed: decoding stops at field 7).
    """
    if not body or body[0] != 2:
        raise DecodeError(f"GTID_TAGGED serialization version {body[:1].hex() or 'missing'} "
                          "is not 2", preview=body[:32])
    size, pos = read_varlen_uint(body, 1)
    _, pos = read_varlen_uint(body, pos)
    end = min(size, len(body))
    sid = bytearray()
    gno = None
    tag = ""
    commit_ts = None
    while pos < end:
        fid, pos = read_varlen_uint(body, pos)
        if fid in (0, 4, 5):
            _, pos = read_varlen_uint(body, pos)
        elif fid == 6:
            commit_ts, pos = read_varlen_uint(body, pos)
        elif fid == 1:
            sid.clear()
            for _ in range(16):
                b, pos = read_varlen_uint(body, pos)
                sid.append(b & 0xFF)
        elif fid == 2:
            zz, pos = read_varlen_uint(body, pos)
            gno = -(zz >> 1) - 1 if zz & 1 else zz >> 1
        elif fid == 3:
            n, pos = read_varlen_uint(body, pos)
            tag = body[pos:pos + n].decode("utf-8", "replace")
            pos += n
        else:
            break  # original timestamp, lengths, versions: not needed
    if gno is None or len(sid) != 16:
        raise DecodeError("GTID_TAGGED event without a source uuid and gno", preview=body[:32])
    return Gtid(header, f"{_uuid(bytes(sid))}:{tag}:{gno}" if tag else f"{_uuid(bytes(sid))}:{gno}",
                commit_ts_us=commit_ts or None)


def decode_previous_gtids(header: EventHeader, body: bytes, fde: FormatDescription) -> PreviousGtids:
    """PREVIOUS_GTIDS: n_sids u64, then per sid: uuid, n_intervals u64, [start, end) pairs.

    MySQL 8.3+ tagged format (``Gtid_set::encode``): the first and the last byte of the
    8-byte count are the format (1 = tagged) and the count sits in bytes 1–6; each uuid is
    followed by its tag (varlen length + bytes, empty for untagged GTIDs). Printed MySQL
    style: ``uuid:1-13:mytag:1-2`` (entries of one uuid grouped).
    """
    raw = _U64.unpack_from(body, 0)[0]
    tagged = raw >> 56 == 1
    n_sids = (raw >> 8) & 0xFFFFFFFFFFFF if tagged else raw
    if n_sids * 24 > len(body):
        raise TruncatedError(f"PREVIOUS_GTIDS claims {n_sids} source uuids", preview=body[:32])
    pos = 8
    parts: list[list[str]] = []
    for _ in range(n_sids):
        if pos + 16 > len(body):
            raise TruncatedError("PREVIOUS_GTIDS uuid runs past the event end")
        sid = _uuid(body[pos:pos + 16])
        pos += 16
        tag = ""
        if tagged:
            n, pos = read_varlen_uint(body, pos)
            tag = body[pos:pos + n].decode("utf-8", "replace")
            pos += n
        n_iv = _U64.unpack_from(body, pos)[0]
        pos += 8
        if n_iv * 16 > len(body) - pos:
            raise TruncatedError(f"PREVIOUS_GTIDS claims {n_iv} intervals for {sid}")
        ivs = []
        for _ in range(n_iv):
            start, end = struct.unpack_from("<qq", body, pos)
            pos += 16
            ivs.append(f"{start}" if end - 1 == start else f"{start}-{end - 1}")
        item = ([tag] if tag else []) + ivs
        if parts and parts[-1][0] == sid:
            parts[-1].extend(item)
        else:
            parts.append([sid] + item)
    return PreviousGtids(header, ",".join(":".join(p) for p in parts))


def decode_transaction_payload(header: EventHeader, body: bytes,
                               fde: FormatDescription) -> TransactionPayload:
    """TRANSACTION_PAYLOAD (40): (type, length, value) fields, each a packed int, up to the
    end mark 0; then the compressed events. Fields: 1 payload size, 2 compression type
    (0 ZSTD, 255 NONE), 3 uncompressed size (mysql-server ``Transaction_payload_event``).
    """  # noqa: D205
    # The FORMAT_DESCRIPTION declares a 40-byte post-header for this type, but the fields
    # start right after the common header (mysql-server Transaction_payload_event::decode).
    pos = 0
    size = None
    compression = 0
    uncompressed = 0
    while True:
        ftype, pos = read_packed_int(body, pos)
        if ftype == 0:
            break
        flen, pos = read_packed_int(body, pos)
        if pos + flen > len(body):
            raise TruncatedError(f"TRANSACTION_PAYLOAD field {ftype} runs past the event end")
        value, _ = read_packed_int(body[pos:pos + flen], 0) if flen else (0, 0)
        pos += flen
        if ftype == 1:
            size = value
        elif ftype == 2:
            compression = value
        elif ftype == 3:
            uncompressed = value
    payload = body[pos:]
    if size is not None and size != len(payload):
        raise DecodeError(f"TRANSACTION_PAYLOAD says {size} payload bytes, the event holds "
                          f"{len(payload)}", preview=body[:32])
    return TransactionPayload(header, compression, uncompressed, bytes(payload))


def decode_maria_gtid(header: EventHeader, body: bytes, fde: FormatDescription) -> Gtid:
    """MariaDB GTID: seq_no u64, domain_id u32, flags u8 [, commit_id u64 when FL_GROUP_COMMIT_ID]."""
    seq, domain, flags = struct.unpack_from("<QIB", body, 0)
    commit_id = _U64.unpack_from(body, 13)[0] if flags & 0x02 and len(body) >= 21 else None
    return Gtid(header, f"{domain}-{header.server_id}-{seq}", standalone=bool(flags & 0x01),
                commit_id=commit_id)


def decode_maria_gtid_list(header: EventHeader, body: bytes, fde: FormatDescription) -> GtidList:
    count = _U32.unpack_from(body, 0)[0] & 0x0FFFFFFF
    items = []
    for i in range(count):
        domain, server, seq = struct.unpack_from("<IIQ", body, 4 + 16 * i)
        items.append(f"{domain}-{server}-{seq}")
    return GtidList(header, ",".join(items))


def decode_binlog_checkpoint(header: EventHeader, body: bytes, fde: FormatDescription) -> BinlogCheckpoint:
    n = _U32.unpack_from(body, 0)[0]
    return BinlogCheckpoint(header, body[4:4 + n].decode("utf-8", "replace"))


def decode_annotate_rows(header: EventHeader, body: bytes, fde: FormatDescription) -> RowsQuery:
    return RowsQuery(header, bytes(body))


def decode_rows_query(header: EventHeader, body: bytes, fde: FormatDescription) -> RowsQuery:
    # One length byte (truncated to 255, so ignored) then the statement to the end.
    return RowsQuery(header, bytes(body[1:]))


def decode_incident(header: EventHeader, body: bytes, fde: FormatDescription) -> Incident:
    kind = body[0] | body[1] << 8
    n = body[2] if len(body) > 2 else 0
    return Incident(header, kind, body[3:3 + n].decode("utf-8", "replace"))


SIMPLE_DECODERS = {
    EventType.QUERY: decode_query,
    EventType.MARIA_QUERY_COMPRESSED: decode_query,
    EventType.GTID_TAGGED: decode_gtid_tagged,
    EventType.TRANSACTION_PAYLOAD: decode_transaction_payload,
    EventType.XID: decode_xid,
    EventType.ROTATE: decode_rotate,
    EventType.STOP: decode_stop,
    EventType.GTID: decode_mysql_gtid,
    EventType.ANONYMOUS_GTID: decode_mysql_gtid,
    EventType.PREVIOUS_GTIDS: decode_previous_gtids,
    EventType.MARIA_GTID: decode_maria_gtid,
    EventType.MARIA_GTID_LIST: decode_maria_gtid_list,
    EventType.MARIA_BINLOG_CHECKPOINT: decode_binlog_checkpoint,
    EventType.MARIA_ANNOTATE_ROWS: decode_annotate_rows,
    EventType.ROWS_QUERY: decode_rows_query,
    EventType.INCIDENT: decode_incident,
}
