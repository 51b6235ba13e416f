"""MySQL/MariaDB character sets: collation ids, Python codecs, and strict decoding.

Binlogs name a string column's character set only by a collation id, and information_schema
by a character set name. :func:`charset_for_collation` maps the id to the name, and
:func:`decode_text` decodes a value's bytes exactly as the server reads them, raising
:class:`UnicodeDecodeError` when the bytes are not valid in that character set.

Two character sets need care:

- ``latin1`` is not ISO-8859-1 on MySQL: it is Windows cp1252 with its five undefined bytes
  0x81, 0x8D, 0x8F, 0x90, 0x9D mapped to U+0081, U+008D, U+008F, U+0090, U+009D (MySQL's
  ``strings/ctype-latin1.cc`` ``to_uni``), so every byte decodes. The codec is registered with
  Python's codec registry as ``mysql_latin1`` the first time :func:`python_codec` returns it.
- ``utf8mb3`` (``utf8`` before MySQL 8.0.30 / MariaDB 10.6) holds only the BMP: a 4-byte
  sequence is invalid in it.

Character sets without a faithful Python codec (dec8, hp8, swe7, keybcs2, armscii8, geostd8,
eucjpms) raise :class:`LookupError` from :func:`python_codec` and :func:`decode_text`.
"""

from __future__ import annotations

import codecs
import re

from pipelines.silver.collations import COLLATIONS

__all__ = ["COLLATIONS", "charset_for_collation", "collation_name", "python_codec",
           "decode_text", "MYSQL_LATIN1"]

MYSQL_LATIN1 = "mysql_latin1"

# MySQL charset name → Python codec; None = bytes (no text).
_CODECS: dict[str, str | None] = {
    "binary": None,
    "latin1": MYSQL_LATIN1,
    "ascii": "ascii",
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "latin2": "iso8859_2",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "greek": "iso8859_7",
    "hebrew": "iso8859_8",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "koi8r": "koi8_r",
    "koi8u": "koi8_u",
    "macce": "mac_latin2",
    "macroman": "mac_roman",
    "tis620": "tis_620",
    "big5": "big5",
    "gb2312": "gb2312",
    "gbk": "gbk",
    "gb18030": "gb18030",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc_jp",
    "euckr": "euc_kr",
}

_LATIN1_UNDEFINED = {0x81: "\u0081", 0x8D: "\u008d", 0x8F: "\u008f", 0x90: "\u0090",
                     0x9D: "\u009d"}
_LATIN1_TABLE = "".join(
    _LATIN1_UNDEFINED[b] if b in _LATIN1_UNDEFINED else bytes([b]).decode("cp1252")
    for b in range(256))
_LATIN1_ENCODE = codecs.charmap_build(_LATIN1_TABLE)
_NON_BMP = re.compile("[\U00010000-\U0010ffff]")
_registered = False


def _latin1_search(name: str) -> codecs.CodecInfo | None:
    if name.replace("-", "_") != MYSQL_LATIN1:
        return None
    return codecs.CodecInfo(
        name=MYSQL_LATIN1,
        encode=lambda s, errors="strict": codecs.charmap_encode(s, errors, _LATIN1_ENCODE),
        decode=lambda b, errors="strict": codecs.charmap_decode(b, errors, _LATIN1_TABLE),
    )


def _register_latin1() -> None:
    global _registered
    if not _registered:
        codecs.register(_latin1_search)
        _registered = True


def charset_for_collation(collation_id: int) -> str | None:
    """The character set of a MySQL/MariaDB collation id (``8`` → ``latin1``), None if unknown."""
    entry = COLLATIONS.get(collation_id)
    return entry[0] if entry else None


def collation_name(collation_id: int) -> str | None:
    """The collation's name (``45`` → ``utf8mb4_general_ci``), None if unknown."""
    entry = COLLATIONS.get(collation_id)
    return entry[1] if entry else None


def python_codec(charset: str) -> str | None:
    """The Python codec that decodes ``charset`` as the server does; None for ``binary``.

    Raises :class:`LookupError` for a character set without a faithful Python codec.
    """
    key = charset.lower()
    if key not in _CODECS:
        raise LookupError(f"no Python codec for MySQL character set {charset!r}")
    codec = _CODECS[key]
    if codec == MYSQL_LATIN1:
        _register_latin1()
    return codec


def decode_text(data: bytes, charset: str) -> str:
    """Decode a value's bytes in the MySQL character set ``charset``, strictly.

    Raises :class:`UnicodeDecodeError` when the bytes are invalid in ``charset``,
    :class:`LookupError` when there is no codec for it, and :class:`ValueError` for
    ``binary`` (binary values are bytes, not text).
    """
    key = charset.lower()
    codec = python_codec(key)
    if codec is None:
        raise ValueError("the binary character set has no text form")
    if codec == MYSQL_LATIN1:
        return codecs.charmap_decode(data, "strict", _LATIN1_TABLE)[0]
    text = data.decode(codec)
    if key in ("utf8mb3", "utf8", "ucs2"):
        bad = _NON_BMP.search(text)
        if bad:
            start = len(text[:bad.start()].encode(codec))
            raise UnicodeDecodeError(codec, data, start, start + len(bad.group().encode(codec)),
                                     f"a character outside the BMP is invalid in {key}")
    return text
