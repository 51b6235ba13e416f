"""GTID state of a stream: what has been streamed, in the server's own notation.

MariaDB: a GTID position, one ``domain-server-seq`` per replication domain (the last
transaction of each domain; ``@@gtid_binlog_pos`` / ``@slave_connect_state`` syntax).
MySQL: a GTID set, ``uuid[:tag]:a-b:c`` intervals per source (``@@gtid_executed`` syntax).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["GtidState"]


@dataclass
class GtidState:
    mariadb: bool
    domains: dict[int, tuple[int, int]] = field(default_factory=dict)  # domain -> (server, seq)
    sets: dict[str, list[list[int]]] = field(default_factory=dict)  # uuid[:tag] -> intervals

    @classmethod
    def parse(cls, text: str, *, mariadb: bool) -> "GtidState":
        st = cls(mariadb)
        for item in (p.strip() for p in (text or "").replace("\n", "").split(",")):
            if not item:
                continue
            if mariadb:
                d, s, n = (int(x) for x in item.split("-"))
                st.domains[d] = (s, n)
                continue
            parts = item.split(":")
            head, ranges = parts[0].lower(), parts[1:]
            if ranges and not ranges[0][:1].isdigit():  # a tag
                head, ranges = f"{head}:{ranges[0]}", ranges[1:]
            for r in ranges:
                lo, _, hi = r.partition("-")
                st._add_range(head, int(lo), int(hi or lo))
        return st

    def copy(self) -> "GtidState":
        return GtidState(self.mariadb, dict(self.domains),
                         {k: [list(iv) for iv in v] for k, v in self.sets.items()})

    def add(self, gtid: str) -> None:
        """One committed transaction's GTID (MariaDB ``d-s-n``, MySQL ``uuid[:tag]:n``)."""
        if self.mariadb:
            d, s, n = (int(x) for x in gtid.split("-"))
            self.domains[d] = (s, n)
            return
        head, _, n = gtid.rpartition(":")
        self._add_range(head.lower(), int(n), int(n))

    def _add_range(self, head: str, lo: int, hi: int) -> None:
        ivs = self.sets.setdefault(head, [])
        ivs.append([lo, hi])
        ivs.sort()
        merged: list[list[int]] = []
        for a, b in ivs:
            if merged and a <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.sets[head] = merged

    def issubset(self, other: "GtidState") -> bool:
        """MySQL sets: every GTID of self is in ``other``."""
        for head, ivs in self.sets.items():
            theirs = other.sets.get(head, [])
            for a, b in ivs:
                if not any(x <= a and b <= y for x, y in theirs):
                    return False
        return True

    def behind(self, start: "GtidState") -> list[str]:
        """MariaDB: the domains whose streamed position lies before ``start`` (events between
        are gone). A domain ``start`` does not know is not behind."""
        out = []
        for d, (s, n) in sorted(self.domains.items()):
            if d in start.domains and start.domains[d][1] > n:
                out.append(f"{d}-{s}-{n}")
        return out

    def __bool__(self) -> bool:
        return bool(self.domains or self.sets)

    def __str__(self) -> str:
        if self.mariadb:
            return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(self.domains.items()))
        return ",".join(head + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in ivs)
                        for head, ivs in sorted(self.sets.items()))
