"""LoRA's target_modules against the modules the model has.

Both rules read `ScriptFacts` (readers/script.py): the `LoraConfig(target_modules=...)`
call and the model the script loads, with the module names of its weights on disk
(model.safetensors.index.json or the safetensors headers beside its config.json; never
downloaded) — or, without weights, the names the architecture of its `model_type` uses.
Matching follows PEFT: a name in the list matches a module whose dotted name is it or ends
with "." + it; a string is a regular expression the whole name must match.
"""

from __future__ import annotations

import re
from typing import Iterator

from ..core.model import Hit, Level, Location, Related
from ..readers.script import ApiCall, ApiKeyword, ModelRef, ScriptFacts
from .base import Context, NoLimits, Rule, Skip
from .script import SCRIPT

# The linear layers of common architectures, by config.json model_type (the module names
# transformers' modeling files give them), for a model whose weights are not on disk.
_LLAMA_LIKE = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
KNOWN_MODULES: dict[str, tuple[str, ...]] = {
    **{t: _LLAMA_LIKE for t in ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
                                "smollm3", "olmo", "olmo2", "granite", "deepseek_v2", "cohere")},
    "phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),
    "phi": ("q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2"),
    "gpt2": ("c_attn", "c_proj", "c_fc"),
    "gpt_neox": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
    "falcon": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
    "bloom": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
    "opt": ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"),
    "t5": ("q", "k", "v", "o", "wi", "wo", "wi_0", "wi_1"),
    "mt5": ("q", "k", "v", "o", "wi_0", "wi_1", "wo"),
    "bert": ("query", "key", "value", "dense"),
    "roberta": ("query", "key", "value", "dense"),
}


def _lora_calls(facts: ScriptFacts) -> list[ApiCall]:
    return [c for c in facts.api_calls if c.attr.rsplit(".", 1)[-1] == "LoraConfig"]


def _target(facts: ScriptFacts) -> Iterator[tuple[ApiCall, ModelRef, tuple[str, ...], str]]:
    """(LoraConfig call, model, its module names, where they came from) for each call to judge."""
    calls = [c for c in _lora_calls(facts) if any(k.name == "target_modules" for k in c.keywords)]
    if not calls:
        raise Skip("no LoraConfig(target_modules=...) in the script")
    if len(facts.models) != 1:
        raise Skip(f"the script loads {len(facts.models)} models with from_pretrained: which one is adapted is "
                   "not known statically")
    (model,) = facts.models
    if model.modules:
        names, where = model.modules, f"the weights in {model.modules_from}"
    elif model.model_type in KNOWN_MODULES:
        names, where = KNOWN_MODULES[model.model_type], f"the {model.model_type} architecture's known layers"
    elif model.config:
        raise Skip(f"{model.text}: no weights beside {model.config} and model_type "
                   f"{model.model_type!r} has no known layer names")
    else:
        raise Skip(f"the model's config.json is not on disk ({model.text})")
    for c in calls:
        yield c, model, names, where


def _matches(target: str, module: str) -> bool:
    return module == target or module.endswith("." + target)


def _judged(facts: ScriptFacts) -> Iterator[tuple[ApiCall, ModelRef, str, list[str], list[str], ApiKeyword]]:
    for c, model, names, where in _target(facts):
        kw = next(k for k in c.keywords if k.name == "target_modules")
        v = kw.value
        if not v.known or v.value == "all-linear":
            continue
        if isinstance(v.value, str):
            try:
                pattern = re.compile(v.value)
            except re.error:
                continue
            found = [n for n in names if pattern.fullmatch(n)]
            yield c, model, where, ([] if found else [v.value]), [v.value], kw
            continue
        if not isinstance(v.value, tuple):
            continue
        targets = [str(t) for t in v.value]
        missing = [t for t in targets if not any(_matches(t, n) for n in names)]
        yield c, model, where, missing, targets, kw


def _hit(facts: ScriptFacts, model: ModelRef, where: str, missing: list[str], targets: list[str],
         kw: ApiKeyword, what: str) -> Hit:
    return Hit(message=(f"target_modules {', '.join(repr(t) for t in missing)} {what} in {model.text} ({where})"),
               evidence={"missing": ", ".join(missing), "targets": ", ".join(targets), "model": model.text,
                         "model_type": model.model_type or "", "source": where},
               location=Location(path=facts.path, span=kw.value.span),
               related=(Related(location=Location(path=facts.path, span=model.span), message="the model adapted"),))


NONE_DOC = """None of LoRA's target_modules is a module of the model: PEFT refuses the config.

What it flags: `LoraConfig(target_modules=...)` none of whose names matches a module of the
model the script loads — read from the weights beside its config.json
(model.safetensors.index.json or the safetensors headers), else the known layer names of
its `model_type` (`c_attn` on a Llama, `q_proj` on GPT-2); located on target_modules.
Why it matters: `get_peft_model` raises ValueError ("Target modules ... not found in the
base model") after the model was loaded — copied LoRA recipes from another architecture
are the usual cause.
What it does not mean: anything for "all-linear", for a model whose weights and
architecture are both unknown here (the check says so), or for a script loading several
models.
"""


def check_none(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for _c, model, where, missing, targets, kw in _judged(facts):
        if missing and len(missing) == len(targets):
            yield _hit(facts, model, where, missing, targets, kw, "match no module")


NONE_RULE = Rule(id="TP-SCRIPT-LORA-TARGETS-NOT-FOUND", name="lora-targets-not-found", level=Level.FAIL,
                 doc=NONE_DOC, check=check_none, family=SCRIPT)


PARTIAL_DOC = """Some of LoRA's target_modules match no module of the model: they are silently ignored.

What it flags: `LoraConfig(target_modules=[...])` where some names match modules of the
model (weights on disk, else its model_type's known layers) and others match none; located
on target_modules, naming the ones that match nothing.
Why it matters: PEFT adapts the names it finds and ignores the rest without a word: the run
trains fewer layers than the recipe says (attention only, when the MLP names belonged to
another architecture).
What it does not mean: a failure — training runs; it just adapts less.
"""


def check_partial(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for _c, model, where, missing, targets, kw in _judged(facts):
        if missing and len(missing) < len(targets):
            yield _hit(facts, model, where, missing, targets, kw, "match no module (the others do)")


PARTIAL_RULE = Rule(id="TP-SCRIPT-LORA-TARGETS-PARTIAL", name="lora-targets-partial", level=Level.WARN,
                    doc=PARTIAL_DOC, check=check_partial, family=SCRIPT)


RULES: tuple[Rule[ScriptFacts, Context], ...] = (NONE_RULE, PARTIAL_RULE)
