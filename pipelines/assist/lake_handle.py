"""One lake for a server's requests: the configuration, its limits, the passwords to scrub,
and the one Spark session (:func:`pipelines.engine.session.get_spark`, made on first use), used by
one request at a time (``binlake mcp`` and ``binlake console`` share it)."""

from __future__ import annotations

import threading
from typing import Any, Callable

from pipelines.assist.mcp_tools import Limits, scrub, secrets_of
from pipelines.config import Config

__all__ = ["LakeHandle"]


class LakeHandle:
    def __init__(self, cfg: Config, limits: Limits = Limits()) -> None:
        self.cfg, self.limits, self.secrets = cfg, limits, secrets_of(cfg)
        self._spark = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[..., Any], **kwargs: Any) -> Any:
        """``fn(spark, cfg, **kwargs)``, its result scrubbed of passwords."""
        with self._lock:
            if self._spark is None:
                from pipelines.engine.session import get_spark

                self._spark = get_spark(self.cfg.engine)
            return scrub(fn(self._spark, self.cfg, **kwargs), self.secrets)

    def clean(self, text: str) -> str:
        """``text`` (an error message) scrubbed of passwords."""
        return scrub(text, self.secrets)
