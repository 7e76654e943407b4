"""The script's library calls against the installed libraries: keywords and values the
installed classes do not take.

The rules read `EnvFacts.api` (readers/envcheck.py): each call of a class the script
imports from a training library (readers/script.py `ApiCall`) beside that class's
signature as the run's interpreter has it, read with `inspect.signature` in a child
process that never calls it and imports nothing from the workspace. A YAML config
(readers/yaml_api.py) is bound the same way: a LLaMA-Factory config's keys to its argument
classes (the first two rules), an axolotl config's keys to its schema's fields (the third).
"""

from __future__ import annotations

import difflib
from typing import Iterator

from ..core.model import Edit, Fix, Hit, Level, Location
from ..readers.envcheck import ApiProbe, EnvFacts
from ..readers.script import CONFIG_CLASSES, ApiKeyword
from ..readers.yaml_api import is_axolotl_call, is_yaml_call
from .base import Context, NoLimits, Rule, Skip
from .env import ENV

# Keywords a release renamed with the same meaning: (library, old) -> new. Renaming is
# safe when the new name is in the installed signature and the call does not pass it
# already. TRL's configs subclass TrainingArguments, so trl inherits transformers' renames.
_TRANSFORMERS_RENAMED = {
    "evaluation_strategy": "eval_strategy",  # deprecated in 4.41, gone in 5
    "no_cuda": "use_cpu",  # 4.34
    "per_gpu_train_batch_size": "per_device_train_batch_size",
    "per_gpu_eval_batch_size": "per_device_eval_batch_size",
    "push_to_hub_token": "hub_token",
    "push_to_hub_model_id": "hub_model_id",
    "fp16_backend": "half_precision_backend",
    "tokenizer": "processing_class",  # Trainer, 4.46
    # 5: warmup_steps below 1 is a fraction of the run, what warmup_ratio was (the fix is
    # offered only for a known value in [0, 1))
    "warmup_ratio": "warmup_steps",
}
_LIGHTNING_RENAMED = {"checkpoint_callback": "enable_checkpointing"}  # 1.5
RENAMED: dict[str, dict[str, str]] = {
    "transformers": _TRANSFORMERS_RENAMED,
    "trl": {**_TRANSFORMERS_RENAMED, "max_seq_length": "max_length"},  # SFTConfig 0.20
    "lightning": _LIGHTNING_RENAMED,
    "pytorch_lightning": _LIGHTNING_RENAMED,
    # a LLaMA-Factory YAML's trainer keys are transformers' TrainingArguments (subclassed)
    "llamafactory": _TRANSFORMERS_RENAMED,
}
# Removed keywords whose replacement is not a rename: what to do instead.
_LIGHTNING_MOVED = {
    "gpus": 'accelerator="gpu", devices=N',
    "tpu_cores": 'accelerator="tpu", devices=N',
    "resume_from_checkpoint": "trainer.fit(..., ckpt_path=...)",
    "progress_bar_refresh_rate": "the TQDMProgressBar(refresh_rate=...) callback",
    "auto_lr_find": "lightning's Tuner(trainer).lr_find()",
    "auto_scale_batch_size": "lightning's Tuner(trainer).scale_batch_size()",
    "weights_summary": "enable_model_summary= (or the ModelSummary callback)",
}
MOVED: dict[str, dict[str, str]] = {
    "transformers": {"logging_dir": "the TENSORBOARD_LOGGING_DIR environment variable",
                     "overwrite_output_dir": "trainer.train(resume_from_checkpoint=...) to resume"},
    "trl": {"dataset_text_field": "SFTConfig(dataset_text_field=...)", "packing": "SFTConfig(packing=...)"},
    "lightning": _LIGHTNING_MOVED,
    "pytorch_lightning": _LIGHTNING_MOVED,
}
# A near miss for a typo: difflib's ratio at or above this names the closest keyword
# ("lora_alhpa" -> "lora_alpha" is 0.9); below it, two unrelated names are too easily
# mistaken for one another to suggest.
SUGGEST_CUTOFF = 0.8


def _probes(facts: EnvFacts, *, axolotl: bool = False) -> tuple[ApiProbe, ...]:
    """The probes whose signature was read: an axolotl config's (axolotl=True) or the
    others' (a script's calls, a LLaMA-Factory config), each judged by its own rule."""
    if not facts.imports_requested:
        raise Skip("no --entrypoint or --module given")
    if facts.api_error:
        raise Skip(f"the library signatures could not be read: {facts.api_error}")
    if facts.entry_error or facts.python_error or facts.cwd_missing:
        raise Skip("the script or the interpreter could not be used (see the env findings)")
    mine = tuple(p for p in facts.api if is_axolotl_call(p.call) == axolotl)
    if axolotl and not mine:
        raise Skip("no axolotl config given")
    if not facts.api:
        raise Skip("the script calls no class of transformers, trl, peft, lightning, accelerate or bitsandbytes")
    if not mine:
        raise Skip("an axolotl config: its keys are TP-CONFIG-KEY-IGNORED's (axolotl ignores unknown keys)")
    usable = tuple(p for p in mine if p.signature.outcome == "ok")
    if not usable:
        p = mine[0]
        why = p.signature.detail or p.signature.outcome
        raise Skip(f"no library class could be looked up ({p.call.written}: {why})")
    return usable


def _installed(p: ApiProbe) -> str:
    version = f" {p.signature.version}" if p.signature.version else ""
    return f"{p.signature.library}{version}"


def _rename_fix(p: ApiProbe, kw: ApiKeyword, new: str) -> Fix | None:
    """Rename `kw` to `new` when that is the whole fix: `new` is taken and not passed yet."""
    if new not in p.signature.params or any(k.name == new for k in p.call.keywords):
        return None
    if kw.name == "warmup_ratio":
        v = kw.value
        if not (v.known and isinstance(v.value, (int, float)) and not isinstance(v.value, bool)
                and 0 <= v.value < 1):
            return None
    return Fix(title=f"rename {kw.name} to {new}", edits=(Edit(span=kw.name_span, new_text=new),), safe=True)


# --- unknown keywords ------------------------------------------------------------------------

KEYWORD_DOC = """The script passes a keyword the installed library class does not take.

What it flags: a keyword of a call of a class the script imports from transformers, trl,
peft, lightning, accelerate or bitsandbytes (`TrainingArguments`, `SFTConfig`,
`LoraConfig`, `Trainer`, Lightning's `Trainer`, ...) that the installed class's
signature has no parameter for, and no `**kwargs` to take it; located on the keyword,
naming the installed version and, where a release renamed it, the new name
(`evaluation_strategy` -> `eval_strategy`, `tokenizer` -> `processing_class`) — a quick
fix renames it. Checked by `env`: the signature is read in a child process of the run's
interpreter with `inspect.signature`; the class is never called and the script never run.
`env --entrypoint config.yaml` does the same for a LLaMA-Factory training config: each
top-level key against the fields of the installed llamafactory's five argument classes
(ModelArguments, DataArguments, TrainingArguments, FinetuningArguments,
GeneratingArguments), located on the key's line; not checked when llamafactory cannot be
imported there, or when ALLOW_EXTRA_ARGS lets it take any key.
Why it matters: the call raises TypeError ("unexpected keyword argument") before the
first step, often after the model and dataset were loaded on a rented GPU; LLaMA-Factory's
HfArgumentParser raises ValueError ("Some keys are not used") on the config's key.
What it does not mean: anything about classes that take `**kwargs` (BitsAndBytesConfig),
or keywords hidden in a `**dict` the source does not spell out.
"""


def check_keywords(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for p in _probes(facts):
        sig = p.signature
        if sig.var_keyword:
            continue
        taken = set(sig.params)
        for kw in p.call.keywords:
            if kw.name in taken:
                continue
            new = RENAMED.get(sig.library, {}).get(kw.name)
            moved = MOVED.get(sig.library, {}).get(kw.name)
            fix: Fix | None = None
            if new is not None and new in taken:
                hint = f" (renamed {new})"
                fix = _rename_fix(p, kw, new)
            elif moved is not None:
                hint = f" (removed: use {moved})"
            else:
                close = difflib.get_close_matches(kw.name, sig.params, n=1, cutoff=SUGGEST_CUTOFF)
                new = close[0] if close else None
                hint = f" (did you mean {new}?)" if new else ""
                if new is not None and not any(k.name == new for k in p.call.keywords):
                    fix = Fix(title=f"rename {kw.name} to {new}", edits=(Edit(span=kw.name_span, new_text=new),))
            cls = p.call.attr.rsplit(".", 1)[-1]
            if is_yaml_call(p.call):  # a LLaMA-Factory config: HfArgumentParser refuses the key
                message = (f"{p.call.written}: {kw.name!r} is no argument of {_installed(p)}'s training "
                           f"arguments ({cls.replace('+', ', ')}){hint}; `llamafactory-cli train` raises "
                           "ValueError (keys not used by the HfArgumentParser) before training starts")
            else:
                message = (f"{p.call.written}({kw.name}=...): {_installed(p)} {cls} takes no keyword "
                           f"{kw.name!r}{hint}; the call raises TypeError before training starts")
            yield Hit(
                message=message,
                evidence={"keyword": kw.name, "class": sig.qualname, "library": sig.library,
                          "version": sig.version, "replacement": new or ""},
                location=Location(path=p.path, span=kw.name_span), fix=fix)


KEYWORD_RULE = Rule(id="TP-SCRIPT-API-UNKNOWN-KEYWORD", name="unknown-library-keyword", level=Level.FAIL,
                    doc=KEYWORD_DOC, check=check_keywords, family=ENV)


# --- values the class refuses ------------------------------------------------------------------

VALUE_DOC = """The script passes a string the installed library class does not accept for that keyword.

What it flags: a literal string for a keyword whose annotation in the installed class is
an Enum or a Literal (`eval_strategy`, `save_strategy`, `lr_scheduler_type`, `optim` of
TrainingArguments and TRL's configs) that is none of its values; located on the value,
naming the closest allowed value; in a LLaMA-Factory config (`env --entrypoint
config.yaml`) a value outside a Literal of its argument classes (`finetuning_type`,
`stage`) or an Enum of TrainingArguments. Checked by `env`, from the installed
annotation, never by calling the class.
Why it matters: TrainingArguments converts those strings to its enums on construction and
raises ValueError ("is not a valid IntervalStrategy") before training starts.
What it does not mean: anything for a keyword whose annotation also takes any string,
outside the TrainingArguments family (the class may accept it).
"""


def check_values(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for p in _probes(facts):
        cls = p.call.attr.rsplit(".", 1)[-1]
        # The TrainingArguments family converts `Enum | str` fields to the enum in
        # __post_init__: a string outside the enum raises there.
        converts = cls in CONFIG_CLASSES or is_yaml_call(p.call)  # (yaml_api keeps only such choices)
        choices = {name: (values, any_str) for name, values, any_str in p.signature.choices}
        for kw in p.call.keywords:
            if kw.name not in choices or not kw.value.known or not isinstance(kw.value.value, str):
                continue
            values, any_str = choices[kw.name]
            if not values or kw.value.value in values or (any_str and not converts):
                continue
            close = difflib.get_close_matches(kw.value.value, values, n=1, cutoff=0.6)
            hint = f" (closest: {close[0]!r})" if close else ""
            fix = None
            if close and kw.value.via is None:
                fix = Fix(title=f"use {close[0]!r}", edits=(Edit(span=kw.value.span, new_text=repr(close[0])),))
            shown = ", ".join(repr(v) for v in values[:8]) + (", ..." if len(values) > 8 else "")
            if is_yaml_call(p.call):
                message = (f"{p.call.written}: {kw.name}: {kw.value.text}: {_installed(p)} accepts {shown} for "
                           f"{kw.name}{hint}; the run stops on it before training starts")
            else:
                message = (f"{p.call.written}({kw.name}={kw.value.text}): {_installed(p)} {cls} accepts {shown} "
                           f"for {kw.name}{hint}; the call raises ValueError before training starts")
            yield Hit(
                message=message,
                evidence={"keyword": kw.name, "value": kw.value.value, "class": p.signature.qualname,
                          "library": p.signature.library, "version": p.signature.version,
                          "closest": close[0] if close else ""},
                location=Location(path=p.path, span=kw.value.span), fix=fix)


VALUE_RULE = Rule(id="TP-SCRIPT-API-BAD-VALUE", name="invalid-library-value", level=Level.FAIL,
                  doc=VALUE_DOC, check=check_values, family=ENV)


# --- keys an axolotl config's schema ignores ---------------------------------------------------

IGNORED_DOC = """An axolotl config names a key the installed axolotl's config schema does not have.

What it flags: a top-level key of an axolotl config (`env --entrypoint config.yml`) that is
neither a field nor a field alias of the installed axolotl's schema
(axolotl.utils.schemas.config.AxolotlInputConfig, read from its pydantic `model_fields` in a
child process of the run's interpreter, never instantiated); located on the key's line,
naming the installed version and the closest field name — a quick fix renames the key
(not marked safe: the closest name is a guess). Not checked when axolotl cannot be
imported there (NOT-CHECKED with the import error), or when the config names `plugins`
(each plugin adds its own keys to the schema).
Why it matters: axolotl's schema does not forbid extra keys: it validates the config and
drops the keys it does not know, without an error, so the setting the key meant never
takes effect (a misspelt `lora_alhpa: 32` trains with the default LoRA alpha). A WARN,
not a FAIL: the run starts and trains, only not as configured.
What it does not mean: anything about values, keys nested under a top-level key (a
dataset's `path`, `type`), or keys given on the command line.
"""


def check_ignored(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for p in _probes(facts, axolotl=True):
        sig = p.signature
        known = set(sig.params)
        for kw in p.call.keywords:
            if kw.name in known:
                continue
            close = difflib.get_close_matches(kw.name, sig.params, n=1, cutoff=SUGGEST_CUTOFF)
            new = close[0] if close else ""
            fix: Fix | None = None
            if new and not any(k.name == new for k in p.call.keywords):
                fix = Fix(title=f"rename {kw.name} to {new}", edits=(Edit(span=kw.name_span, new_text=new),),
                          safe=False)
            hint = f" (did you mean {new}?)" if new else ""
            yield Hit(
                message=(f"{p.call.written}: {kw.name!r} is no key of {_installed(p)}'s config schema{hint}; "
                         "axolotl ignores it, so the setting never takes effect"),
                evidence={"key": kw.name, "schema": sig.qualname, "library": sig.library, "version": sig.version,
                          "closest": new},
                location=Location(path=p.path, span=kw.name_span), fix=fix)


IGNORED_RULE = Rule(id="TP-CONFIG-KEY-IGNORED", name="ignored-config-key", level=Level.WARN,
                    doc=IGNORED_DOC, check=check_ignored, family=ENV)


RULES: tuple[Rule[EnvFacts, Context], ...] = (KEYWORD_RULE, VALUE_RULE, IGNORED_RULE)
