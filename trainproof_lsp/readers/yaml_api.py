"""A LLaMA-Factory (or axolotl) training YAML against the schema its installed version parses.

`llamafactory-cli train config.yaml` loads the YAML into a dict and hands it to
transformers' HfArgumentParser over five dataclasses (llamafactory.hparams: ModelArguments,
DataArguments, TrainingArguments, FinetuningArguments, GeneratingArguments), which refuses
any key none of them has ("Some keys are not used by the HfArgumentParser") before a model
is loaded. `env --entrypoint config.yaml` reads the YAML's top-level keys here (their
lines and literal values) and has the signature probe child (import_probe_child.py, the
one that reads a script's library classes) read those five classes' fields in the run's
interpreter: never called, nothing from the workspace imported, llamafactory never
imported in this process. The five signatures are merged into one (a key binds when any
class has it), so rules/script_api.py judges the YAML's keys as it judges a call's.

Shape read (LLaMA-Factory's example configs are flat):

    ### model                          <- comments and blank lines skipped
    model_name_or_path: Qwen/Qwen2.5-0.5B
    stage: sft                         <- key at column 0, `: `, a scalar
    lora_target: all
    eval_strategy: "steps"             <- quoted scalars unquoted

Indented lines (nested blocks, list items) are values of the key above them, not keys.

An axolotl config (`axolotl train config.yml`) is read the same way and its keys are bound
to the field names (and aliases) of the installed axolotl's pydantic schema,
axolotl.utils.schemas.config.AxolotlInputConfig, which the probe child reads from
`model_fields` without instantiating it. That schema does not forbid extra keys: axolotl
validates the config and drops the keys it does not know, so a misspelt key is not an
error there but a setting that never takes effect (rules/script_api.py's
TP-CONFIG-KEY-IGNORED, a WARN).

Not checked: an axolotl config that names `plugins` (each plugin adds its own keys to the
schema when axolotl loads it), and keys given on the command line after the file
(`llamafactory-cli train config.yaml key=value`, `axolotl train config.yml --key=value`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.caps import not_regular
from ..core.model import ReadError, Span
from .envcheck import ApiProbe, EnvFacts, EnvRequest, PythonUnusable, Signature, collect, run_items
from .script import ApiCall, ApiKeyword, Value

MODULE = "llamafactory.hparams"
# The classes `get_train_args` parses a training config into (llamafactory/hparams/parser.py
# _TRAIN_ARGS), in its order.
CLASSES = ("ModelArguments", "DataArguments", "TrainingArguments", "FinetuningArguments", "GeneratingArguments")
ATTR = "+".join(CLASSES)  # the merged "class" a YAML config is bound to (rules/script_api.py)
# Of these, the class that converts its Enum | str fields on construction (transformers'
# TrainingArguments, which LLaMA-Factory's subclasses): a string outside the Enum raises
# there. LLaMA-Factory's own classes may take any string where the annotation says str too.
CONVERTS = "TrainingArguments"

# A YAML config is a few kilobytes; past this it is not a training config.
MAX_BYTES = 1 << 20

# axolotl's config schema: a pydantic model whose fields are the keys of a config file
# (axolotl/utils/config/__init__.py validate_config validates the loaded YAML with it).
AXOLOTL_MODULE = "axolotl.utils.schemas.config"
AXOLOTL_CLASS = "AxolotlInputConfig"

# Keys only LLaMA-Factory's configs use (its own argument names), and keys every HF run
# config has. One of the first and three in all make a LLaMA-Factory training config;
# axolotl's own keys (base_model, datasets, sequence_len) make it not one.
_OWN = frozenset({"stage", "finetuning_type", "template", "cutoff_len", "lora_target", "dataset_dir"})
_COMMON = frozenset({"model_name_or_path", "dataset", "output_dir", "do_train", "per_device_train_batch_size"})
_AXOLOTL = frozenset({"base_model", "datasets", "sequence_len", "micro_batch_size", "sample_packing"})

_KEY = re.compile(r"^(?P<q>['\"]?)(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)(?P=q)\s*:(?:\s+|$)(?P<rest>.*)$")


@dataclass(frozen=True, kw_only=True)
class YamlConfig:
    path: str
    keys: tuple[ApiKeyword, ...]  # top-level keys, in file order, with their lines
    kind: str  # "llama-factory" | "axolotl" | "yaml"


def read_yaml_config(path: Path, data: bytes | None = None) -> YamlConfig:
    """The top-level keys of a YAML config, with their literal values. ReadError when the
    file cannot be read or is not UTF-8 text."""
    if data is None:
        irregular = not_regular(path)
        if irregular:
            raise ReadError(f"{path}: {irregular}")
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
        except OSError as e:
            raise ReadError(f"{path}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_BYTES:
        raise ReadError(f"{path}: over {MAX_BYTES >> 20} MiB, not a training config")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ReadError(f"{path}: not UTF-8 text") from None
    keys: list[ApiKeyword] = []
    seen: set[str] = set()
    for i, raw in enumerate(text.splitlines()):
        line = raw.rstrip()
        if not line or line[0] in " \t#-" or line.startswith(("---", "...")):
            continue
        m = _KEY.match(line)
        if m is None or m.group("key") in seen:
            continue
        seen.add(m.group("key"))
        start = m.start("key")
        rest = m.group("rest")
        value_text = _without_comment(rest)
        vstart = m.start("rest")
        value = _scalar(value_text)
        keys.append(ApiKeyword(
            name=m.group("key"), name_span=Span(i, start, i, start + len(m.group("key"))),
            value=Value(known=value is not _UNKNOWN, value=None if value is _UNKNOWN else value,
                        span=Span(i, vstart, i, vstart + len(value_text)), text=value_text)))
    names = {k.name for k in keys}
    kind = "axolotl" if names & _AXOLOTL and not names & _OWN else \
        "llama-factory" if names & _OWN and len(names & (_OWN | _COMMON)) >= 3 else "yaml"
    return YamlConfig(path=str(path), keys=tuple(keys), kind=kind)


_UNKNOWN = object()


def _without_comment(rest: str) -> str:
    if rest and rest[0] in "'\"":
        end = rest.find(rest[0], 1)
        return rest[:end + 1] if end > 0 else rest.strip()
    return rest.split(" #", 1)[0].strip()


def _scalar(text: str) -> Any:
    """A plain or quoted YAML scalar; _UNKNOWN for anything else (a block, a flow
    collection, an anchor, an OmegaConf interpolation)."""
    if not text or text[0] in "[{&*!|>" or "${" in text:
        return _UNKNOWN
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _enabled(name: str) -> bool:
    # LLaMA-Factory's is_env_enabled: the variable set to one of these turns the feature on
    return os.environ.get(name, "0").lower() in ("true", "y", "1")


def is_config_entry(entrypoint: Path | None) -> bool:
    """`env --entrypoint` names a YAML config, not a script."""
    return entrypoint is not None and entrypoint.suffix in (".yaml", ".yml")


def collect_config(req: EnvRequest) -> EnvFacts:
    """`env --entrypoint config.yaml`: the machine's measures as for a script, and the
    config's keys against the installed LLaMA-Factory (or axolotl) instead of the script's imports."""
    assert req.entrypoint is not None
    facts = collect(dataclasses.replace(req, entrypoint=None, module=None))  # memory, disk, GPUs only
    facts = dataclasses.replace(facts, path=str(req.entrypoint), imports_requested=True)
    cwd = req.cwd.resolve() if req.cwd is not None else Path.cwd()
    if not cwd.is_dir():
        return dataclasses.replace(facts, cwd_missing=True)
    config = req.entrypoint if req.entrypoint.is_absolute() else cwd / req.entrypoint
    if not config.is_file():
        return dataclasses.replace(facts, entry_error=f"{req.entrypoint}: no such file")
    return collect_yaml(facts, config, str(req.entrypoint), req.python or sys.executable, req.timeout_s,
                        forbid=(str(cwd), str(config.parent)))


def collect_yaml(facts: EnvFacts, config_path: Path, shown: str, python: str, timeout: float,
                 forbid: tuple[str, ...]) -> EnvFacts:
    """`env` on a YAML training config: its keys against the installed LLaMA-Factory's
    argument classes, read in the probe child. `api_error` says why they were not."""
    try:
        config = read_yaml_config(config_path)
    except ReadError as e:
        return dataclasses.replace(facts, entry_error=str(e))
    if config.kind == "axolotl":
        return _collect_axolotl(facts, config, shown, python, timeout, forbid)
    if config.kind != "llama-factory":
        return dataclasses.replace(facts, api_error=f"{shown} is not a LLaMA-Factory training config (none of "
                                                    f"{', '.join(sorted(_OWN))} with two more of its keys)")
    strings = sorted(k.name for k in config.keys if k.value.known and isinstance(k.value.value, str))
    items = [{"id": i, "kind": "signature", "module": MODULE, "attr": cls, "strings": strings}
             for i, cls in enumerate(CLASSES)]
    python = _absolute(python)
    facts, results = _run(facts, python, items, timeout, forbid)
    if results is None:
        return facts
    failed = [results.get(i, {"kind": "exception", "message": "no result"}) for i in range(len(CLASSES))
              if not results.get(i, {}).get("ok")]
    if failed:
        return dataclasses.replace(facts, api_error=f"llamafactory's argument classes cannot be imported by {python} "
                                                    f"({_why(failed[0])})")
    params: list[str] = []
    choices: list[tuple[str, tuple[str, ...], bool]] = []
    for i, cls in enumerate(CLASSES):
        r = results[i]
        params.extend(str(p) for p in r.get("params", ()) if p not in params)
        for key, v in (r.get("choices") or {}).items():
            any_str = bool(v.get("any_str"))
            if any_str and cls != CONVERTS:
                continue  # the class keeps any string: not judged
            if all(c[0] != key for c in choices):
                choices.append((str(key), tuple(str(x) for x in v.get("values", ())), any_str))
    signature = Signature(
        outcome="ok", library="llamafactory", version=str(results[0].get("version", "") or ""),
        qualname=f"{MODULE} ({', '.join(CLASSES)})", params=tuple(params),
        # LLaMA-Factory takes any key when ALLOW_EXTRA_ARGS is on (the child's environment is this one)
        var_keyword=_enabled("ALLOW_EXTRA_ARGS"), choices=tuple(sorted(choices)))
    call = ApiCall(written=Path(shown).name, module=MODULE, attr=ATTR, span=Span(0, 0, 0, 0), keywords=config.keys)
    return dataclasses.replace(facts, api=(ApiProbe(call=call, path=shown, signature=signature),))


def _run(facts: EnvFacts, python: str, items: list[dict[str, Any]], timeout: float,
         forbid: tuple[str, ...]) -> tuple[EnvFacts, dict[int, Any] | None]:
    """The probe child's results for `items`, run from an empty folder, and the facts with
    its Python version; None (and the facts with the reason) when that Python cannot run."""
    with tempfile.TemporaryDirectory(prefix="trainproof-signatures-") as empty:
        try:
            results, version = run_items(python, empty, empty, items, timeout, forbid=forbid)
        except PythonUnusable as e:
            return dataclasses.replace(facts, python_error=str(e)), None
    return dataclasses.replace(facts, python_version=version or facts.python_version), results


def _why(result: dict[str, Any]) -> str:
    """A failed item's reason on one line, as the report gives it."""
    message = " ".join(str(result.get("message", "")).split())[:300]
    return f"{result.get('type') or result.get('kind', 'exception')}: {message}"


def _absolute(python: str) -> str:
    if os.sep in python or (os.altsep and os.altsep in python):
        return os.path.abspath(python)  # the child starts in another folder
    return python


def _collect_axolotl(facts: EnvFacts, config: YamlConfig, shown: str, python: str, timeout: float,
                     forbid: tuple[str, ...]) -> EnvFacts:
    """An axolotl config's keys against the field names of the installed axolotl's schema."""
    if any(k.name == "plugins" for k in config.keys):
        return dataclasses.replace(facts, api_error=f"{shown} names plugins, which add their own keys to axolotl's "
                                                    "schema when axolotl loads them")
    python = _absolute(python)
    items = [{"id": 0, "kind": "fields", "module": AXOLOTL_MODULE, "attr": AXOLOTL_CLASS}]
    facts, results = _run(facts, python, items, timeout, forbid)
    if results is None:
        return facts
    r = results.get(0, {"ok": False, "kind": "exception", "message": "no result"})
    if not r.get("ok"):
        return dataclasses.replace(facts, api_error=f"axolotl's config schema ({AXOLOTL_MODULE}.{AXOLOTL_CLASS}) "
                                                    f"cannot be imported by {python} ({_why(r)})")
    if r.get("extra") == "forbid":  # a schema that refuses unknown keys: not the ignored-key case judged here
        return dataclasses.replace(facts, api_error=f"axolotl {r.get('version', '')}'s config schema forbids unknown "
                                                    "keys (validation refuses them; not judged here)")
    signature = Signature(
        outcome="ok", library="axolotl", version=str(r.get("version", "") or ""),
        qualname=str(r.get("qualname") or f"{AXOLOTL_MODULE}.{AXOLOTL_CLASS}"),
        params=tuple(str(p) for p in r.get("params", ())))
    call = ApiCall(written=Path(shown).name, module=AXOLOTL_MODULE, attr=AXOLOTL_CLASS, span=Span(0, 0, 0, 0),
                   keywords=config.keys)
    return dataclasses.replace(facts, api=(ApiProbe(call=call, path=shown, signature=signature),))


def is_axolotl_call(call: ApiCall) -> bool:
    """An axolotl config bound to the installed axolotl's schema (not a script's call)."""
    return call.module == AXOLOTL_MODULE and call.attr == AXOLOTL_CLASS


def is_yaml_call(call: ApiCall) -> bool:
    """A YAML config bound to LLaMA-Factory's argument classes (not a script's call)."""
    return call.module == MODULE and call.attr == ATTR


__all__ = ["YamlConfig", "read_yaml_config", "collect_config", "collect_yaml", "is_config_entry", "is_yaml_call",
           "is_axolotl_call", "MODULE", "CLASSES", "AXOLOTL_MODULE", "AXOLOTL_CLASS"]
