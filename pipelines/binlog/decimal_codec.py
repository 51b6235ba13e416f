"""MySQL binary DECIMAL (``NEWDECIMAL``) → exact decimal text.

Format (MySQL ``strings/decimal.c``, ``decimal2bin`` / ``bin2decimal``): the integer digits and
the fraction digits are stored separately, each as big-endian groups of 9 decimal digits in 4
bytes; the integer part's leftover ``intg % 9`` leading digits and the fraction's leftover
``scale % 9`` trailing digits take ``DIG2BYTES[n]`` bytes. The first byte's most significant
bit is the sign, stored *set* for non-negative numbers; a negative number has every byte
inverted. So the whole value is one big-endian unsigned integer we can split with shifts.

Text form (docs/bronze.md): ``-`` when negative, integer digits without leading zeros (at least
``0``), then ``.`` and exactly ``scale`` digits when scale > 0. A stored negative zero prints
without the sign (DECIMAL has no signed zero).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

from pipelines.errors import TruncatedError, ValueDecodeError

__all__ = ["DIG2BYTES", "decimal_size", "decimal_decoder", "decimal_text"]

Decoder = Callable[[bytes, int], "tuple[bytes, int]"]

# Bytes needed for 0..9 leftover decimal digits (strings/decimal.c dig2bytes).
DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_DIG_PER_DEC = 9


def decimal_size(precision: int, scale: int) -> int:
    """Bytes a DECIMAL(precision, scale) value occupies (``decimal_bin_size``)."""
    intg = precision - scale
    return (intg // 9) * 4 + DIG2BYTES[intg % 9] + (scale // 9) * 4 + DIG2BYTES[scale % 9]


def _groups(lead_digits: int, full_groups: int, leading_first: bool) -> list[tuple[int, int, int]]:
    """(bit shift, bit mask, 10**digits) per group, most significant group first.

    The integer part has its partial group first; the fraction part has it last.
    """
    part = [(DIG2BYTES[lead_digits], lead_digits)] if lead_digits else []
    full = [(4, _DIG_PER_DEC)] * full_groups
    widths = part + full if leading_first else full + part
    out: list[tuple[int, int, int]] = []
    shift = sum(b for b, _ in widths) * 8
    for nbytes, digits in widths:
        shift -= nbytes * 8
        out.append((shift, (1 << nbytes * 8) - 1, 10**digits))
    return out


@lru_cache(maxsize=1024)
def decimal_decoder(precision: int, scale: int) -> Decoder:
    """A decoder ``dec(buf, pos) -> (text_bytes, new_pos)`` for DECIMAL(precision, scale).

    Raises :class:`ValueDecodeError` right away for impossible metadata (precision < 1,
    scale > precision or precision > 96; MySQL allows 65); the returned decoder raises
    :class:`TruncatedError` when ``buf`` ends inside the value and :class:`ValueDecodeError`
    when a digit group is not a valid base-10**9 digit (corrupt bytes).
    """
    if not (1 <= precision <= 96 and 0 <= scale <= precision):
        raise ValueDecodeError(f"NEWDECIMAL: impossible precision/scale ({precision}, {scale})")
    intg = precision - scale
    size = decimal_size(precision, scale)
    int_size = (intg // 9) * 4 + DIG2BYTES[intg % 9]
    frac_size = size - int_size
    bits = size * 8
    top = 1 << (bits - 1)
    flip_neg = ((1 << bits) - 1) ^ top  # invert everything, then the sign bit is already set
    frac_bits = frac_size * 8
    frac_mask = (1 << frac_bits) - 1
    int_groups = _groups(intg % 9, intg // 9, True)
    frac_groups = _groups(scale % 9, scale // 9, False)
    if scale:
        pos_fmt = b"%d.%0" + str(scale).encode() + b"d"
    else:
        pos_fmt = b"%d"
    neg_fmt = b"-" + pos_fmt
    from_bytes = int.from_bytes
    preview_len = max(size, 8)

    def bad(buf: bytes, pos: int) -> ValueDecodeError:
        return ValueDecodeError(
            f"NEWDECIMAL({precision},{scale}): bytes are not a valid binary decimal",
            preview=buf[pos:pos + preview_len],
        )

    def truncated(buf: bytes, pos: int) -> TruncatedError:
        return TruncatedError(
            f"NEWDECIMAL({precision},{scale}) needs {size} bytes at offset {pos}, "
            f"{max(len(buf) - pos, 0)} left",
            preview=buf[pos:pos + 32],
        )

    if len(int_groups) <= 1 and len(frac_groups) <= 1:
        # Common case (each side at most 9 digits): each side *is* its group.
        int_limit = int_groups[0][2] if int_groups else 1
        frac_limit = frac_groups[0][2] if frac_groups else 1

        def dec_small(buf: bytes, pos: int) -> tuple[bytes, int]:
            end = pos + size
            if end > len(buf):
                raise truncated(buf, pos)
            raw = from_bytes(buf[pos:end], "big")
            if raw & top:
                raw ^= top
                fmt = pos_fmt
            else:
                raw ^= flip_neg
                fmt = neg_fmt if raw else pos_fmt
            ip = raw >> frac_bits
            fp = raw & frac_mask
            if ip >= int_limit or fp >= frac_limit:
                raise bad(buf, pos)
            return fmt % (ip, fp) if scale else fmt % ip, end

        return dec_small

    if len(int_groups) == 2 and len(frac_groups) <= 1:
        # DECIMAL(15..18 integer digits, scale <= 9), e.g. money columns: unrolled.
        lead_limit = int_groups[0][2]
        frac_limit = frac_groups[0][2] if frac_groups else 1

        def dec_two(buf: bytes, pos: int) -> tuple[bytes, int]:
            end = pos + size
            if end > len(buf):
                raise truncated(buf, pos)
            raw = from_bytes(buf[pos:end], "big")
            if raw & top:
                raw ^= top
                fmt = pos_fmt
            else:
                raw ^= flip_neg
                fmt = neg_fmt if raw else pos_fmt
            ip = raw >> frac_bits
            hi = ip >> 32
            lo = ip & 0xFFFFFFFF
            fp = raw & frac_mask
            if hi >= lead_limit or lo >= 1000000000 or fp >= frac_limit:
                raise bad(buf, pos)
            ip = hi * 1000000000 + lo
            return fmt % (ip, fp) if scale else fmt % ip, end

        return dec_two

    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        end = pos + size
        if end > len(buf):
            raise truncated(buf, pos)
        raw = from_bytes(buf[pos:end], "big")
        if raw & top:
            raw ^= top
            fmt = pos_fmt
        else:
            raw ^= flip_neg
            fmt = neg_fmt if raw else pos_fmt
        ip_raw = raw >> frac_bits
        fp_raw = raw & frac_mask
        ip = 0
        for shift, mask, limit in int_groups:
            g = (ip_raw >> shift) & mask
            if g >= limit:
                raise bad(buf, pos)
            ip = ip * limit + g
        fp = 0
        for shift, mask, limit in frac_groups:
            g = (fp_raw >> shift) & mask
            if g >= limit:
                raise bad(buf, pos)
            fp = fp * limit + g
        return fmt % (ip, fp) if scale else fmt % ip, end

    return dec


def decimal_text(data: bytes, pos: int, precision: int, scale: int) -> tuple[str, int]:
    """Decode one binary decimal at ``data[pos:]``; return ``(text, end)``.

    Used by the JSON decoder for opaque DECIMAL values. Raises like :func:`decimal_decoder`.
    """
    text, end = decimal_decoder(precision, scale)(data, pos)
    return text.decode("ascii"), end
