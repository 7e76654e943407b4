"""Settings files: `[tool.trainproof]` in pyproject.toml (or a file given with --config),
read and checked against the rule registry, into a core Config.

    [tool.trainproof]
    select = ["TP-DIVERGE", "TP-NAN"]     # only these rules (default: all)
    ignore = ["TP-GRAD-SPIKE"]            # never these
    vocab_size = 151936                   # classes for TP-LOSS-ABOVE-UNIFORM / TP-AT-CHANCE
    num_classes = 2                       # the same, said of a classifier's labels (one of the two)
    baseline = "runs/known-good"          # compare runs with this one (relative to this file)
    columns = {loss = "MyLoss", eval_loss = "Dev NLL"}   # log columns the alias table misses
    fields = {text = "content"}          # dataset keys that hold a training field (--field)

    [tool.trainproof.caps]                # size caps for huge or hostile files (core/caps.py)
    max_log_mb = 1024

    [tool.trainproof.limits.TP-DIVERGE]  # per-rule limits, by the names `rules ID` shows
    max_ratio = 2.0

Here, not in core/config.py, because the rule IDs and limit names are the registry's:
core imports nothing above it. Command-line flags go on top (core/config.with_*).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]  # tomli is installed on 3.10 only; mypy checks as 3.10 from any interpreter

from ..core.caps import CapsError, caps_from_table
from ..core.config import Config, ConfigError, parse_columns, parse_fields
from ..rules import BY_ID


def _rule_ids(value: Any, key: str, where: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} must be a list of rule IDs")
    unknown = sorted(set(value) - set(BY_ID))
    if unknown:
        raise ConfigError(f"{where}: {key} names unknown rule(s) {', '.join(unknown)} "
                          "(see `trainproof-lsp rules`)")
    return frozenset(value)


def from_table(table: Mapping[str, Any], where: str) -> Config:
    known = {"select", "ignore", "limits", "vocab_size", "num_classes", "baseline", "caps", "columns", "fields"}
    extra = sorted(set(table) - known)
    if extra:
        raise ConfigError(f"{where}: unknown setting(s) {', '.join(extra)}; known: {', '.join(sorted(known))}")
    select = _rule_ids(table["select"], "select", where) if "select" in table else None
    ignore = _rule_ids(table.get("ignore", []), "ignore", where)
    limits: dict[str, dict[str, Any]] = {}
    raw_limits = table.get("limits", {})
    if not isinstance(raw_limits, dict):
        raise ConfigError(f"{where}: limits must be a table of rule IDs")
    for rule_id, values in raw_limits.items():
        rule = BY_ID.get(rule_id)
        if rule is None:
            raise ConfigError(f"{where}: limits.{rule_id}: unknown rule")
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: limits.{rule_id} must be a table")
        fields = {f.name: f for f in dataclasses.fields(rule.limits)}
        for name, value in values.items():
            if name not in fields:
                raise ConfigError(f"{where}: limits.{rule_id}.{name}: unknown limit; "
                                  f"known: {', '.join(fields) or 'none'}")
            default = getattr(rule.limits(), name)
            if isinstance(default, bool) or not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ConfigError(f"{where}: limits.{rule_id}.{name} must be a number")
            if isinstance(default, int) and not isinstance(value, int):
                raise ConfigError(f"{where}: limits.{rule_id}.{name} must be a whole number")
        limits[rule_id] = dict(values)
    if "vocab_size" in table and "num_classes" in table:
        raise ConfigError(f"{where}: set vocab_size or num_classes, not both (they set the same bound)")
    key = "num_classes" if "num_classes" in table else "vocab_size"
    vocab = table.get(key)
    if vocab is not None and (not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 2):
        raise ConfigError(f"{where}: {key} must be a whole number >= 2")
    baseline = table.get("baseline")
    if baseline is not None:
        if not isinstance(baseline, str) or not baseline.strip():
            raise ConfigError(f"{where}: baseline must be the path of a known-good run's log or folder")
        baseline = str(Path(where).parent / baseline)  # an absolute path stays as it is
    try:
        caps = caps_from_table(table.get("caps", {}), where)
    except CapsError as e:
        raise ConfigError(str(e)) from None
    columns = parse_columns(table.get("columns", {}), f"{where}: columns")
    field_map = parse_fields(table.get("fields", {}), f"{where}: fields")
    return Config(select=select, ignore=ignore, limits=limits, vocab_size=vocab,
                  vocab_source=f"{key} in {where}" if vocab else None, source=where,
                  baseline=baseline, caps=caps, columns=columns, fields=field_map)


def load_file(path: Path) -> Config:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: invalid TOML ({e})") from None
    table = doc.get("tool", {}).get("trainproof") if path.name == "pyproject.toml" else \
        doc.get("tool", {}).get("trainproof", doc)
    return from_table(table or {}, str(path))


def discover(start: Path) -> Config:
    """The nearest pyproject.toml with a [tool.trainproof] table, from `start` upwards."""
    folder = start if start.is_dir() else start.parent
    for candidate in [folder, *folder.parents]:
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            try:
                doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
                continue
            table = doc.get("tool", {}).get("trainproof")
            if table is not None:
                return from_table(table, str(pyproject))
    return Config()


__all__ = ["from_table", "load_file", "discover", "Config", "ConfigError"]
