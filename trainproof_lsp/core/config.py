"""Settings as the judge uses them: which rules run, with which limits, and the run's
facts the flags and settings add (vocabulary size, baseline, caps, column names).

Reading `[tool.trainproof]` from pyproject.toml or a --config file, and checking its rule
IDs and limit names against the registry, is judge/settings.py's (a layer above: this
module imports nothing but core). Command-line flags and editor settings go on top with
the `with_*` functions below.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from .caps import DEFAULT_CAPS, Caps
from .model import SERIES_NAMES
from .objectives import OBJECTIVE_SERIES

# What a `columns` setting may name: the canonical series, and the step column
# (readers/metrics.MAPPABLE, which tests/test_architecture.py keeps equal to this).
MAPPABLE = (*SERIES_NAMES, *OBJECTIVE_SERIES, "step")  # with a DPO/GRPO run's reward series (core/objectives.py)
# What a `fields` setting may name: the training fields of the dataset formats
# (readers/dataset_records.MAPPABLE_FIELDS, which tests/test_field_mapping.py keeps equal).
DATASET_FIELDS = ("chosen", "completion", "conversations", "input", "instruction", "messages", "output", "prompt",
                  "rejected", "text")


class RuleSettings(Protocol):
    """What the settings need of a rule (rules/base.Rule has both)."""

    @property
    def id(self) -> str: ...

    @property
    def limits(self) -> type: ...


class ConfigError(Exception):
    """A setting that cannot be used; the message names the file and the key."""


@dataclass(frozen=True, kw_only=True)
class Config:
    select: frozenset[str] | None = None
    ignore: frozenset[str] = frozenset()
    limits: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    vocab_size: int | None = None
    vocab_source: str | None = None
    source: str | None = None  # the file the settings came from
    # A known-good run to compare with (`compare`, `doctor`); relative paths in a config
    # file are relative to that file, so the editor and CI resolve the same run.
    baseline: str | None = None
    # Size caps for hostile or huge files (caps.py): over a cap is NOT-CHECKED.
    caps: Caps = DEFAULT_CAPS
    # Canonical series (loss, eval_loss, lr, grad_norm, ..., or step) -> the column, key or
    # tag a log names it by, for names the readers' alias table does not know.
    columns: Mapping[str, str] = field(default_factory=dict)
    # Dataset training field (text, messages, prompt, ...) -> the key the user's rows hold
    # it under (`--field text=content`), for datasets in their own shape.
    fields: Mapping[str, str] = field(default_factory=dict)

    def enabled(self, rule: RuleSettings) -> bool:
        if rule.id in self.ignore:
            return False
        return self.select is None or rule.id in self.select

    def limits_for(self, rule: RuleSettings) -> Any:
        base = rule.limits()
        override = self.limits.get(rule.id)
        return dataclasses.replace(base, **override) if override else base


def parse_columns(value: Any, where: str) -> dict[str, str]:
    """The `columns` setting: a table {series = "column name"} (TOML), or "series=name"
    strings (`--column`, the editor setting). Series are the canonical names."""
    pairs: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        for item in value:
            series, sep, name = item.partition("=")
            if not sep:
                raise ConfigError(f"{where}: {item!r} is not SERIES=COLUMN (e.g. loss=MyLoss)")
            pairs.append((series.strip(), name.strip()))
    else:
        raise ConfigError(f"{where} must map series to column names, e.g. {{loss = \"MyLoss\"}}")
    out: dict[str, str] = {}
    for series, name in pairs:
        if series not in MAPPABLE:
            raise ConfigError(f"{where}: unknown series {series!r}; known: {', '.join(MAPPABLE)}")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where}: {series} must name a column (a non-empty string)")
        out[series] = name
    return out


def parse_fields(value: Any, where: str) -> dict[str, str]:
    """The `fields` setting: a table {field = "key"} (TOML), or "field=key" strings
    (`--field`, the editor setting). Fields are the formats' own names."""
    pairs: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        for item in value:
            name, sep, key = item.partition("=")
            if not sep:
                raise ConfigError(f"{where}: {item!r} is not FIELD=KEY (e.g. text=content)")
            pairs.append((name.strip(), key.strip()))
    else:
        raise ConfigError(f"{where} must map training fields to your keys, e.g. {{text = \"content\"}}")
    out: dict[str, str] = {}
    for name, key in pairs:
        if name not in DATASET_FIELDS:
            raise ConfigError(f"{where}: unknown training field {name!r}; known: {', '.join(DATASET_FIELDS)}")
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(f"{where}: {name} must name a key of your rows (a non-empty string)")
        out[name] = key
    return out


def with_fields(config: Config, fields: "list[str] | tuple[str, ...] | None", where: str) -> Config:
    """`--field FIELD=KEY` (or the editor setting) on top of the file's `fields`."""
    if not fields:
        return config
    return dataclasses.replace(config, fields={**config.fields, **parse_fields(list(fields), where)})


def with_columns(config: Config, columns: "list[str] | tuple[str, ...] | None", where: str) -> Config:
    """`--column SERIES=NAME` (or the editor setting) on top of the file's `columns`."""
    if not columns:
        return config
    return dataclasses.replace(config, columns={**config.columns, **parse_columns(list(columns), where)})


def with_vocab(config: Config, vocab_size: int | None, *, source: str = "--vocab-size") -> Config:
    if vocab_size is None:
        return config
    return dataclasses.replace(config, vocab_size=vocab_size, vocab_source=source)


def with_caps(config: Config, overrides: Any) -> Config:
    """Caps set elsewhere (the editor's settings: attributes named like Caps fields, None
    for "not set") on top of the file's."""
    values = {f.name: getattr(overrides, f.name) for f in dataclasses.fields(Caps)
              if getattr(overrides, f.name, None) is not None}
    if not values:
        return config
    return dataclasses.replace(config, caps=dataclasses.replace(config.caps, **values))


def keep_security(config: Config, security: "frozenset[str] | set[str]") -> tuple[Config, tuple[str, ...]]:
    """The settings with every security rule (rules' `security`, by ID) enabled again, and
    the IDs the settings had turned off (by `ignore`, or left out of `select`), sorted.

    A settings file found in the tree being checked is the tree's: in CI, a pull request
    could add `ignore = ["TP-CKPT-UNSAFE-PICKLE"]` beside the checkpoint it adds. Only the
    command line may turn a security rule off (cli.py: --allow-config-to-disable-security,
    --ignore ID)."""
    off = sorted(i for i in security if i in config.ignore or (config.select is not None and i not in config.select))
    if not off:
        return config, ()
    select = None if config.select is None else config.select | frozenset(off)
    return dataclasses.replace(config, select=select, ignore=config.ignore - frozenset(off)), tuple(off)


def with_ignored(config: Config, ids: "list[str] | tuple[str, ...] | None") -> Config:
    """Rules turned off on the command line (`--ignore ID`), on top of the settings."""
    if not ids:
        return config
    return dataclasses.replace(config, ignore=config.ignore | frozenset(ids))
