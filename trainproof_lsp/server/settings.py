"""Editor settings (section "trainproof"), typed and parsed with cattrs.

They arrive three ways: `initializationOptions`, the answer to `workspace/configuration`,
and `workspace/didChangeConfiguration`. A bad value never stops the server: it falls
back to its default and the user gets one message naming the setting.

Rule selection and limits are not editor settings: they live in `[tool.trainproof]`
(pyproject.toml), where the command line and CI read them too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

import logging

import cattrs

SECTION = "trainproof"
log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Settings:
    # VS Code shows at most 1000 problems per file and a person reads far fewer; the rest
    # are summarised by one diagnostic that says how to see them all.
    max_diagnostics_per_file: int = 500
    # Re-check this long after the last keystroke; typing a line is one check, not twenty.
    debounce_ms: int = 200
    # How long the first analysis waits for the client's answer to workspace/configuration.
    configuration_timeout_ms: int = 1500
    # "Check environment" imports the training script's modules in a child process of
    # the user's interpreter: code from the workspace runs, so it is off unless the user
    # (or a trusted-workspace client) turns it on.
    check_environment: bool = False
    python: str | None = None  # the interpreter for environment checks
    env_timeout_s: float = 60.0
    # Python files judged as training scripts even without a framework import.
    entrypoints: tuple[str, ...] = ()
    baseline: str | None = None  # a known-good run for "Compare with baseline"
    config_file: str | None = None  # a TOML file instead of the nearest pyproject.toml
    vocab_size: int | None = None  # classes for TP-LOSS-ABOVE-UNIFORM
    # Log columns the readers' alias table misses, as "SERIES=NAME" (`--column`); on top of
    # `columns` in [tool.trainproof].
    columns: tuple[str, ...] = ()
    # Dataset keys that hold a training field, as "FIELD=KEY" (`--field`); on top of
    # `fields` in [tool.trainproof].
    fields: tuple[str, ...] = ()
    # The token map of a dataset (server/token_map.py, docs/token-map.md): the run's
    # tokenizer folder, max length, loss ("all", "assistant-only", "completion-only") and
    # the training script or YAML config the masking is read from. No tokenizer: no map.
    tokenizer: str | None = None
    max_len: int | None = None
    loss: str | None = None
    train_config: str | None = None
    rules_docs_url: str | None = None  # e.g. "https://example.org/rules.md#{id_lower}"
    # Size caps for huge or hostile files, by core.caps.Caps's field names (caps.py holds
    # the defaults and why); None: `[tool.trainproof.caps]` or the default.
    max_log_mb: int | None = None  # a metric log's size
    max_log_entries: int | None = None  # entries read from one log
    max_row_mb: int | None = None  # one CSV/JSONL row
    max_pickle_mb: int | None = None  # a checkpoint's pickle
    max_pickle_ops: int | None = None  # opcodes walked in that pickle
    max_inflate_mb: int | None = None  # a ZIP member, inflated
    max_tensors: int | None = None  # tensors listed from one checkpoint
    max_events: int | None = None  # scalar points read from one run's event files
    max_events_mb: int | None = None  # one run's event files, in all


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


# The client's spelling of each setting: its field name in camelCase (max_log_mb: maxLogMb).
_SNAKE_TO_CAMEL = {f.name: _camel(f.name) for f in dataclasses.fields(Settings)}
_CAMEL = {v: k for k, v in _SNAKE_TO_CAMEL.items()}
_RANGES: dict[str, tuple[float, float]] = {
    "max_diagnostics_per_file": (1, 100_000),
    "debounce_ms": (0, 10_000),
    "configuration_timeout_ms": (0, 60_000),
    "env_timeout_s": (1, 3600),
    "vocab_size": (2, 1 << 40),
    "max_len": (1, 1 << 24),
    **{cap: (1, 1 << 40) for cap in ("max_log_mb", "max_log_entries", "max_row_mb", "max_pickle_mb",
                                     "max_pickle_ops", "max_inflate_mb", "max_tensors", "max_events",
                                     "max_events_mb")},
}

_converter = cattrs.Converter(forbid_extra_keys=True)


def _strict_structure(value: Any, kind: Any) -> Any:
    # cattrs would turn "12" into 12 and 1.7 into 1; a setting of the wrong type is the
    # user's mistake to hear about, not to have guessed.
    base = kind
    optional = False
    if getattr(kind, "__args__", None) and type(None) in kind.__args__:
        optional = True
        base = next(a for a in kind.__args__ if a is not type(None))
    if value is None:
        if optional:
            return None
        raise TypeError("must not be null")
    if base is bool and not isinstance(value, bool):
        raise TypeError("must be true or false")
    if base is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError("must be a whole number")
    if base is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise TypeError("must be a number")
    if base is str and not isinstance(value, str):
        raise TypeError("must be a string")
    if getattr(base, "__origin__", None) is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError("must be a list of strings")
    return _converter.structure(value, kind)


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a client's JSON, and one message per value that was not usable."""
    base = base or Settings()
    if raw is None:
        return base, []
    if isinstance(raw, Mapping) and isinstance(raw.get(SECTION), Mapping):
        raw = raw[SECTION]  # {"trainproof": {...}} as some clients nest it
    if not isinstance(raw, Mapping):
        return base, [f"settings for {SECTION} must be an object; using defaults"]
    types = {f.name: f.type for f in dataclasses.fields(Settings)}
    hints = _hints()
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        name = _CAMEL.get(key, key if key in types else None)
        if name is None:
            # Clients keep their own settings in the same section (VS Code: interpreter,
            # importStrategy, trace): not the server's to judge, only to ignore.
            log.info("setting %s.%s is not the server's; ignored", SECTION, key)
            continue
        try:
            parsed = _strict_structure(value, hints[name])
        except Exception as e:  # a wrong type of any kind: keep the default
            problems.append(f"{SECTION}.{_SNAKE_TO_CAMEL.get(name, name)}: {_reason(e)}; "
                            f"using {getattr(base, name)!r}")
            continue
        bounds = _RANGES.get(name)
        if bounds and parsed is not None and not bounds[0] <= parsed <= bounds[1]:
            problems.append(f"{SECTION}.{_SNAKE_TO_CAMEL.get(name, name)}: {parsed} is outside "
                            f"{bounds[0]:g}..{bounds[1]:g}; using {getattr(base, name)!r}")
            continue
        values[name] = parsed
    return dataclasses.replace(base, **values), problems


def _reason(e: Exception) -> str:
    text = str(e) or type(e).__name__
    return text.splitlines()[0]


def _hints() -> dict[str, Any]:
    import typing

    return typing.get_type_hints(Settings)


def settings_json(settings: Settings) -> dict[str, Any]:
    """Settings as the client spells them (for `show server info`)."""
    return {_SNAKE_TO_CAMEL[f.name]: _converter.unstructure(getattr(settings, f.name))
            for f in dataclasses.fields(Settings)}
