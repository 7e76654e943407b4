"""load_best_model_at_end with save and eval strategies that do not match.

One rule, read from `ScriptFacts` as the other training-script rules (rules/script.py)
are: only values the source fixes count, and a value hidden behind `**kwargs` or a
runtime expression makes the check say it could not judge.
"""

from __future__ import annotations

from typing import Iterator

from ..core.model import Fix, Hit, Level, Related
from ..readers.script import ConfigCall, ScriptFacts, Value
from .base import Context, NoLimits, Rule, Skip
from ._run_length import set_keyword
from .script import SCRIPT, _configs, _eval_strategy, _flag, _loc, _stand_down

# HF TrainingArguments defaults (transformers/training_args.py), used when the keyword is
# absent: checkpoints are saved every 500 steps, evaluation is off.
_DEFAULT_SAVE_STRATEGY = "steps"
_DEFAULT_SAVE_STEPS = 500
# eval_steps, when not given, falls back to logging_steps, whose default is 500.
_DEFAULT_LOGGING_STEPS = 500

DOC = """load_best_model_at_end=True with save and eval strategies that differ: TrainingArguments raises.

What it flags: a TrainingArguments-family call (TRL's configs included) with
`load_best_model_at_end=True` whose `save_strategy` and `eval_strategy` (or the older
spelling `evaluation_strategy`) differ — HF's defaults are "steps" and "no", so
`load_best_model_at_end=True` alone, or with `eval_strategy="no"`, is one — and, when
both are "steps", a `save_steps` that is not a round multiple of `eval_steps`. Located on
load_best_model_at_end, with the strategy keywords as related locations.
Why it matters: TrainingArguments checks this in its constructor and raises ValueError
("--load_best_model_at_end requires the save and eval strategy to match"): the script
dies before training starts, often after a long model download on a rented GPU.
What it does not mean: anything when `save_strategy="best"` (HF saves on the best
metric then, and does not ask for a match), or about values set outside the script
(CLI flags, YAML): those are not known statically and the check says so.
"""


def _strategy(c: ConfigCall, key: str, default: str) -> tuple[str | None, Value | None]:
    v = c.kwargs.get(key)
    if v is None:
        return (None if c.opaque else default), None
    if v.known and isinstance(v.value, str):
        return v.value.lower(), v
    return None, v


def _steps(c: ConfigCall, key: str, default: int | None) -> tuple[float | None, Value | None]:
    v = c.kwargs.get(key)
    if v is None:
        return (None if c.opaque or default is None else float(default)), None
    if v.known and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
        return float(v.value), v
    return None, v


def _said(v: Value | None, key: str, value: str) -> str:
    """How the message names a strategy: as written, or as HF's default."""
    if v is None:
        return f"{key} unset (HF default {value!r})"
    return f"{key}={v.text}"  # a value's text is the expression alone, a launch flag's too


def _related(facts: ScriptFacts, *named: tuple[str, Value | None]) -> tuple[Related, ...]:
    return tuple(Related(location=_loc(facts, v), message=f"{what}: {v.text}") for what, v in named if v is not None)


def check(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    configs = _configs(facts)
    decided = False
    hidden: list[str] = []  # configs whose strategies may sit in **kwargs
    for c in configs:
        best_v = c.kwargs.get("load_best_model_at_end")
        best = _flag(best_v)
        if best_v is None or best is False:
            decided = decided or best_v is not None or not c.opaque
            continue
        if best is None:
            continue
        save, save_v = _strategy(c, "save_strategy", _DEFAULT_SAVE_STRATEGY)
        evaluation, eval_v = _eval_strategy(c)
        if save is None or evaluation is None:
            if c.opaque and (save_v is None or eval_v is None):
                hidden.append(c.cls)
            continue
        decided = True
        if save == "best":
            continue
        eval_key = "evaluation_strategy" if "evaluation_strategy" in c.kwargs else "eval_strategy"
        named = (("save strategy", save_v), ("eval strategy", eval_v))
        if save != evaluation:
            # the fix makes the two match: save when evaluating, or (evaluation off)
            # evaluate when saving
            key, value = ("save_strategy", evaluation) if evaluation != "no" else (eval_key, save)
            edit = set_keyword(facts, c, key, repr(value))
            fix = Fix(title=f"set {key}={value!r} to match", edits=(edit,)) if edit is not None else None
            yield Hit(
                message=(f"{c.cls}(load_best_model_at_end=True) needs the save and eval strategies to match: "
                         f"{_said(save_v, 'save_strategy', save)}, {_said(eval_v, eval_key, evaluation)}; "
                         f"{c.cls} raises ValueError before training starts"),
                evidence={"save_strategy": save, "eval_strategy": evaluation, "config": c.cls},
                location=_loc(facts, best_v), related=_related(facts, *named), fix=fix,
            )
            continue
        if save != "steps":
            continue
        save_steps, save_steps_v = _steps(c, "save_steps", _DEFAULT_SAVE_STEPS)
        logging_steps, _ = _steps(c, "logging_steps", _DEFAULT_LOGGING_STEPS)
        eval_steps, eval_steps_v = _steps(c, "eval_steps", None)
        if eval_steps_v is None and not c.opaque:
            eval_steps = logging_steps
        if not save_steps or not eval_steps or save_steps < 1 or eval_steps < 1:
            continue  # unknown, or a fraction of the run (HF checks those at train time)
        if save_steps % eval_steps != 0:
            multiple = max(save_steps // eval_steps, 1) * eval_steps  # the nearest multiple not above it
            edit = set_keyword(facts, c, "save_steps", f"{multiple:g}")
            fix = Fix(title=f"set save_steps to {multiple:g} (a multiple of eval_steps {eval_steps:g})",
                      edits=(edit,)) if edit is not None else None
            yield Hit(
                message=(f"{c.cls}(load_best_model_at_end=True) with both strategies \"steps\" needs save_steps "
                         f"to be a round multiple of eval_steps: {save_steps:g} is not a multiple of "
                         f"{eval_steps:g}; {c.cls} raises ValueError before training starts"),
                evidence={"save_steps": save_steps, "eval_steps": eval_steps, "config": c.cls},
                location=_loc(facts, best_v),
                related=_related(facts, ("save_steps", save_steps_v), ("eval_steps", eval_steps_v)), fix=fix,
            )
    if not decided and hidden:
        raise Skip(f"not known without running the script: the save/eval strategy of {hidden[0]}(..., **...)")
    _stand_down(decided, configs, "load_best_model_at_end", "save_strategy", "eval_strategy",
                "evaluation_strategy")


RULE = Rule(id="TP-SCRIPT-BEST-STRATEGY-MISMATCH", name="best-model-strategy-mismatch", level=Level.FAIL,
            doc=DOC, check=check, family=SCRIPT)
