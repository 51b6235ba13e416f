"""Pure: one bronze value (bytes, ``docs/bronze.md``) → its silver JSON value text.

``docs/types.md`` is the table this module implements. A renderer is built once per column
(:func:`make_renderer`) and called per value; a value that cannot be rendered without guessing
(an ENUM index past the labels, bytes invalid in the column's character set) raises
:class:`SchemaMismatchError`, and silver quarantines the row.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Callable

from pipelines.binlog import coltypes as T
from pipelines.errors import SchemaMismatchError
from pipelines.silver.charsets import decode_text

__all__ = ["ColumnSpec", "make_renderer", "pk_text"]

_dumps = json.dumps


@dataclass(frozen=True)
class ColumnSpec:
    """Everything needed to render one column's values.

    ``charset`` is the MySQL character set name (``binary`` for byte strings, ``None`` when
    unknown: strings then cannot be rendered). ``fix_unsigned`` is set when the binlog did not
    log signedness (bronze then holds the signed reading) but the schema says UNSIGNED.
    ``pad_binary`` is BINARY(n)'s n: row images store it without trailing 0x00 bytes.
    """

    name: str
    col_type: int
    meta: int = 0
    fix_unsigned: bool = False
    charset: str | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None
    is_json: bool = False
    pad_binary: int = 0


def _b64(data: bytes) -> str:
    return '"' + base64.b64encode(data).decode("ascii") + '"'


def _number(value: bytes) -> str:
    return value.decode("ascii")


def _quoted_ascii(value: bytes) -> str:
    return '"' + value.decode("ascii") + '"'


def make_renderer(spec: ColumnSpec) -> Callable[[bytes], str]:
    """A function rendering one non-NULL bronze value of ``spec``'s column as JSON text."""
    t = spec.col_type
    if t in T.INTEGER_TYPES:
        if spec.fix_unsigned:
            wrap = 1 << (8 * T.INTEGER_WIDTH[t])

            def unsigned(value: bytes) -> str:
                n = int(value)
                return str(n + wrap if n < 0 else n)

            return unsigned
        return _number
    if t in (T.FLOAT, T.DOUBLE, T.YEAR, T.BIT):
        return _number
    if t in T.QUOTED_TYPES:
        return _quoted_ascii
    if t == T.ENUM:
        return _enum(spec)
    if t == T.SET:
        return _set(spec)
    if t == T.JSON:
        return lambda value: value.decode("utf-8")
    if t in (T.GEOMETRY, T.VECTOR):
        return _b64
    if t in T.BYTES_TYPES:
        return _text(spec)
    if t == T.NULL:
        return lambda value: "null"
    raise SchemaMismatchError(f"column {spec.name}: no silver form for type {T.name(t)}")


def _enum(spec: ColumnSpec) -> Callable[[bytes], str]:
    labels = spec.enum_values
    if labels is None:
        raise SchemaMismatchError(f"column {spec.name}: ENUM labels unknown (no snapshot, "
                                  "binlog_row_metadata not FULL)")
    rendered = ['""'] + [_dumps(v, ensure_ascii=False) for v in labels]

    def render(value: bytes) -> str:
        idx = int(value)
        if idx >= len(rendered):
            raise SchemaMismatchError(f"column {spec.name}: ENUM index {idx} but only "
                                      f"{len(labels)} labels")
        return rendered[idx]

    return render


def _set(spec: ColumnSpec) -> Callable[[bytes], str]:
    labels = spec.set_values
    if labels is None:
        raise SchemaMismatchError(f"column {spec.name}: SET labels unknown (no snapshot, "
                                  "binlog_row_metadata not FULL)")

    def render(value: bytes) -> str:
        mask = int(value)
        if mask >> len(labels):
            raise SchemaMismatchError(f"column {spec.name}: SET bits {mask:#x} beyond its "
                                      f"{len(labels)} members")
        return _dumps(",".join(v for i, v in enumerate(labels) if mask >> i & 1),
                      ensure_ascii=False)

    return render


def _text(spec: ColumnSpec) -> Callable[[bytes], str]:
    charset = spec.charset
    if charset is None:
        raise SchemaMismatchError(f"column {spec.name}: character set unknown")
    if charset == "binary":
        pad = spec.pad_binary
        if pad:
            return lambda value: _b64(value.ljust(pad, b"\x00"))
        return _b64
    name = spec.name

    if spec.is_json:
        def render_json(value: bytes) -> str:
            text = _decode(value, charset, name)
            try:
                json.loads(text)
            except ValueError:
                return _dumps(text, ensure_ascii=False)  # not valid JSON: keep it as a string
            return text

        return render_json

    def render(value: bytes) -> str:
        return _dumps(_decode(value, charset, name), ensure_ascii=False)

    return render


def _decode(value: bytes, charset: str, name: str) -> str:
    try:
        return decode_text(value, charset)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SchemaMismatchError(f"column {name}: bytes not valid {charset}: "
                                  f"{value[:16].hex()}") from exc


def pk_text(json_value: str) -> str:
    """A PK column's JSON value as pk_values text: strings unquoted, ``\\`` and ``|`` escaped."""
    if json_value.startswith('"'):
        text = json.loads(json_value)
    else:
        text = json_value
    return text.replace("\\", "\\\\").replace("|", "\\|")
