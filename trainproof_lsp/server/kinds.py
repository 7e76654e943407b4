"""What an open document is, for the server: the engine's detection decides, the server
only adds the two kinds the engine does not see as files to judge (training scripts and
model/tokenizer configs) and which optional engine modules can judge them.

    kind        judged by                                    shown as
    metrics     engine.judge_file (buffer)                   diagnostics, hover, lenses
    dataset     preflight.judge_dataset (buffer), if present  diagnostics, summary lens
    script      nothing on open; env check on command        lenses
    config      nothing in this version                      a doctor lens
    binary      from disk (doctor, watched files)            diagnostics on its own URI
    other       nothing                                      nothing
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from ..detect import HEAD_BYTES, detect

# `import torch`, `from transformers import Trainer`, `import lightning.pytorch as pl`...
_FRAMEWORK_IMPORT = re.compile(
    rb"^\s*(?:from|import)\s+(?:transformers|trl|peft|accelerate|lightning|pytorch_lightning|"
    rb"torch|keras|tensorflow|axolotl|TTS|trainer|deepspeed|unsloth|datasets)\b", re.M)
_CONFIG_NAMES = frozenset({"config.json", "generation_config.json", "adapter_config.json",
                           "tokenizer_config.json", "special_tokens_map.json",
                           "tokenizer.json", "preprocessor_config.json"})


@dataclass(frozen=True, slots=True)
class DocKind:
    kind: str  # metrics | dataset | script | config | binary | other
    format: str
    reason: str = ""


def kind_of(path: Path, head: bytes, entrypoints: tuple[str, ...] = ()) -> DocKind:
    head = head[:HEAD_BYTES]
    if path.suffix == ".py":
        configured = any(path.match(e) or str(path).endswith(e.lstrip("./")) for e in entrypoints)
        if configured or _FRAMEWORK_IMPORT.search(head):
            return DocKind("script", "python")
        return DocKind("other", "python")
    if path.name in _CONFIG_NAMES:
        return DocKind("config", path.name)
    detected = detect(path, head)
    if detected.kind == "metrics":
        return DocKind("metrics", detected.format)
    if detected.kind == "dataset":
        return DocKind("dataset", detected.format, detected.reason)
    if detected.kind in ("tfevents", "checkpoint"):
        return DocKind("binary", detected.format, detected.reason)
    return DocKind("other", detected.format, detected.reason)


def optional_module(name: str):
    """An engine module another part of the project provides (preflight, compare,
    envcheck), or None while this version does not have it."""
    full = f"trainproof_lsp.{name}"
    if importlib.util.find_spec(full) is None:
        return None
    try:
        return importlib.import_module(full)
    except Exception:  # a half-installed module must not take the server down
        return None
