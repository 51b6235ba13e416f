"""Pure: silver's JSON images read value by value, and an image's key as ``pk_values``.

Silver embeds JSON column values as the text the server stored (MariaDB keeps JSON as text),
so :func:`raw_values` slices each value's text out of the image instead of re-serialising it.
"""

from __future__ import annotations

import json

from pipelines.silver.render import pk_text

__all__ = ["raw_values", "pk_values_of"]

_decoder = json.JSONDecoder()
_WS = " \t\r\n"


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def raw_values(image: str | None) -> dict[str, str] | None:
    """``{"a": 1, "b": {"x": 1.50}}`` → ``{"a": "1", "b": '{"x": 1.50}'}`` (value texts as
    written); ``None`` for a NULL image. Raises ValueError for text that is not a JSON object."""
    if image is None:
        return None
    i = _skip(image, 0)
    if image[i:i + 1] != "{":
        raise ValueError("row image is not a JSON object")
    out: dict[str, str] = {}
    i = _skip(image, i + 1)
    if image[i:i + 1] == "}":
        return out
    while True:
        key, i = _decoder.raw_decode(image, i)
        i = _skip(image, i)
        if image[i:i + 1] != ":":
            raise ValueError("row image: ':' expected")
        start = _skip(image, i + 1)
        _, end = _decoder.raw_decode(image, start)
        out[key] = image[start:end]
        i = _skip(image, end)
        if image[i:i + 1] == ",":
            i = _skip(image, i + 1)
            continue
        if image[i:i + 1] == "}":
            return out
        raise ValueError("row image: ',' or '}' expected")


def pk_values_of(values: dict[str, str], pk_names: list[str]) -> str:
    """silver's ``pk_values`` for an image's raw values (``pk_names`` in table order)."""
    return "|".join(pk_text(values.get(n, "null")) for n in pk_names)
