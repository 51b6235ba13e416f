"""An independent reference reader: the row changes ``mariadb-binlog -vv`` prints.

:func:`read_row_changes` runs MariaDB's own tool::

    mariadb-binlog --no-defaults --base64-output=decode-rows -vv --print-table-metadata FILE

and parses its text into one :class:`RowChange` per row image pair, so tests can compare our
decoder with the server's code. :func:`normalize_printed` turns one printed value into the
bronze encoding of ``docs/bronze.md``; :func:`printed_matches` compares a bronze value with a
printed one, including the types whose printed form loses information.

How the tool prints (MariaDB 10.11, ``client/mysqlbinlog.cc`` and
``sql/log_event_client.cc``), the quirks this module undoes:

* Positions: every event is preceded by ``# at N`` and has a header line
  ``#YYMMDD HH:MM:SS server id S  end_log_pos E [CRC32 0x…] \\t<Kind>…``. Events of one
  statement (Annotate_rows, Table_map, and all its Rows events) are *buffered*: all their
  ``# at`` lines come first, then all their headers, then the rows of every Rows event of the
  statement together, then one ``# Number of rows: N`` for the whole statement. So ``# at``
  positions are matched to headers in order (a FIFO), and when a statement was split into
  several Rows events (big rows, ``binlog_row_event_max_size``), the printed rows cannot be
  assigned to events from the text alone. :func:`read_row_changes` then runs the tool once per
  event on a small synthetic binlog (the file's FORMAT_DESCRIPTION, the TABLE_MAP, and that
  Rows event with ``STMT_END_F`` set and its CRC32 fixed) to count its rows.
* Integers are printed signed; a negative value is followed by its unsigned reading in
  parentheses: ``-1 (4294967295)``. Signedness is not in the comment: it comes from the
  ``# Columns(...)`` block (FULL metadata) — pass ``unsigned=``.
* FLOAT is printed with ``%-20g`` (6 significant digits, space padded): **lossy**.
  DOUBLE is printed with ``%.20g``: 20 significant digits, enough to round-trip, so exact.
* DECIMAL is printed exactly (``-0.50``).
* BIT and SET are printed as bit strings ``b'0101'`` (SET: the member bitmask); ENUM as the
  1-based index (``0`` for the empty error value).
* YEAR is printed as ``1900 + stored byte``: the zero year prints as ``1900`` (bronze ``0``).
* DATE is printed with colons: ``'2024:02:29'``; zero parts kept (``'0000:00:00'``).
* TIME/DATETIME are quoted, with exactly fsp fraction digits (``'-00:00:00.500000'``).
* TIMESTAMP is printed as epoch seconds, with fsp fraction digits (``1717245296.500000``);
  the zero timestamp is ``0`` / ``0.000000``. Converted to UTC text.
* Strings and blobs (CHAR, VARCHAR, TEXT, BLOB, BINARY, GEOMETRY, MariaDB's JSON) are quoted;
  every byte below 0x20 is printed as ``\\xHH`` (lowercase hex) and every other byte raw —
  quotes and backslashes are *not* escaped, and bytes ≥ 0x80 are written as they are (the
  output is not valid UTF-8; this module decodes it with ``surrogateescape`` so printed values
  are ``str`` that :func:`printed_bytes` turns back into the exact bytes). **Ambiguous**: a
  stored backslash followed by ``x`` and two hex digits of a value below 0x20 (the 4 bytes
  ``\\x0a``) prints the same as the control byte; :func:`normalize_printed` assumes the
  escape. Values are never truncated (a 20,000-character MEDIUMTEXT prints whole).
* BINARY(n)/CHAR(n) values are printed as the row image stores them: without trailing pad
  bytes (``BINARY(4)`` ``0x00010000`` prints as ``'\\x00\\x01'``), like bronze.
* SQL NULL prints as bare ``NULL`` (the string ``'NULL'`` is quoted); the comment's
  ``is_null=1`` says the same.

Lossy types, for which :func:`normalize_printed` returns :data:`LOSSY`: FLOAT only.
(Strings are exact except for the backslash-x ambiguity above, which the caller avoids in its
test data.)
"""

from __future__ import annotations

import datetime as _dt
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "LOSSY",
    "Lossy",
    "RowChange",
    "TableMapInfo",
    "VerboseParse",
    "mariadb_binlog_path",
    "run_mariadb_binlog",
    "parse_verbose",
    "read_row_changes",
    "normalize_printed",
    "printed_matches",
    "printed_bytes",
    "type_name",
    "is_unsigned",
]

MARIADB_BINLOG_CANDIDATES = ("/usr/bin/mariadb-binlog", "mariadb-binlog", "mysqlbinlog")
TOOL_ARGS: Final = ("--no-defaults", "--base64-output=decode-rows", "-vv",
                    "--print-table-metadata")
STMT_END_F: Final = 0x0001
ROWS_FLAGS_OFFSET: Final = 19 + 6  # common header, then a 6-byte table id, then 2 flag bytes


class Lossy:
    """Sentinel type: the printed value cannot be turned back into exact bronze bytes."""

    _instance: "Lossy | None" = None

    def __new__(cls) -> "Lossy":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "LOSSY"


LOSSY: Final = Lossy()


@dataclass
class TableMapInfo:
    """One TABLE_MAP event as printed: where it is and what ``# Columns(...)`` declared."""

    table_id: int
    schema: str
    table: str
    start_pos: int
    end_pos: int
    columns: list[str] | None = None          # names (FULL metadata), else None
    column_types: list[str] | None = None     # declared types, e.g. "TINYINT UNSIGNED"


@dataclass
class RowChange:
    """One row change printed by ``mariadb-binlog -vv``.

    ``file`` is the binlog file's name; ``start_pos``/``end_pos`` are the ROWS event's own
    ``# at`` and ``end_log_pos``; ``row_in_event`` is the 0-based index inside that event.
    ``before`` (UPDATE/DELETE) and ``after`` (INSERT/UPDATE) hold the printed value texts
    (None for SQL NULL), ``before_types``/``after_types`` the per-column comment text
    (``INT meta=0 nullable=0 is_null=0``). ``column_types`` are the declared types from the
    TABLE_MAP's metadata block, when printed.
    """

    file: str
    start_pos: int
    end_pos: int
    gtid: str | None
    schema: str
    table: str
    table_id: int
    event_type: str  # INSERT | UPDATE | DELETE
    row_in_event: int
    before: list[str | None] | None = None
    after: list[str | None] | None = None
    before_types: list[str] | None = None
    after_types: list[str] | None = None
    columns: list[str] | None = None
    column_types: list[str] | None = None

    def __getitem__(self, key: str) -> object:  # dict-style access, as records
        return getattr(self, key)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class _RowsEvent:
    start_pos: int
    end_pos: int
    table_id: int
    kind: str
    stmt_end: bool
    crc: bool
    table_map: TableMapInfo | None  # the TABLE_MAP in force for its table id


@dataclass
class _Group:
    """The Rows events of one statement and the rows printed after them."""

    events: list[_RowsEvent] = field(default_factory=list)
    rows: list[dict[str, object]] = field(default_factory=list)
    gtid: str | None = None


@dataclass
class VerboseParse:
    """What :func:`parse_verbose` read from one file's output."""

    changes: list[RowChange]
    groups: list[_Group]
    table_maps: dict[int, TableMapInfo]  # the last TABLE_MAP seen per table id


# --- running the tool --------------------------------------------------------------------

def mariadb_binlog_path() -> str | None:
    """Path of ``mariadb-binlog`` (or ``mysqlbinlog``), or None when not installed."""
    for name in MARIADB_BINLOG_CANDIDATES:
        path = name if Path(name).is_absolute() and Path(name).exists() else shutil.which(name)
        if path:
            return path
    return None


def run_mariadb_binlog(path: str | Path, *extra: str) -> bytes:
    """The tool's raw output (bytes: values are printed unencoded) for one binlog file."""
    tool = mariadb_binlog_path()
    if tool is None:
        raise FileNotFoundError("mariadb-binlog not installed (run `make mariadb`)")
    proc = subprocess.run([tool, *TOOL_ARGS, *extra, str(path)], capture_output=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"mariadb-binlog failed on {path} (exit {proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return proc.stdout


# --- parsing -----------------------------------------------------------------------------

_AT = re.compile(r"^# at (\d+)$")
_HEADER = re.compile(
    r"^#\d{6}\s+\d{1,2}:\d\d:\d\d server id (\d+)\s+end_log_pos (\d+)"
    r"(\s+CRC32 0x[0-9a-f]+)?\s+(.*)$")
_GTID = re.compile(r"^GTID (\d+-\d+-\d+)")
_TABLE_MAP = re.compile(r"^Table_map: `(.*)`\.`(.*)` mapped to number (\d+)")
# MariaDB names compressed rows events Write_compressed_rows(_v1) (log_bin_compress=ON).
_ROWS = re.compile(r"^(Write|Update|Delete)_(?:compressed_)?rows(?:_v1|_compressed|_compressed_v1)?: "
                   r"table id (\d+)( flags: STMT_END_F)?")
_ROW_START = re.compile(r"^### (INSERT INTO|UPDATE|DELETE FROM) `(.*)`\.`(.*)`$")
_VALUE = re.compile(r"^###   @(\d+)=(.*) /\* (.* meta=\d+ nullable=\d is_null=\d) \*/$")
_COLUMN = re.compile(r"^#\s+(?:Columns\()?(`(?:[^`]|``)*`\s+)?(.*?)([,)])$")
_KINDS = {"Write": "INSERT", "Update": "UPDATE", "Delete": "DELETE",
          "INSERT INTO": "INSERT", "UPDATE": "UPDATE", "DELETE FROM": "DELETE"}


def parse_verbose(output: bytes | str, file: str) -> VerboseParse:
    """Parse the tool's output: row changes, statement groups and table maps.

    Rows of a group with several Rows events get ``start_pos = -1`` until
    :func:`read_row_changes` assigns them (it needs the binlog bytes). Raises ``ValueError``
    on output it does not understand.
    """
    text = output.decode("utf-8", "surrogateescape") if isinstance(output, bytes) else output
    pending_at: list[int] = []
    table_maps: dict[int, TableMapInfo] = {}
    groups: list[_Group] = []
    group: _Group | None = None
    gtid: str | None = None
    columns_of: TableMapInfo | None = None
    section: list[tuple[str, str]] | None = None

    in_columns = False
    for line in text.split("\n"):
        if columns_of is not None:  # just after a Table_map header, or in its "# Columns(" block
            in_columns = in_columns or line.startswith("# Columns(")
            m = _COLUMN.match(line) if in_columns else None
            if m:
                name = m.group(1)
                if name is not None:
                    columns_of.columns = (columns_of.columns or []) + [
                        name.strip()[1:-1].replace("``", "`")]
                columns_of.column_types = (columns_of.column_types or []) + [m.group(2)]
                if m.group(3) == ")":
                    columns_of, in_columns = None, False
                continue
            columns_of, in_columns = None, False
        if line.startswith("###"):
            if group is None:
                raise ValueError(f"{file}: row lines outside a rows statement: {line[:80]!r}")
            m = _ROW_START.match(line)
            if m:
                group.rows.append({"kind": _KINDS[m.group(1)], "schema": m.group(2),
                                   "table": m.group(3), "before": None, "after": None})
                section = None
                continue
            if line in ("### SET", "### WHERE"):
                row = group.rows[-1]
                section = []
                row["after" if line == "### SET" else "before"] = section
                continue
            m = _VALUE.match(line)
            if m and section is not None:
                if int(m.group(1)) != len(section) + 1:
                    raise ValueError(f"{file}: column @{m.group(1)} out of order")
                section.append((m.group(2), m.group(3)))
                continue
            raise ValueError(f"{file}: unexpected row line {line[:120]!r}")
        m = _AT.match(line)
        if m:
            pending_at.append(int(m.group(1)))
            continue
        m = _HEADER.match(line)
        if m:
            if not pending_at:
                raise ValueError(f"{file}: event header without '# at': {line[:120]!r}")
            start, end, what = pending_at.pop(0), int(m.group(2)), m.group(4)
            if (g := _GTID.match(what)) is not None:
                gtid = g.group(1)
            elif (t := _TABLE_MAP.match(what)) is not None:
                info = TableMapInfo(int(t.group(3)), t.group(1), t.group(2), start, end)
                table_maps[info.table_id] = info
                columns_of = info
            elif (r := _ROWS.match(what)) is not None:
                if group is None or group.events and group.events[-1].stmt_end:
                    group = _Group(gtid=gtid)
                    groups.append(group)
                table_id = int(r.group(2))
                group.events.append(_RowsEvent(start, end, table_id, _KINDS[r.group(1)],
                                               bool(r.group(3)), bool(m.group(3)),
                                               table_maps.get(table_id)))
            continue
        if line.startswith("# Columns("):
            raise ValueError(f"{file}: '# Columns(' without a Table_map")

    changes: list[RowChange] = []
    for grp in groups:
        single = len(grp.events) == 1
        for index, row in enumerate(grp.rows):
            ev = grp.events[0]
            tm = ev.table_map
            before = row["before"]
            after = row["after"]
            changes.append(RowChange(
                file=file,
                start_pos=ev.start_pos if single else -1,
                end_pos=ev.end_pos if single else -1,
                gtid=grp.gtid,
                schema=str(row["schema"]), table=str(row["table"]),
                table_id=ev.table_id if single else -1,
                event_type=str(row["kind"]),
                row_in_event=index if single else -1,
                before=_values(before), after=_values(after),
                before_types=_comments(before), after_types=_comments(after),
                columns=tm.columns if tm and single else None,
                column_types=tm.column_types if tm and single else None,
            ))
    return VerboseParse(changes, groups, table_maps)


def _values(section: object) -> list[str | None] | None:
    if section is None:
        return None
    assert isinstance(section, list)
    return [None if value == "NULL" else value for value, _comment in section]


def _comments(section: object) -> list[str] | None:
    if section is None:
        return None
    assert isinstance(section, list)
    return [comment for _value, comment in section]


def read_row_changes(path: str | Path) -> list[RowChange]:
    """All row changes in one binlog file, in order, as ``mariadb-binlog -vv`` prints them.

    Statements split over several Rows events are resolved with one extra tool run per event
    (see the module docstring). Raises ``RuntimeError`` when the tool fails, ``ValueError``
    when its output cannot be parsed or the per-event counts do not add up.
    """
    path = Path(path)
    parsed = parse_verbose(run_mariadb_binlog(path), path.name)
    changes, groups = parsed.changes, parsed.groups
    if all(len(g.events) == 1 for g in groups):
        return changes
    data = path.read_bytes()
    fde_end = _fde_end(data)
    out: list[RowChange] = []
    it = iter(changes)
    for grp in groups:
        rows = [next(it) for _ in grp.rows]
        if len(grp.events) == 1:
            out.extend(rows)
            continue
        counts = [_count_rows_alone(data, fde_end, ev) for ev in grp.events]
        if sum(counts) != len(rows):
            raise ValueError(f"{path.name}: rows events at {[e.start_pos for e in grp.events]} "
                             f"count {counts} rows alone but {len(rows)} together")
        k = 0
        for ev, n in zip(grp.events, counts):
            tm = ev.table_map
            assert tm is not None  # _count_rows_alone needed it
            for index in range(n):
                rc = rows[k]
                k += 1
                rc.start_pos, rc.end_pos, rc.table_id = ev.start_pos, ev.end_pos, ev.table_id
                rc.row_in_event = index
                rc.columns, rc.column_types = tm.columns, tm.column_types
                out.append(rc)
    return out


def _fde_end(data: bytes) -> int:
    """End offset of the FORMAT_DESCRIPTION event at offset 4 (its header's event size)."""
    if data[:4] != b"\xfebin":
        raise ValueError("not a binlog file")
    (size,) = struct.unpack_from("<I", data, 4 + 9)
    return 4 + size


def _count_rows_alone(data: bytes, fde_end: int, ev: _RowsEvent) -> int:
    """Rows the tool prints for one Rows event in a synthetic binlog of its own."""
    tm = ev.table_map
    if tm is None:
        raise ValueError(f"rows event at {ev.start_pos}: no TABLE_MAP for id {ev.table_id}")
    rows_event = bytearray(data[ev.start_pos:ev.end_pos])
    rows_event[ROWS_FLAGS_OFFSET] |= STMT_END_F
    if ev.crc:
        struct.pack_into("<I", rows_event, len(rows_event) - 4,
                         zlib.crc32(bytes(rows_event[:-4])) & 0xFFFFFFFF)
    synthetic = data[:fde_end] + data[tm.start_pos:tm.end_pos] + bytes(rows_event)
    with tempfile.TemporaryDirectory(prefix="binlake-verbose-") as tmp:
        one = Path(tmp) / "single-event.000001"
        one.write_bytes(synthetic)
        out = run_mariadb_binlog(one).decode("utf-8", "surrogateescape")
    return sum(1 for line in out.split("\n") if _ROW_START.match(line))


# --- values ------------------------------------------------------------------------------

_INT_TYPES = frozenset({"TINYINT", "SHORTINT", "MEDIUMINT", "INT", "LONGINT"})
_STRING_TYPES = frozenset({"STRING", "VARSTRING", "BLOB/TEXT", "TINYBLOB/TINYTEXT",
                           "MEDIUMBLOB/MEDIUMTEXT", "LONGBLOB/LONGTEXT", "GEOMETRY"})
_EPOCH = _dt.datetime(1970, 1, 1)


def type_name(type_comment: str) -> str:
    """The printed type label without size: ``"DECIMAL(10,2) meta=2562 …"`` → ``DECIMAL``."""
    label = type_comment.split(" meta=", 1)[0]
    return label.split("(", 1)[0]


def _fsp(type_comment: str) -> int:
    m = re.match(r"^[A-Z]+\((\d+)\)", type_comment)
    return int(m.group(1)) if m else 0


def is_unsigned(declared_type: str | None) -> bool | None:
    """From a ``# Columns(...)`` type (``"BIGINT UNSIGNED NOT NULL"``): True/False, or None."""
    if declared_type is None:
        return None
    return " UNSIGNED" in f" {declared_type.upper()}"


def printed_bytes(value_text: str) -> bytes:
    """The bytes the tool wrote for a printed value (inverse of the surrogateescape decode)."""
    return value_text.encode("utf-8", "surrogateescape")


def normalize_printed(value_text: str | None, type_comment: str, *,
                      unsigned: bool | None = None) -> bytes | None | Lossy:
    """One printed value in the bronze encoding (``docs/bronze.md``).

    ``type_comment`` is the column's comment text (``INT meta=0 nullable=1 is_null=0``);
    ``unsigned`` whether an integer column is declared UNSIGNED (None: signed, as bronze does
    when signedness was not logged). Returns None for SQL NULL and :data:`LOSSY` for FLOAT.
    Raises ``ValueError`` for a type label or value form this reader does not know.
    """
    if value_text is None or value_text == "NULL" or type_comment.endswith("is_null=1"):
        return None
    kind = type_name(type_comment)
    text = value_text
    if kind in _INT_TYPES:
        m = re.fullmatch(r"(-?\d+)(?: \((\d+)\))?", text)
        if not m:
            raise ValueError(f"integer {text!r}")
        return (m.group(2) if unsigned and m.group(2) else m.group(1)).encode()
    if kind == "FLOAT":
        return LOSSY
    if kind == "DOUBLE":
        return repr(float(text)).encode()
    if kind == "DECIMAL":
        return text.encode()
    if kind in ("BIT", "SET"):
        m = re.fullmatch(r"b'([01]*)'", text)
        if not m:
            raise ValueError(f"bit string {text!r}")
        return str(int(m.group(1) or "0", 2)).encode()
    if kind == "ENUM":
        return str(int(text)).encode()
    if kind == "YEAR":
        return b"0" if text == "1900" else text.encode()
    if kind in ("DATE", "TIME", "DATETIME"):
        inner = _unquote(text)
        if kind == "DATE":
            inner = inner.replace(":", "-")
        return inner.encode()
    if kind == "TIMESTAMP":
        return _timestamp(text, _fsp(type_comment)).encode()
    if kind in _STRING_TYPES:
        return _unescape(_unquote(text))
    raise ValueError(f"unknown printed type {type_comment!r}")


def _unquote(text: str) -> str:
    if len(text) < 2 or text[0] != "'" or text[-1] != "'":
        raise ValueError(f"expected a quoted value: {text[:80]!r}")
    return text[1:-1]


def _unescape(inner: str) -> bytes:
    raw = printed_bytes(inner)
    return re.sub(rb"\\x([01][0-9a-f])", lambda m: bytes([int(m.group(1), 16)]), raw)


def _timestamp(text: str, fsp: int) -> str:
    seconds, _, frac = text.partition(".")
    if len(frac) != fsp:
        raise ValueError(f"TIMESTAMP({fsp}) printed with {len(frac)} fraction digits: {text!r}")
    if int(seconds) == 0 and not frac.strip("0"):
        base = "0000-00-00 00:00:00"
    else:
        base = (_EPOCH + _dt.timedelta(seconds=int(seconds))).strftime("%Y-%m-%d %H:%M:%S")
    return f"{base}.{frac}" if fsp else base


def printed_matches(value_text: str | None, type_comment: str, bronze: bytes | None, *,
                    unsigned: bool | None = None) -> bool:
    """Whether a bronze value agrees with the printed one.

    Exact for lossless types; for FLOAT, whether the bronze number prints as the tool
    printed it (``%g``: 6 significant digits).
    """
    expected = normalize_printed(value_text, type_comment, unsigned=unsigned)
    if expected is LOSSY:
        if bronze is None or value_text is None:
            return bronze is None and value_text is None
        return "%g" % float(bronze.decode()) == value_text.strip()
    return expected == bronze
