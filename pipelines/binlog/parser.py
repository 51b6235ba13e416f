"""The binlog parser: one object turns framed events into decoded events.

State is small and explicit (go-mysql's ``BinlogParser``): the current FORMAT_DESCRIPTION and
the ``table_id → TableMap`` map. The file reader (``reader.py``) and the replica stream feed
the same parser. Dispatch is by type code through dicts; an event type binlake does not know
becomes an :class:`Unknown` event (skipped by its length, with a warning), never a crash.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import struct
import warnings
from typing import Iterator

from pipelines.binlog import events as ev
from pipelines.binlog.events import EventType as E
from pipelines.binlog.framing import RawEvent, check_crc
from pipelines.binlog.payload import iter_payload_events
from pipelines.binlog.rows import ROWS_KINDS, decode_rows
from pipelines.binlog.table_map import TableMap, decode_table_map
from pipelines.errors import DecodeError, NotABinlogError

__all__ = ["BinlogParser", "ChecksumPolicy"]

log = logging.getLogger(__name__)

# Events that carry nothing bronze needs; decoded as Unknown without a warning.
_QUIET = frozenset({
    E.INTVAR, E.RAND, E.USER_VAR, E.HEARTBEAT, E.HEARTBEAT_V2, E.IGNORABLE,
    E.TRANSACTION_CONTEXT, E.VIEW_CHANGE, E.XA_PREPARE, E.BEGIN_LOAD_QUERY,
    E.EXECUTE_LOAD_QUERY, E.MARIA_START_ENCRYPTION, E.LOAD, E.SLAVE, E.CREATE_FILE,
    E.APPEND_BLOCK, E.EXEC_LOAD, E.DELETE_FILE, E.NEW_LOAD, E.AURORA_PADDING,
})

# Distinct TABLE_MAP contents remembered for reuse (cleared when full).
_TM_CACHE_MAX = 512

# Development trees 5.1.1–5.1.5 "-a_drop5*", 5.1.4 "-a_drop6*" and 5.2.0–5.2.2 "-a_drop6*"
# numbered events 16–22 differently (mysql-server Format_description_event constructor,
# ``event_type_permutation``): their code → today's code.
_A_DROP_PERMUTATION = {
    16: E.TABLE_MAP, 17: E.PRE_GA_WRITE_ROWS, 18: E.PRE_GA_UPDATE_ROWS,
    19: E.PRE_GA_DELETE_ROWS, 20: E.XID, 21: E.BEGIN_LOAD_QUERY, 22: E.EXECUTE_LOAD_QUERY,
}


def _needs_permutation(version: str) -> bool:
    v = version
    if len(v) < 13 or v[0] != "5" or v[1] != "." or v[3] != "." or v[5:12] != "-a_drop":
        return False
    return ((v[2] == "1" and "1" <= v[4] <= "5" and v[12] == "5")
            or (v[2] == "1" and v[4] == "4" and v[12] == "6")
            or (v[2] == "2" and "0" <= v[4] <= "2" and v[12] == "6"))


def _permuted(fde: ev.FormatDescription) -> ev.FormatDescription:
    """The FORMAT_DESCRIPTION with post-header lengths indexed by today's type codes."""
    post = bytearray(fde.post_header_lengths)
    old = bytes(post)
    for was, now in _A_DROP_PERMUTATION.items():
        if was - 1 < len(old) and now - 1 < len(post):
            post[now - 1] = old[was - 1]
    return dataclasses.replace(fde, post_header_lengths=bytes(post))


class ChecksumPolicy(enum.Enum):
    """What to do when an event's CRC32 does not match: stop with an error, warn, or ignore."""

    RAISE = "raise"
    WARN = "warn"
    IGNORE = "ignore"


class BinlogParser:
    """Decodes framed events of one binlog stream in order.

    ``file`` names the stream in error messages. Raises :class:`DecodeError` subclasses that
    carry the file, the event's position and type, and a hex preview. ``columnar``: rows
    events (outside TRANSACTION_PAYLOADs) leave their rows for the bronze batcher to decode
    into Arrow buffers (``rows.decode_rows``); for a consumer that is such a batcher only.
    """

    def __init__(self, *, file: str = "<stream>",
                 checksum: ChecksumPolicy = ChecksumPolicy.RAISE, columnar: bool = False) -> None:
        self.file = file
        self.checksum = checksum
        self.columnar = columnar
        self.fde: ev.FormatDescription | None = None
        self.table_maps: dict[int, TableMap] = {}
        self.unknown_types: dict[int, int] = {}
        self.permutation: dict[int, int] | None = None
        self._tm_by_content: dict[tuple[int, bytes], TableMap] = {}

    def parse(self, raw: RawEvent) -> ev.Event | None:
        """Decode one framed event; ``None`` for events that carry nothing (dummy rows)."""
        h = raw.header
        try:
            return self._parse(raw)
        except DecodeError as exc:
            raise exc.located(file=self.file, pos=h.pos, event_type=h.type_code,
                              preview=raw.body[:32])
        except (IndexError, ValueError, struct.error) as exc:
            raise DecodeError(f"malformed {ev.event_name(h.type_code)} event: {exc}",
                              file=self.file, pos=h.pos, event_type=h.type_code,
                              preview=raw.body[:32]) from exc

    def _parse(self, raw: RawEvent, *, inner: bool = False) -> ev.Event | None:
        h = raw.header
        code = h.type_code
        if code == E.FORMAT_DESCRIPTION and not inner:
            fde = ev.decode_format_description(h, raw.body)
            if fde.binlog_version != 4:
                raise NotABinlogError(f"binlog version {fde.binlog_version} is not supported "
                                      "(only v4, MySQL 5.0+ / MariaDB)")
            if fde.has_crc32 and self.checksum is not ChecksumPolicy.IGNORE:
                self._check(raw)
            self.permutation = None
            if _needs_permutation(fde.server_version):
                self.permutation = _A_DROP_PERMUTATION
                fde = _permuted(fde)
            self.fde = fde
            self.table_maps.clear()
            return fde
        if code == E.START_V3 and not inner:
            raise NotABinlogError("binlog version 1/3 (MySQL 3.23–4.x) is not supported")
        fde = self.fde
        if fde is None:
            raise DecodeError("event before any FORMAT_DESCRIPTION")
        body = raw.body
        if fde.has_crc32 and not inner:
            if self.checksum is not ChecksumPolicy.IGNORE:
                self._check(raw)
            body = body[:-4]
        if self.permutation is not None and code in self.permutation:
            code = self.permutation[code]
            h = dataclasses.replace(h, type_code=code)
        if code in ROWS_KINDS:
            return decode_rows(h, body, fde.post_header_len(code), self.table_maps,
                               columnar=self.columnar and not inner)
        if inner and code in (E.FORMAT_DESCRIPTION, E.TRANSACTION_PAYLOAD, E.START_V3):
            raise DecodeError(f"{ev.event_name(code)} inside a TRANSACTION_PAYLOAD")
        if code == E.TABLE_MAP:
            tm = self._table_map(h, body, fde.post_header_len(E.TABLE_MAP))
            self.table_maps[tm.table_id] = tm
            return tm
        simple = ev.SIMPLE_DECODERS.get(code)
        if simple is not None:
            return simple(h, body, fde)
        if code not in _QUIET:
            self.unknown_types[code] = self.unknown_types.get(code, 0) + 1
            if self.unknown_types[code] == 1:
                log.warning("%s: pos %d: skipping unknown event type %s (%d bytes)",
                            self.file, h.pos, ev.event_name(code), h.event_length)
        return ev.Unknown(h, bytes(body))

    def _table_map(self, h, body: bytes, post_header_len: int) -> TableMap:
        """Decode a TABLE_MAP, reusing the decoding of an earlier one of the same bytes.

        Servers re-send every table's TABLE_MAP in each transaction; one whose bytes after
        the table_id equal an earlier one's is that table map again (with this event's
        header and table_id), sharing its column lists and built row decoders.
        """
        id_len = 4 if post_header_len == 6 else 6
        mariadb = self.fde is not None and self.fde.is_mariadb
        key = (post_header_len, mariadb, body[id_len:])
        known = self._tm_by_content.get(key)
        if known is not None:
            return known.rebound(h, int.from_bytes(body[:id_len], "little"))
        tm = decode_table_map(h, body, post_header_len, mariadb)
        if len(self._tm_by_content) >= _TM_CACHE_MAX:
            self._tm_by_content.clear()
        self._tm_by_content[key] = tm
        return tm

    def payload_events(self, payload: ev.TransactionPayload) -> Iterator[ev.Event]:
        """Decode the events inside a TRANSACTION_PAYLOAD with this parser's state.

        Inner events carry the payload event's position (see ``payload.py``); rows events
        get ``row_base`` so that rows stay unique per position. Errors name the payload
        event's position and the inner event's offset inside the decompressed payload.
        """
        h = payload.header
        rows_before = 0
        try:
            for offset, raw in iter_payload_events(payload):
                try:
                    event = self._parse(raw, inner=True)
                except DecodeError as exc:
                    exc.reason = (f"inside TRANSACTION_PAYLOAD, {ev.event_name(raw.header.type_code)}"
                                  f" at payload offset {offset}: {exc.reason}")
                    raise exc.located(preview=raw.body[:32])
                except (IndexError, ValueError, struct.error) as exc:
                    raise DecodeError(
                        f"inside TRANSACTION_PAYLOAD, malformed "
                        f"{ev.event_name(raw.header.type_code)} at payload offset {offset}: {exc}",
                        preview=raw.body[:32]) from exc
                if event is None:
                    continue
                if isinstance(event, ev.RowsEvent):
                    event.row_base = rows_before
                    rows_before += len(event.rows)
                yield event
        except DecodeError as exc:
            raise exc.located(file=self.file, pos=h.pos, event_type=h.type_code)

    def _check(self, raw: RawEvent) -> None:
        try:
            check_crc(raw, self.file)
        except DecodeError:
            if self.checksum is ChecksumPolicy.RAISE:
                raise
            warnings.warn(f"{self.file}: pos {raw.header.pos}: CRC32 mismatch", stacklevel=3)
