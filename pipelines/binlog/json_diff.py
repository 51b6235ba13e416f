"""MySQL partial JSON updates (``binlog_row_value_options=PARTIAL_JSON``) applied to JSON text.

A PARTIAL_UPDATE_ROWS after image may hold, for a JSON column, a *diff vector* instead of the
document (mysql-server ``sql/json_diff.cc``, ``Json_diff_vector::write_binary``)::

    length u32 | diff*
    diff := operation u8 (0 REPLACE, 1 INSERT, 2 REMOVE)
            path-length (packed int) | path (JSON path text, e.g. ``$.a[2]."b c"``)
            [value-length (packed int) | value (binary JSON: type byte + data)]  -- not REMOVE

The diffs come from ``JSON_SET``/``JSON_REPLACE``/``JSON_REMOVE`` (and ``JSON_ARRAY_INSERT``-
like inserts into arrays) and are applied in order to the before image's document. Bronze
keeps JSON as text in MySQL's printing style, so the before text is parsed into a tree that
keeps every number's exact text, the diffs are applied, and the tree is printed again the
MySQL way (object keys in MySQL's storage order: shorter keys first, then bytewise).
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring

from pipelines.binlog.packed_ints import read_packed_int
from pipelines.binlog.json_binary import json_binary_to_text
from pipelines.errors import JsonDiffError, TruncatedError, ValueDecodeError

__all__ = ["JsonDiffError", "read_json_diff", "apply_json_diff", "REPLACE", "INSERT", "REMOVE"]

REPLACE = 0
INSERT = 1
REMOVE = 2
_OPS = {REPLACE: "REPLACE", INSERT: "INSERT", REMOVE: "REMOVE"}


class _Num(str):
    """A JSON number kept as its exact text."""


def read_json_diff(buf: bytes, pos: int) -> tuple[list[tuple[int, str, str | None]], int]:
    """Read one column's diff vector at ``pos``; return ([(op, path, value JSON text)], end).

    Raises :class:`TruncatedError` when it runs past the event, :class:`ValueDecodeError`
    for an unknown operation or a bad value.
    """
    if pos + 4 > len(buf):
        raise TruncatedError("JSON diff length runs past the event end", preview=buf[pos:pos + 8])
    length = int.from_bytes(buf[pos:pos + 4], "little")
    p = pos + 4
    end = p + length
    if end > len(buf):
        raise TruncatedError(f"JSON diff of {length} bytes runs past the event end",
                             preview=buf[pos:pos + 32])
    diffs = []
    while p < end:
        op = buf[p]
        if op not in _OPS:
            raise ValueDecodeError(f"JSON diff operation {op} is not 0, 1 or 2",
                                   preview=buf[p:p + 16])
        n, p = read_packed_int(buf, p + 1)
        path = buf[p:p + n].decode("utf-8", "surrogateescape")
        p += n
        value = None
        if op != REMOVE:
            n, p = read_packed_int(buf, p)
            if p + n > end:
                raise TruncatedError("JSON diff value runs past its diff", preview=buf[p:p + 16])
            value = json_binary_to_text(buf[p:p + n])
            p += n
        if p > end:
            raise TruncatedError("JSON diff path runs past its diff", preview=buf[p:p + 16])
        diffs.append((op, path, value))
    return diffs, end


def _parse(text: str) -> object:
    return json.loads(text, parse_float=_Num, parse_int=_Num)


def _key_order(key: str) -> tuple[int, bytes]:
    raw = key.encode("utf-8", "surrogatepass")
    return len(raw), raw


def _print(v: object, out: list[str]) -> None:
    if isinstance(v, _Num):
        out.append(str.__str__(v))
    elif isinstance(v, str):
        out.append(encode_basestring(v))
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, dict):
        out.append("{")
        for i, k in enumerate(sorted(v, key=_key_order)):
            if i:
                out.append(", ")
            out.append(encode_basestring(k))
            out.append(": ")
            _print(v[k], out)
        out.append("}")
    else:
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(", ")
            _print(item, out)
        out.append("]")


def _path(path: str) -> list[str | int]:
    """``$.a[3]."b c"`` → ["a", 3, "b c"]; raises JsonDiffError for wildcards or bad text."""
    if not path.startswith("$"):
        raise JsonDiffError(f"path {path!r} does not start with $")
    i, n = 1, len(path)
    legs: list[str | int] = []
    while i < n:
        c = path[i]
        if c == ".":
            i += 1
            if i < n and path[i] == '"':
                dec = json.JSONDecoder()
                key, i = dec.raw_decode(path, i)
                legs.append(key)
            else:
                j = i
                while j < n and path[j] not in ".[":
                    j += 1
                if j == i or path[i:j] == "*":
                    raise JsonDiffError(f"unsupported member leg in {path!r}")
                legs.append(path[i:j])
                i = j
        elif c == "[":
            j = path.find("]", i)
            inner = path[i + 1:j].strip() if j > 0 else ""
            if not inner.isdigit():
                raise JsonDiffError(f"unsupported array leg in {path!r}")
            legs.append(int(inner))
            i = j + 1
        else:
            raise JsonDiffError(f"bad path {path!r}")
    return legs


def _apply(doc: object, op: int, path: str, value: str | None) -> object:
    legs = _path(path)
    new = _parse(value) if value is not None else None
    if not legs:
        if op == REPLACE:
            return new
        raise JsonDiffError(f"{_OPS[op]} of the whole document")
    parent = doc
    for leg in legs[:-1]:
        try:
            if isinstance(leg, int) and isinstance(parent, list):
                parent = parent[leg]
            elif isinstance(leg, str) and isinstance(parent, dict):
                parent = parent[leg]
            else:
                raise JsonDiffError(f"path {path!r} crosses a non-container")
        except (IndexError, KeyError):
            raise JsonDiffError(f"path {path!r} not in the document") from None
    last = legs[-1]
    if isinstance(parent, dict) and isinstance(last, str):
        if op == REMOVE:
            if last not in parent:
                raise JsonDiffError(f"REMOVE of missing {path!r}")
            del parent[last]
        elif op == REPLACE and last not in parent:
            raise JsonDiffError(f"REPLACE of missing {path!r}")
        else:
            parent[last] = new
    elif isinstance(parent, list) and isinstance(last, int):
        if op == REMOVE:
            if last >= len(parent):
                raise JsonDiffError(f"REMOVE of missing {path!r}")
            del parent[last]
        elif op == REPLACE:
            if last >= len(parent):
                raise JsonDiffError(f"REPLACE of missing {path!r}")
            parent[last] = new
        else:
            parent.insert(min(last, len(parent)), new)
    else:
        raise JsonDiffError(f"path {path!r} does not match the document's shape")
    return doc


def apply_json_diff(before: bytes, diffs: list[tuple[int, str, str | None]]) -> bytes:
    """Apply ``diffs`` to the JSON text ``before`` (bronze bytes); return the after text.

    Raises :class:`JsonDiffError` when a diff does not apply (the caller flags the row).
    """
    try:
        doc = _parse(before.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise JsonDiffError(f"before image is not JSON text: {exc}") from None
    for op, path, value in diffs:
        doc = _apply(doc, op, path, value)
    out: list[str] = []
    _print(doc, out)
    return "".join(out).encode("utf-8")
