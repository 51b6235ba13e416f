"""Data-quality rules as data: ``conf/quality.toml`` → typed :class:`Rule` objects.

The file maps rule name → dataset → expectation → action::

    [rules.pk_hash_is_sha256]
    description = "pk_hash = sha2(pk_values, 256)"
    action = "fail"                      # default for the datasets below

    [rules.pk_hash_is_sha256.silver]     # one dataset: silver or quarantine
    expect = "equal"                     # what great-expectations checks
    column = "pk_hash"
    expr = "sha2(pk_values, 256)"

Expectation kinds (each is one great-expectations 1.x expectation, see ``checks``):

==============  ==========================  ===========================================
``expect``      fields                      great-expectations
==============  ==========================  ===========================================
``not_null``    ``column``                  ExpectColumnValuesToNotBeNull
``null``        ``column``                  ExpectColumnValuesToBeNull
``in_set``      ``column``, ``values``      ExpectColumnValuesToBeInSet
``unique``      ``columns``                 ExpectCompoundColumnsToBeUnique (one column:
                                            ExpectColumnValuesToBeUnique)
``equal``       ``column``, ``expr``        ExpectColumnPairValuesToBeEqual (column vs the
                                            SQL expression's value)
``condition``   ``condition``               ExpectColumnValuesToBeInSet([true]) on the SQL
                                            boolean (NULL counts as false)
==============  ==========================  ===========================================

Every kind takes an optional ``when`` (SQL): only rows where it holds are checked (GE's
``row_condition``). Actions: ``warn`` (record), ``quarantine`` (record and list every failing
row's key in ``<lake>/quality/failures`` for consumers to exclude), ``fail`` (the run exits
non-zero). SQL is checked against the dataset when the rules run; a bad expression raises
:class:`ConfigError` naming the rule.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Mapping

from pipelines.config import read_toml
from pipelines.errors import ConfigError

__all__ = ["Action", "Expect", "Rule", "RuleSet", "DATASETS", "DEFAULT_RULES", "load_rules",
           "parse_rules"]

DATASETS = ("silver", "quarantine")
DEFAULT_RULES = Path("conf/quality.toml")
_REPO_RULES = Path(__file__).resolve().parents[2] / "conf" / "quality.toml"


class Action(StrEnum):
    WARN = "warn"
    QUARANTINE = "quarantine"
    FAIL = "fail"


class Expect(StrEnum):
    NOT_NULL = "not_null"
    NULL = "null"
    IN_SET = "in_set"
    UNIQUE = "unique"
    EQUAL = "equal"
    CONDITION = "condition"


# kind → (required fields, optional fields) besides expect/action/description/when
_FIELDS: dict[Expect, tuple[frozenset[str], frozenset[str]]] = {
    Expect.NOT_NULL: (frozenset({"column"}), frozenset()),
    Expect.NULL: (frozenset({"column"}), frozenset()),
    Expect.IN_SET: (frozenset({"column", "values"}), frozenset()),
    Expect.UNIQUE: (frozenset({"columns"}), frozenset()),
    Expect.EQUAL: (frozenset({"column", "expr"}), frozenset()),
    Expect.CONDITION: (frozenset({"condition"}), frozenset()),
}
_COMMON = frozenset({"expect", "action", "description", "when"})


@dataclass(frozen=True)
class Rule:
    """One expectation on one dataset; ``name`` + ``dataset`` identify its results."""

    name: str
    dataset: str
    expect: Expect
    action: Action
    description: str = ""
    column: str | None = None
    columns: tuple[str, ...] = ()
    values: tuple[Any, ...] = ()
    expr: str | None = None
    condition: str | None = None
    when: str | None = None

    @property
    def label(self) -> str:
        return f"{self.name} ({self.dataset})"

    @property
    def check(self) -> str:
        """The rule in one line, e.g. ``equal(pk_hash, sha2(pk_values, 256))``."""
        one = lambda text: " ".join(text.split())  # noqa: E731 - SQL from TOML may span lines
        args = {Expect.NOT_NULL: lambda: self.column, Expect.NULL: lambda: self.column,
                Expect.IN_SET: lambda: f"{self.column} in {list(self.values)}",
                Expect.UNIQUE: lambda: ", ".join(self.columns),
                Expect.EQUAL: lambda: f"{self.column} = {one(self.expr or '')}",
                Expect.CONDITION: lambda: one(self.condition or "")}[self.expect]()
        text = f"{self.expect.value}({args})"
        return text + (f" when {one(self.when)}" if self.when else "")

    @property
    def columns_used(self) -> tuple[str, ...]:
        """Dataset columns the rule names directly (SQL expressions are checked by Spark)."""
        if self.expect is Expect.UNIQUE:
            return self.columns
        return (self.column,) if self.column else ()


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    sample_rows: int = 20  # failing keys kept per rule (all of them for `quarantine` rules)
    source: str = ""

    def for_dataset(self, dataset: str) -> list[Rule]:
        return [r for r in self.rules if r.dataset == dataset]


def _where(name: str, dataset: str | None) -> str:
    return f"quality rule {name}" + (f" ({dataset})" if dataset else "")


def _text(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {what} must be a non-empty string, got {value!r}")
    return value


def _rule(name: str, dataset: str, body: Mapping[str, Any], defaults: Mapping[str, Any]) -> Rule:
    where = _where(name, dataset)
    if not isinstance(body, Mapping):
        raise ConfigError(f"{where}: expected a table, got {body!r}")
    merged = {**defaults, **body}
    try:
        expect = Expect(merged.get("expect"))
    except ValueError:
        raise ConfigError(f"{where}: expect must be one of "
                          f"{', '.join(e.value for e in Expect)}, got {merged.get('expect')!r}"
                          ) from None
    try:
        action = Action(merged.get("action"))
    except ValueError:
        raise ConfigError(f"{where}: action must be warn, quarantine or fail, got "
                          f"{merged.get('action')!r}") from None
    required, optional = _FIELDS[expect]
    unknown = set(body) - _COMMON - required - optional
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                          f"for expect = \"{expect.value}\"")
    missing = required - set(body)
    if missing:
        raise ConfigError(f"{where}: expect = \"{expect.value}\" needs "
                          f"{', '.join(sorted(missing))}")
    fields: dict[str, Any] = {}
    if "column" in body:
        fields["column"] = _text(body["column"], "column", where)
    if "columns" in body:
        cols = body["columns"]
        if not isinstance(cols, list) or not cols or not all(isinstance(c, str) and c
                                                             for c in cols):
            raise ConfigError(f"{where}: columns must be a non-empty list of names, got {cols!r}")
        fields["columns"] = tuple(cols)
    if "values" in body:
        vals = body["values"]
        if not isinstance(vals, list) or not vals:
            raise ConfigError(f"{where}: values must be a non-empty list, got {vals!r}")
        fields["values"] = tuple(vals)
    for key in ("expr", "condition", "when"):
        if key in body:
            fields[key] = _text(body[key], key, where)
    description = merged.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{where}: description must be a string")
    return Rule(name=name, dataset=dataset, expect=expect, action=action,
                description=description, **fields)


def parse_rules(data: Mapping[str, Any], *, source: str = "") -> RuleSet:
    """Build a :class:`RuleSet` from the parsed TOML; raises :class:`ConfigError` naming the
    bad rule (or section)."""
    unknown = set(data) - {"rules", "report"}
    if unknown:
        raise ConfigError(f"{source or 'quality rules'}: unknown section(s) "
                          f"{', '.join(sorted(unknown))}")
    report = data.get("report", {})
    sample_rows = report.get("sample_rows", 20) if isinstance(report, Mapping) else None
    if not isinstance(sample_rows, int) or isinstance(sample_rows, bool) or sample_rows < 0:
        raise ConfigError(f"{source or 'quality rules'}: report.sample_rows must be an "
                          f"integer >= 0, got {sample_rows!r}")
    rules_data = data.get("rules", {})
    if not isinstance(rules_data, Mapping) or not rules_data:
        raise ConfigError(f"{source or 'quality rules'}: no [rules.NAME.DATASET] tables")
    rules: list[Rule] = []
    for name, body in rules_data.items():
        if not isinstance(body, Mapping):
            raise ConfigError(f"{_where(name, None)}: expected a table")
        defaults = {k: v for k, v in body.items() if not isinstance(v, Mapping)}
        bad = set(defaults) - {"action", "description"}
        if bad:
            raise ConfigError(f"{_where(name, None)}: unknown key(s) {', '.join(sorted(bad))}; "
                              f"expectations go under [rules.{name}.<dataset>] with dataset "
                              f"one of {', '.join(DATASETS)}")
        datasets = {k: v for k, v in body.items() if isinstance(v, Mapping)}
        if not datasets:
            raise ConfigError(f"{_where(name, None)}: no dataset table "
                              f"([rules.{name}.silver] or [rules.{name}.quarantine])")
        for dataset, spec in datasets.items():
            if dataset not in DATASETS:
                raise ConfigError(f"{_where(name, dataset)}: unknown dataset; expected one of "
                                  f"{', '.join(DATASETS)}")
            rules.append(_rule(name, dataset, spec, defaults))
    return RuleSet(tuple(rules), sample_rows, source)


def load_rules(path: str | os.PathLike[str] | None = None) -> RuleSet:
    """Load the rules from ``path``, else ``BINLAKE_QUALITY_RULES``, else
    ``conf/quality.toml`` in the working directory, else the one beside this package.

    Raises :class:`ConfigError` when the file is missing, unreadable or invalid.
    """
    candidates = ([Path(path)] if path else
                  [Path(os.environ["BINLAKE_QUALITY_RULES"])]
                  if os.environ.get("BINLAKE_QUALITY_RULES") else
                  [DEFAULT_RULES, _REPO_RULES])
    for p in candidates:
        if p.is_file() or path or os.environ.get("BINLAKE_QUALITY_RULES"):
            return parse_rules(read_toml(p, what="quality rules"), source=str(p))
    raise ConfigError(f"quality rules: none of {', '.join(map(str, candidates))} exists")
