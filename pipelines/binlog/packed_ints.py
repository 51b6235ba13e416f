"""MySQL's variable-length integers: the length-encoded ``net_field_length`` of the classic
protocol and events, and the serialization library's (8.0.20+ payloads, 8.4 tagged GTIDs)."""

from __future__ import annotations

import struct

from pipelines.errors import DecodeError, TruncatedError

__all__ = ["read_packed_int", "read_varlen_uint"]

_U64 = struct.Struct("<Q")


def read_packed_int(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a MySQL length-encoded integer (``net_field_length``); return (value, new_pos)."""
    try:
        first = buf[pos]
        if first < 251:
            return first, pos + 1
        if first == 252:
            return buf[pos + 1] | buf[pos + 2] << 8, pos + 3
        if first == 253:
            return int.from_bytes(buf[pos + 1:pos + 4], "little"), pos + 4
        if first == 254:
            if pos + 9 > len(buf):
                raise IndexError
            return _U64.unpack_from(buf, pos + 1)[0], pos + 9
    except IndexError:
        raise TruncatedError("length-encoded integer runs past the event end",
                             preview=buf[pos:pos + 9]) from None
    raise DecodeError(f"invalid length-encoded integer prefix {first:#x}", preview=buf[pos:pos + 9])


def read_varlen_uint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a MySQL serialization-library variable-length unsigned integer.

    (mysql-server ``libs/mysql/serialization/variable_length_integers.h``): the number of
    trailing 1 bits of the first byte is the number of extra bytes; the value is the
    little-endian integer of all those bytes shifted right by their count (a first byte of
    ``0xff`` is followed by the 8 bytes of the value).
    """
    try:
        first = buf[pos]
    except IndexError:
        raise TruncatedError("variable-length integer runs past the event end") from None
    extra = 0
    while extra < 8 and first >> extra & 1:
        extra += 1
    end = pos + 1 + extra
    if end > len(buf):
        raise TruncatedError("variable-length integer runs past the event end",
                             preview=buf[pos:pos + 9])
    if extra == 8:
        return int.from_bytes(buf[pos + 1:end], "little"), end
    return int.from_bytes(buf[pos:end], "little") >> (extra + 1), end
