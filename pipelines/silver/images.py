"""Pure: one bronze row change → silver's JSON images, changed_columns and pk_values."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Sequence

from pipelines.errors import SchemaMismatchError
from pipelines.silver.naming import TableSpec
from pipelines.silver.render import make_renderer, pk_text

__all__ = ["SilverImages", "TableRenderer"]


@dataclass(frozen=True)
class SilverImages:
    row_before: str | None
    row_after: str | None
    changed_columns: str | None
    pk_values: str
    absent_columns: str | None  # JSON array: columns a MINIMAL/NOBLOB image did not carry


class TableRenderer:
    """Renders row changes of one :class:`TableSpec` (renderers built once)."""

    def __init__(self, spec: TableSpec) -> None:
        self.spec = spec
        self.names = [json.dumps(c.name, ensure_ascii=False) for c in spec.columns]
        self.plain = [c.name for c in spec.columns]
        self._renderers: list[Callable[[bytes], str]] | None = None
        self._error: SchemaMismatchError | None = None
        try:
            self._renderers = [make_renderer(c) for c in spec.columns]
        except SchemaMismatchError as exc:
            self._error = exc  # raised only if a value of that column must be rendered

    def _values(self, image: Sequence[bytes | None], present: Sequence[bool] | None
                ) -> list[str | None]:
        """Rendered JSON text per column; ``None`` for a column absent from the image."""
        if len(image) != len(self.plain):
            raise SchemaMismatchError(f"image has {len(image)} values, schema has "
                                      f"{len(self.plain)} columns")
        renderers = self._renderers
        if renderers is None:
            raise self._error  # type: ignore[misc]
        out: list[str | None] = []
        append = out.append
        for i, value in enumerate(image):
            if present is not None and not present[i]:
                append(None)
            elif value is None:
                append("null")
            else:
                append(renderers[i](bytes(value)))
        return out

    def _object(self, values: list[str | None]) -> str:
        names = self.names
        return "{" + ", ".join(f"{names[i]}: {v}" for i, v in enumerate(values)
                               if v is not None) + "}"

    def render(self, event_type: str, before, after, before_present, after_present
               ) -> SilverImages:
        """Render one change; raises :class:`SchemaMismatchError` (→ quarantine)."""
        b = self._values(before, before_present) if before is not None else None
        a = self._values(after, after_present) if after is not None else None
        changed = None
        if event_type == "UPDATE" and b is not None and a is not None:
            changed = json.dumps([self.plain[i] for i in range(len(a))
                                  if b[i] is not None and a[i] is not None and b[i] != a[i]],
                                 ensure_ascii=False)
        key_image = a if event_type == "INSERT" else b
        if key_image is None:
            raise SchemaMismatchError(f"{event_type} without its key image")
        parts = []
        for i in self.spec.pk:
            v = key_image[i]
            if v is None:
                raise SchemaMismatchError(f"primary key column {self.plain[i]} absent from the "
                                          "image")
            parts.append(pk_text(v))
        absent = [self.plain[i] for side in (b, a) if side is not None
                  for i, v in enumerate(side) if v is None]
        return SilverImages(
            self._object(b) if b is not None else None,
            self._object(a) if a is not None else None,
            changed,
            "|".join(parts),
            json.dumps(sorted(set(absent), key=self.plain.index), ensure_ascii=False)
            if absent else None,
        )
