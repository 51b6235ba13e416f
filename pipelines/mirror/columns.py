"""Pure: a batch of silver images → the mirror's typed Arrow columns in one pass of Arrow's
JSON reader and casts, without a Python call per value.

Only where Arrow gives exactly what :func:`~pipelines.mirror.types.converter` gives, value for
value; the reader is strict (a number where a string is read, a fraction in an integer, a
decimal with more digits than its scale, an impossible date: an error, never a cast), and
the date and time texts are checked against silver's one form first. JSON columns and widened
columns (a type change) keep the per-value converter on the images decoded in Python.
Anything else in a batch raises :class:`NotFast`, and ``plan.records`` converts that batch
value by value, the reference path (MINIMAL images, zero dates, year 0000, a value
that does not fit: it raises the error naming the seq and column).
"""

from __future__ import annotations

import binascii
import io
import json
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from pipelines.mirror.types import MirrorType, converter, parse_image

__all__ = ["NotFast", "fast_type", "image_columns"]

_YEAR = r"([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"  # 0001-9999: no year 0
_DATE = _YEAR + r"-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_TIME = r" ([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
_FORM = {"date": "^" + _DATE + "$", "datetime": "^" + _DATE + _TIME + "$",
         "timestamp": "^" + _DATE + _TIME + "$"}


class NotFast(Exception):
    """The batch holds a value the Arrow path does not convert exactly as the reference."""


def fast_type(reading: MirrorType, target: MirrorType, arrow: pa.DataType
              ) -> pa.DataType | None:
    """The type Arrow's JSON reader reads a column as, when the column converts without
    Python (``arrow``: the column's output type); ``None``: per value."""
    kind = reading.kind
    if kind != target.kind or reading.spark != target.spark and kind != "int":
        return None  # widened (types.widen): per value, as the reference does it
    if kind == "int":
        return pa.int64()  # cast to the target's width after: an overflow is an error
    if kind == "decimal":
        return arrow
    if kind in ("float", "double"):
        return pa.float64()
    if kind in ("date", "datetime", "timestamp", "text", "binary"):
        return pa.string()
    return None  # json, json_in_text: the document's text is made in Python


def _read(texts: list[str], fields: list[tuple[str, pa.DataType]]) -> pa.Table:
    options = pj.ParseOptions(explicit_schema=pa.schema(fields),
                              unexpected_field_behavior="ignore")
    data = "\n".join(texts).encode("utf-8")
    try:
        table = pj.read_json(io.BytesIO(data), parse_options=options,
                             read_options=pj.ReadOptions(use_threads=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise NotFast(str(exc)) from None
    if table.num_rows != len(texts):
        raise NotFast("rows")
    return table


def _finish(parsed: pa.ChunkedArray, kind: str, arrow: pa.DataType) -> pa.Array:
    """A parsed column as its output type."""
    col = parsed.combine_chunks()
    try:
        if kind in _FORM:
            valid = pc.match_substring_regex(col, _FORM[kind])
            if pc.any(pc.invert(pc.fill_null(valid, True))).as_py():
                raise NotFast(kind)  # zero or partial dates, another form: the reference
            if kind == "date":
                return pc.cast(col, pa.date32())
            stamps = pc.cast(col, pa.timestamp("us"))
            return stamps if kind == "datetime" else stamps.cast(arrow)
        if kind == "binary":
            return pa.array([None if v is None else binascii.a2b_base64(v, strict_mode=True)
                             for v in col.to_pylist()], type=pa.binary())
        if kind == "text":
            col.validate(full=True)
            return col
        if kind == "float":
            return pc.cast(col, arrow, safe=False)  # as the reference's float → float32
        return pc.cast(col, arrow)  # ints: an overflow is an error
    except (pa.ArrowInvalid, pa.ArrowTypeError, binascii.Error, ValueError) as exc:
        raise NotFast(str(exc)) from None


def image_columns(texts: list[str], columns: Sequence[tuple[str, MirrorType, MirrorType,
                                                               pa.DataType]],
                  only: frozenset[str] | None = None,
                  spans: Mapping[str, Sequence[str | None]] | None = None) -> list[pa.Array]:
    """The output column of every ``(name, reading, target, arrow)`` in ``columns`` for the
    images ``texts`` (silver JSON objects, none NULL); columns outside ``only`` (when given)
    are all NULL. ``spans``: per JSON column, its text cut out of each image by the engine
    (``json_spans``): a row's document is parsed from it where it checks (:func:`_span`),
    else from the whole image. Raises :class:`NotFast` when the batch must go value by
    value."""
    n = len(texts)
    wanted = [c for c in columns if only is None or c[0] in only]
    fast = {name: t for name, reading, target, arrow in wanted
            if (t := fast_type(reading, target, arrow)) is not None}
    table = _read(texts, list(fast.items())) if fast else None
    decoded: dict[int, dict[str, Any]] = {}

    def image(i: int) -> dict[str, Any]:
        if i not in decoded:
            decoded[i] = parse_image(texts[i])
        return decoded[i]

    out: list[pa.Array] = []
    for name, reading, target, arrow in columns:
        if only is not None and name not in only:
            out.append(pa.nulls(n, arrow))
        elif name in fast:
            out.append(_finish(table.column(name), reading.kind, arrow))
        else:
            fn: Callable[[Any], Any] = converter(reading, target, name)
            cut = (spans or {}).get(name) if reading.kind == target.kind == "json" else None
            key = json.dumps(name, ensure_ascii=False) + ": "
            try:
                if cut is None:
                    values = [fn(image(i).get(name)) for i in range(n)]
                else:
                    values = [fn(parse_image(t)) if _span(t, key, text)
                              else fn(image(i).get(name))
                              for i, (t, text) in enumerate(zip(cut, texts))]
                out.append(pa.array(values, type=arrow))
            except Exception as exc:  # noqa: BLE001 - the reference path names it
                raise NotFast(str(exc)) from None
    return out


def _span(text: str | None, key: str, image: str) -> bool:
    """Whether ``text`` is a JSON column's document as ``image`` holds it: an object or an
    array, found right after the column's ``key`` (a string's or a number's span is not
    its JSON text, a missing member and JSON null have none: those rows parse the image)."""
    return text is not None and text[:1] in ("{", "[") and key + text in image
