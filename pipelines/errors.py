"""binlake's one exception tree.

::

    BinlakeError (Exception)
    ├── ConfigError (ValueError)          bad setting, file or flag; names the setting
    ├── DecodeError (ValueError)          a binlog byte stream could not be decoded
    │   ├── NotABinlogError               wrong magic number or binlog version
    │   ├── TruncatedError (EOFError)     the stream ends inside an event
    │   ├── ChecksumError                 CRC32 of an event does not match
    │   ├── MissingTableMapError (KeyError)
    │   │                                 a ROWS event names a table_id with no TABLE_MAP
    │   ├── ValueDecodeError              a column value does not fit its declared type
    │   └── ImageTooLargeError (MemoryError)
    │                                     an event's row images exceed what one bronze
    │                                     batch column can hold (Arrow's 32-bit offsets)
    ├── JsonDiffError (ValueError)        a MySQL partial JSON diff does not apply to its
    │                                     document (bronze keeps the diff unresolved)
    ├── SchemaMismatchError (ValueError)  a row change cannot be named/rendered with the schema
    │                                     at hand (silver quarantines it, never guesses)
    ├── EngineError (RuntimeError)        the Spark engine could not be started or reached
    ├── LeaseHeldError (RuntimeError)     another writer holds the lake stage (exit code 75)
    ├── LeaseLostError (RuntimeError)     a stalled run's lease was taken over meanwhile
    ├── LakeFaultError (RuntimeError)     a lake table's files or log are missing/damaged;
    │                                     names the table, the file and the repair
    ├── LakeChangedError (RuntimeError)   a table changed during a run beyond what the run
    │                                     planned from; nothing was written, re-run
    ├── EventIdError (ValueError)         a row change does not fit gold's event_id layout
    └── SourceError (ConnectionError)     a MySQL/MariaDB server could not be reached/used
        ├── ConnectionLost                the replication connection dropped or timed out
        └── BinlogGone                    the server cannot send from the place asked (1236)

Every :class:`DecodeError` carries the file, the event's start position, its type code and a
hex preview of the offending bytes, so a message always says where to look.

An error raised in an engine task (binlake's Python code the engine runs on the rows) reaches
the driver as the engine's own exception, with the task's traceback as text, on every engine
(``PythonException`` on Spark and on Sail): :func:`raised_in_task` gives the binlake error
back.
"""

from __future__ import annotations

import re

__all__ = [
    "BinlakeError",
    "ConfigError",
    "DecodeError",
    "NotABinlogError",
    "TruncatedError",
    "ChecksumError",
    "MissingTableMapError",
    "ValueDecodeError",
    "ImageTooLargeError",
    "EngineError",
    "SourceError",
    "ConnectionLost",
    "BinlogGone",
    "JsonDiffError",
    "SchemaMismatchError",
    "EventIdError",
    "LeaseHeldError",
    "LeaseLostError",
    "LakeFaultError",
    "LakeChangedError",
    "raised_in_task",
    "EXIT_CONFIG",
    "EXIT_BUSY",
]

EXIT_CONFIG = 2  # a ConfigError: the command line, the conf file or the environment
EXIT_BUSY = 75  # EX_TEMPFAIL: a LeaseHeldError, another writer holds the stage; try later


class BinlakeError(Exception):
    """Base of every error binlake raises on purpose."""


class ConfigError(BinlakeError, ValueError):
    """A configuration value, file or command-line flag is invalid; the message names it."""


class SchemaMismatchError(BinlakeError, ValueError):
    """A row change's values do not fit the schema chosen for it (count, ENUM index, charset).

    Silver sends such rows to quarantine with this message as the reason.
    """


class EventIdError(BinlakeError, ValueError):
    """A row change's source, file number, position or row index does not fit gold's
    ``event_id`` layout (``pipelines/gold/event_ids.py``); the export stops, nothing is
    renumbered or skipped."""


class EngineError(BinlakeError, RuntimeError):
    """The Spark engine (Sail, Spark Connect or local Spark) could not be started or used."""


class LeaseHeldError(BinlakeError, RuntimeError):
    """Another process holds the lake stage (or the gold database) beyond ``--wait``.

    ``holder`` is the :class:`pipelines.lake.lease.Holder` when the lake lease says who it is.
    """

    def __init__(self, message: str, *, holder: object | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class LeaseLostError(BinlakeError, RuntimeError):
    """This run stalled past its lease's expiry and another writer took the stage over."""


class LakeFaultError(BinlakeError, RuntimeError):
    """A lake table cannot be read as it should: a data file missing or truncated, a
    ``_delta_log`` commit torn. The message names the table, the file and the repair."""


class LakeChangedError(BinlakeError, RuntimeError):
    """A table changed during a run in a way the run cannot take in (what it planned from no
    longer holds). Nothing inconsistent was written: re-running picks the change up."""


class SourceError(BinlakeError, ConnectionError):
    """A MySQL/MariaDB server could not be reached or refused what binlake needs."""


class JsonDiffError(BinlakeError, ValueError):
    """A partial JSON diff does not apply to the document (a path missing, a wrong
    container): the row keeps the diff as logged (``binlog/json_diff.py``)."""


class ConnectionLost(SourceError):
    """The replication connection dropped or timed out; reconnecting may help."""


class BinlogGone(SourceError):
    """The server cannot send from the requested place (error 1236: purged, unknown file)."""


class DecodeError(BinlakeError, ValueError):
    """Bytes that are not a valid binlog at a known place.

    ``file`` and ``pos`` locate the event (its header start), ``event_type`` is the header's
    type code when known, ``preview`` up to 32 bytes around the problem.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        pos: int | None = None,
        event_type: int | None = None,
        preview: bytes = b"",
    ) -> None:
        self.reason = message
        self.file = file
        self.pos = pos
        self.event_type = event_type
        self.preview = bytes(preview[:32])
        super().__init__(self._render())

    def located(self, *, file: str | None = None, pos: int | None = None,
                event_type: int | None = None, preview: bytes | None = None) -> "DecodeError":
        """Fill in location fields that are still unknown and return self (for re-raising)."""
        if self.file is None:
            self.file = file
        if self.pos is None:
            self.pos = pos
        if self.event_type is None:
            self.event_type = event_type
        if not self.preview and preview:
            self.preview = bytes(preview[:32])
        self.args = (self._render(),)
        return self

    def _render(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.pos is not None:
            where.append(f"pos {self.pos}")
        if self.event_type is not None:
            where.append(f"event type {self.event_type}")
        text = f"{', '.join(where)}: {self.reason}" if where else self.reason
        if self.preview:
            text += f" [bytes: {self.preview.hex(' ')}]"
        return text

    def __str__(self) -> str:
        return self._render()


class NotABinlogError(DecodeError):
    """The file does not start with the binlog magic ``\\xfebin`` or is not binlog v4."""


class TruncatedError(DecodeError, EOFError):
    """The byte stream ends in the middle of an event (or of a value inside it)."""


class ChecksumError(DecodeError):
    """An event's CRC32 trailer does not match its bytes."""


class MissingTableMapError(DecodeError, KeyError):
    """A ROWS event refers to a table_id that no preceding TABLE_MAP defined."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return self._render()


class ValueDecodeError(DecodeError):
    """A column value's bytes do not fit the column's type and metadata."""


class ImageTooLargeError(DecodeError, MemoryError):
    """Decoding an event would need a bronze image column of an impossible size: more than
    2**31 - 1 values or data bytes, the most Arrow's 32-bit offsets address. Raised before
    anything is allocated, located at the event."""


# The last line of a Python traceback the engine returns: "pipelines.errors.<Class>: <message>".
_TASK_ERROR = re.compile(r"^pipelines\.errors\.([A-Za-z]+): (.+)$", re.MULTILINE)


def raised_in_task(exc: BaseException) -> BinlakeError | None:
    """The binlake error an engine task raised, rebuilt from the engine's exception ``exc``
    (its text holds the task's traceback), or None when a task raised no binlake error.
    Only errors made from their message alone come back (not a :class:`DecodeError`, whose
    fields the text does not carry); the innermost one when there are several."""
    found = _TASK_ERROR.findall(str(exc))
    if not found:
        return None
    name, message = found[-1]
    cls = globals().get(name)
    if not (isinstance(cls, type) and issubclass(cls, BinlakeError)) or \
            issubclass(cls, DecodeError):
        return None
    return cls(message.strip())
