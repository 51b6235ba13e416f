"""Read a binlog file as decoded events, one at a time (bounded memory): from disk, or from an
object store in place (``binlog_store``: an ``s3://`` path and the ``[storage]`` settings)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator

from pipelines.binlog import store as binlog_store
from pipelines.binlog.events import Event, FormatDescription, TransactionPayload
from pipelines.binlog.framing import (LOG_EVENT_BINLOG_IN_USE_F, event_starts_before,
                                     iter_raw_events)
from pipelines.binlog.parser import BinlogParser, ChecksumPolicy
from pipelines.errors import DecodeError, TruncatedError

__all__ = ["BinlogFileReader", "chunk_start", "read_events"]

_BUFFER = 1 << 20
# Events that start a transaction: MySQL GTID / ANONYMOUS_GTID / GTID_TAGGED, MariaDB GTID.
# A chunk of a file starts at one of them, so no TABLE_MAP or transaction context is needed
# from before the chunk (servers re-send TABLE_MAPs in every transaction).
TRX_START_TYPES = frozenset({33, 34, 42, 162})
_FDE = 15


@dataclass
class BinlogFileReader:
    """Iterates one file's decoded events and remembers how far it got.

    After iteration: ``end_pos`` is the end of the last complete event, ``partial_tail`` says
    the file ended inside an event while its FORMAT_DESCRIPTION still had BINLOG_IN_USE set
    (the server is writing it: not an error, the next run continues), ``truncated`` (with
    ``cut_short``, as bronze reads; else it raises) that a file the server had closed ends
    inside an event after its FORMAT_DESCRIPTION (a copy or a disk cut short: the events
    before it are read, bronze marks the file ``partial``), ``events`` counts events
    of the file (a TRANSACTION_PAYLOAD counts as one), ``inner_events`` the events decoded
    from inside TRANSACTION_PAYLOADs; those are yielded right after their payload event.

    ``chunk``/``chunks`` split one file among several decoding tasks: chunk ``k`` holds the
    transactions whose first event (:data:`TRX_START_TYPES`) starts in the byte range
    ``[k·size/chunks, (k+1)·size/chunks)`` — chunk 0 also what precedes the first such event,
    the last chunk everything after. Events before a chunk are framed (and the
    FORMAT_DESCRIPTIONs parsed) but not decoded. A file without GTID events is not split:
    chunk 0 takes it whole. ``start_at``: a known event start at or before the chunk's byte
    range (:func:`chunk_start`); framing jumps there after the FORMAT_DESCRIPTION.
    ``columnar``: see :class:`BinlogParser` (the events are for a ``BronzeBatcher`` only).
    """

    path: str
    checksum: ChecksumPolicy = ChecksumPolicy.RAISE
    name: str = ""
    chunk: int = 0
    chunks: int = 1
    start_at: int = 4
    columnar: bool = False  # rows left for the bronze batcher to decode (BinlogParser)
    storage: object | None = None  # the [storage] settings, for an s3:// path
    end_pos: int = 4
    events: int = 0
    inner_events: int = 0
    partial_tail: bool = False
    cut_short: bool = False  # a closed file ending inside an event is partial, not an error
    truncated: str | None = None  # ... and then what framing said
    in_use: bool = False
    closed_cleanly: bool = False
    parser: BinlogParser = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.name or os.path.basename(self.path)
        self.parser = BinlogParser(file=self.name, checksum=self.checksum,
                                   columnar=self.columnar)

    def __iter__(self) -> Iterator[Event]:
        try:
            size = binlog_store.size(self.path, self.storage)
            fh = binlog_store.open_binlog(self.path, self.storage, buffering=_BUFFER,
                                          known_size=size)
        except OSError as exc:
            raise DecodeError(f"cannot read file: {exc.strerror or exc}", file=self.name,
                              pos=0) from exc
        with fh:
            parse = self.parser.parse
            raw_iter = iter_raw_events(fh, file=self.name)
            lo = hi = None
            if self.chunks > 1:
                lo = size * self.chunk // self.chunks
                hi = size * (self.chunk + 1) // self.chunks if self.chunk + 1 < self.chunks else None
            started = self.chunk == 0
            if not started and self.start_at > 4:
                first = next(raw_iter, None)  # the FORMAT_DESCRIPTION comes first
                if first is not None and first.header.type_code == _FDE:
                    self.in_use = bool(first.header.flags & LOG_EVENT_BINLOG_IN_USE_F)
                    parse(first)
                raw_iter = iter_raw_events(fh, file=self.name, start=self.start_at)
            while True:
                try:
                    raw = next(raw_iter)
                except StopIteration:
                    return
                except TruncatedError as exc:
                    if self.in_use:
                        self.partial_tail = True
                    elif self.cut_short and self.parser.fde is not None:
                        # a closed file cut short (a copy, a disk): indexed up to end_pos
                        self.truncated = str(exc)
                    else:
                        raise
                    return
                h = raw.header
                if not started:
                    if h.type_code == _FDE:
                        self.in_use = bool(h.flags & LOG_EVENT_BINLOG_IN_USE_F)
                        parse(raw)
                    if h.pos < lo or h.type_code not in TRX_START_TYPES:
                        continue
                    if hi is not None and h.pos >= hi:
                        return  # no transaction starts in this chunk's byte range
                    started = True
                elif hi is not None and h.pos >= hi and h.type_code in TRX_START_TYPES:
                    return
                event = parse(raw)
                self.events += 1
                self.end_pos = raw.header.pos + raw.header.event_length
                if isinstance(event, FormatDescription):
                    self.in_use = bool(raw.header.flags & LOG_EVENT_BINLOG_IN_USE_F)
                # A file the server closed ends with STOP or ROTATE.
                self.closed_cleanly = raw.header.type_code in (3, 4)
                if event is not None:
                    yield event
                if isinstance(event, TransactionPayload):
                    for inner in self.parser.payload_events(event):
                        self.inner_events += 1
                        yield inner


_STARTS: dict[tuple, list[int]] = {}


def chunk_start(path: str, chunk: int, chunks: int, storage: object | None = None) -> int:
    """A known event start at or before chunk ``chunk``'s byte range (``start_at``).

    One header pass per file finds them for every chunk; it is remembered (for the file's
    size and modification time) because the chunks of one file are planned in many tasks
    of one process (bronze commits every ``bronze.commit_mb``).
    """
    if chunk <= 0 or chunks <= 1:
        return 4
    if binlog_store.is_remote(path):
        size, stamp = binlog_store.size(path, storage), 0
    else:
        st = os.stat(path)
        size, stamp = st.st_size, st.st_mtime_ns
    key = (binlog_store.absolute(path), size, stamp, chunks)
    starts = _STARTS.get(key)
    if starts is None:
        with binlog_store.open_binlog(path, storage, buffering=1 << 16,
                                      known_size=size) as fh:
            starts = event_starts_before(fh, [size * k // chunks for k in range(chunks)])
        if len(_STARTS) >= 16:
            _STARTS.clear()
        _STARTS[key] = starts
    return starts[chunk]


def read_events(path: str, *, checksum: ChecksumPolicy = ChecksumPolicy.RAISE) -> Iterator[Event]:
    """Convenience: the decoded events of the binlog file at ``path``."""
    return iter(BinlogFileReader(path, checksum=checksum))
