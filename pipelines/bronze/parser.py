"""The binlog parser: one object turns framed events into decoded events.

State is small and explicit (go-mysql's ``BinlogParser``): the current FORMAT_DESCRIPTION and
the ``table_id → TableMap`` map. The file reader (``reader.py``) and the replica stream feed
the same parser. Dispatch is by type code through dicts; an event type binlake does not know
becomes an :class:`Unknown` event (skipped by its length, with a warning), never a crash.
"""

from __future__ import annotations

import enum
import struct
import logging
import warnings

from pipelines.bronze import events as ev
from pipelines.bronze.events import EventType as E
from pipelines.bronze.framing import RawEvent, check_crc
from pipelines.bronze.rows import ROWS_KINDS, decode_rows
from pipelines.bronze.table_map import TableMap, decode_table_map
from pipelines.errors import DecodeError, NotABinlogError

__all__ = ["BinlogParser", "ChecksumPolicy"]

log = logging.getLogger(__name__)

# Events that carry nothing bronze needs; decoded as Unknown without a warning.
_QUIET = frozenset({
    E.INTVAR, E.RAND, E.USER_VAR, E.HEARTBEAT, E.HEARTBEAT_V2, E.IGNORABLE,
    E.TRANSACTION_CONTEXT, E.VIEW_CHANGE, E.XA_PREPARE, E.BEGIN_LOAD_QUERY,
    E.EXECUTE_LOAD_QUERY, E.MARIA_START_ENCRYPTION,
})


class ChecksumPolicy(enum.Enum):
    """What to do when an event's CRC32 does not match: stop with an error, warn, or ignore."""

    RAISE = "raise"
    WARN = "warn"
    IGNORE = "ignore"


class BinlogParser:
    """Decodes framed events of one binlog stream in order.

    ``file`` names the stream in error messages. Raises :class:`DecodeError` subclasses that
    carry the file, the event's position and type, and a hex preview.
    """

    def __init__(self, *, file: str = "<stream>",
                 checksum: ChecksumPolicy = ChecksumPolicy.RAISE) -> None:
        self.file = file
        self.checksum = checksum
        self.fde: ev.FormatDescription | None = None
        self.table_maps: dict[int, TableMap] = {}
        self.unknown_types: dict[int, int] = {}

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

    def _parse(self, raw: RawEvent) -> ev.Event | None:
        h = raw.header
        code = h.type_code
        if code == E.FORMAT_DESCRIPTION:
            fde = ev.decode_format_description(h, raw.body)
            if fde.binlog_version != 4:
                raise NotABinlogError(f"binlog version {fde.binlog_version} is not supported "
                                      "(only v4, MySQL 5.0+ / MariaDB)")
            if fde.has_crc32 and self.checksum is not ChecksumPolicy.IGNORE:
                self._check(raw)
            self.fde = fde
            self.table_maps.clear()
            return fde
        if code == E.START_V3:
            raise NotABinlogError("binlog version 1/3 (MySQL 3.23–4.x) is not supported")
        fde = self.fde
        if fde is None:
            raise DecodeError("event before any FORMAT_DESCRIPTION")
        body = raw.body
        if fde.has_crc32:
            if self.checksum is not ChecksumPolicy.IGNORE:
                self._check(raw)
            body = body[:-4]
        if code in ROWS_KINDS:
            return decode_rows(h, body, fde.post_header_len(code), self.table_maps)
        if code == E.TABLE_MAP:
            tm = decode_table_map(h, body, fde.post_header_len(E.TABLE_MAP))
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

    def _check(self, raw: RawEvent) -> None:
        try:
            check_crc(raw, self.file)
        except DecodeError:
            if self.checksum is ChecksumPolicy.RAISE:
                raise
            warnings.warn(f"{self.file}: pos {raw.header.pos}: CRC32 mismatch", stacklevel=3)
