"""The one ASCII table the CLI prints (``binlake sql``, the shell, ``binlake query``)."""

from __future__ import annotations

from typing import Sequence

__all__ = ["ascii_table"]


def ascii_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``columns`` and already-formatted ``rows`` as a boxed table (no trailing newline)."""
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(vals: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(vals, widths)) + " |"

    return "\n".join([sep, line(columns), sep, *map(line, rows), sep])
