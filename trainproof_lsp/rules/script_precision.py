"""The training config's precision against the model it trains.

Both rules read `ScriptFacts` (readers/script.py): the config's fp16/bf16, the
`from_pretrained` calls with the dtype they load in, and the model's config.json where
it is on disk (the folder named, or the local Hugging Face cache; never downloaded).
"""

from __future__ import annotations

from typing import Iterator

from ..core.model import Edit, Fix, Hit, Level, Location, Related, Span
from ..readers.script import ConfigCall, ModelRef, ScriptFacts, Value
from ._run_length import setting
from .base import Context, NoLimits, Rule, Skip
from .script import SCRIPT, _configs

# Families pretrained in bfloat16 (on TPUs) whose activations overflow fp16's 65504:
# T5-style encoders (the HF docs warn T5 training in fp16 gives NaN) and Gemma.
BF16_FAMILIES = frozenset({"t5", "mt5", "umt5", "longt5", "switch_transformers", "gemma", "gemma2", "gemma3",
                           "gemma3_text", "recurrent_gemma"})


def _fp16(c: ConfigCall) -> Value | None:
    s = setting(c, "fp16")
    return s.given if s.value is True and s.given is not None else None


def _keyword_span(facts: ScriptFacts, v: Value, key: str) -> Span | None:
    """The span of `key` in `key=value` before the value, on the value's line in the script."""
    if v.path is not None or v.via is not None or not 0 <= v.span.start_line < len(facts.source_lines):
        return None
    before = facts.source_lines[v.span.start_line][:v.span.start_char]
    stripped = before.rstrip()
    if not stripped.endswith("="):
        return None
    name_end = len(stripped[:-1].rstrip())
    if not stripped[:name_end].endswith(key):
        return None
    return Span(v.span.start_line, name_end - len(key), v.span.start_line, name_end)


def _to_bf16(facts: ScriptFacts, c: ConfigCall, v: Value) -> Fix | None:
    if "bf16" in c.kwargs:
        return None
    span = _keyword_span(facts, v, "fp16")
    if span is None:
        return None
    return Fix(title="train in bf16 instead (bf16=True; needs an Ampere or newer GPU)",
               edits=(Edit(span=span, new_text="bf16"),))


def _models(facts: ScriptFacts) -> tuple[ModelRef, ...]:
    if not facts.models:
        raise Skip("the script loads no model with from_pretrained(\"name or folder\")")
    return facts.models


BF16_DOC = """fp16 mixed precision on a model pretrained in bfloat16.

What it flags: `fp16=True` in a TrainingArguments-family config while the model the script
loads (`from_pretrained("folder or name")`) was saved in bfloat16 (config.json
`torch_dtype`) or is of a family pretrained in bfloat16 (T5, mT5, Gemma); located on
fp16, with the model as related location. The quick fix switches to bf16.
Why it matters: bfloat16 keeps float32's range, fp16 tops out at 65504: activations that
were fine in pretraining overflow, and the loss turns NaN (the most reported fine-tuning
failure of these families).
What it does not mean: a certain failure — many bf16 models fine-tune in fp16 with a
small learning rate; and nothing when the model's config.json is not on disk.
"""


def check_fp16_on_bf16(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    models = _models(facts)
    known = [m for m in models if m.torch_dtype is not None or m.model_type is not None]
    if not known:
        raise Skip(f"the model's config.json is not on disk ({models[0].text})")
    for c in _configs(facts):
        v = _fp16(c)
        if v is None:
            continue
        for m in known:
            bf16_saved = m.torch_dtype == "bfloat16"
            family = m.model_type in BF16_FAMILIES
            if not (bf16_saved or family):
                continue
            why = f"its config.json says torch_dtype {m.torch_dtype}" if bf16_saved else \
                f"{m.model_type} models are pretrained in bfloat16"
            yield Hit(message=(f"fp16=True but the model {m.text} was pretrained in bfloat16 ({why}): fp16's range "
                               "(max 65504) overflows where bf16's did not, the loss can turn NaN"),
                      evidence={"config": c.cls, "model": m.text, "torch_dtype": m.torch_dtype or "",
                                "model_type": m.model_type or ""},
                      location=Location(path=v.path or facts.path, span=v.span),
                      related=(Related(location=Location(path=facts.path, span=m.span),
                                       message=f"the model, {m.config}"),),
                      fix=_to_bf16(facts, c, v))


BF16_RULE = Rule(id="TP-SCRIPT-FP16-ON-BF16-MODEL", name="fp16-on-bf16-model", level=Level.WARN, doc=BF16_DOC,
                 check=check_fp16_on_bf16, family=SCRIPT)


HALF_DOC = """fp16 weights trained in full under fp16 mixed precision: the gradient scaler refuses them.

What it flags: a model loaded with `torch_dtype=torch.float16` (or "float16", torch.half)
and a TrainingArguments-family config with `fp16=True`, in a script that sets up no
adapters (no LoraConfig, get_peft_model or peft_config=): every parameter trains in fp16.
Located on the torch_dtype keyword, with fp16 as related location.
Why it matters: the fp16 gradient scaler unscales fp32 master gradients only; with fp16
parameters the first optimizer step raises ValueError ("Attempting to unscale FP16
gradients") — after the model loaded and the first batch ran.
What it does not mean: anything for adapter training (the adapters train in fp32 beside a
frozen fp16 base), or a model loaded in bf16 / float32 / "auto".
"""


def check_fp16_weights(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    models = _models(facts)
    if facts.adapters:
        raise Skip("the script sets up adapters: only they train")
    for c in _configs(facts):
        v = _fp16(c)
        if v is None:
            continue
        for m in models:
            if m.load_dtype != "float16" or m.load_dtype_span is None:
                continue
            yield Hit(message=(f"{m.text} is loaded in float16 and trained in full with fp16=True: the fp16 gradient "
                               "scaler raises ValueError (\"Attempting to unscale FP16 gradients\") at the first "
                               "optimizer step"),
                      evidence={"config": c.cls, "model": m.text, "load_dtype": "float16"},
                      location=Location(path=facts.path, span=m.load_dtype_span),
                      related=(Related(location=Location(path=v.path or facts.path, span=v.span),
                                       message="fp16 mixed precision is on here"),))


HALF_RULE = Rule(id="TP-SCRIPT-FP16-WEIGHTS-FULL-TRAIN", name="fp16-weights-full-training", level=Level.FAIL,
                 doc=HALF_DOC, check=check_fp16_weights, family=SCRIPT)


RULES: tuple[Rule[ScriptFacts, Context], ...] = (BF16_RULE, HALF_RULE)
