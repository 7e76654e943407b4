"""Training-script rules: HF TrainingArguments / TRL config foot-guns, read statically.

Every rule reads `ScriptFacts` (readers/script.py: the script parsed with `ast`, never
imported); a value counts only when the source fixes it (a literal, arithmetic on
literals, a constant assigned once). Findings land on the keyword's own line; a value
that came through a constant has the constant's assignment as related location.
"""

from __future__ import annotations

from typing import Callable, Iterator

from ..core.model import Edit, Fix, Hit, Level, Location, Related
from ..readers.script import ConfigCall, ScriptFacts, Value
from .base import Context, Family, NoLimits, Rule, Skip
from ._run_length import number, plan, setting

# Every rule here (and in script_best_strategy.py) judges one ScriptFacts (readers/script.py).
SCRIPT: Family[ScriptFacts, Context] = Family("script")


def _configs(facts: ScriptFacts) -> tuple[ConfigCall, ...]:
    if not facts.configs:
        raise Skip("no TrainingArguments / SFTConfig-family call in the script")
    return facts.configs


def _num(v: Value | None) -> float | None:
    if v is None or not v.known or isinstance(v.value, bool) or not isinstance(v.value, (int, float)):
        return None
    return float(v.value)


def _flag(v: Value | None) -> bool | None:
    if v is None or not v.known:
        return None
    return bool(v.value)


def _loc(facts: ScriptFacts, v: Value) -> Location:
    # a value from the launch script's flags is located in that file
    return Location(path=v.path or facts.path, span=v.span)


def _via(facts: ScriptFacts, v: Value) -> tuple[Related, ...]:
    if v.via and v.via_span is not None:
        return (Related(location=Location(path=facts.path, span=v.via_span),
                        message=f"{v.via} is assigned here"),)
    return ()


def _line(v: Value) -> int:
    return v.span.start_line + 1


def _unknown(configs: tuple[ConfigCall, ...], *names: str) -> list[str]:
    """The source text of those keywords that are present but not statically known."""
    return [f"{n}={c.kwargs[n].text}" for c in configs for n in names if n in c.kwargs and not c.kwargs[n].known]


def _stand_down(decided: bool, configs: tuple[ConfigCall, ...], *names: str) -> None:
    if decided:
        return
    unknown = _unknown(configs, *names)
    if unknown:
        raise Skip(f"not known without running the script: {', '.join(unknown[:3])}")


# What one config call says to a check: whether its values decide the check (statically
# known, or absent so a default applies), and the findings it gives.
ConfigJudge = Callable[[ScriptFacts, ConfigCall], tuple[bool, list[Hit]]]


def _each_config(facts: ScriptFacts, judge: ConfigJudge, *names: str) -> Iterator[Hit]:
    """Every config call's findings; the check stands down (Skip) when no call decided it
    and one of `names` is present but not known without running the script."""
    configs = _configs(facts)
    decided = False
    for c in configs:
        known, hits = judge(facts, c)
        decided = decided or known
        yield from hits
    _stand_down(decided, configs, *names)


# --- learning rate 0 ---------------------------------------------------------------------

ZERO_LR_DOC = """The training config sets the learning rate to zero.

What it flags: `learning_rate` of a TrainingArguments-family call that is 0 — written
as a literal, computed from literals, or through a constant (`LR = 0.0`); located on
the keyword, with the constant's assignment as related location.
Why it matters: with a zero learning rate the optimizer never changes the weights; the
run burns its whole budget and learns nothing (TP-ZERO-LR sees it in the log, too late).
What it does not mean: anything about values set outside the script (a CLI flag, a YAML
file): those are not known statically and the check says so.
"""


def _zero_lr(facts: ScriptFacts, c: ConfigCall) -> tuple[bool, list[Hit]]:
    v = c.kwargs.get("learning_rate")
    lr = _num(v)
    if v is None or lr is None:
        return v is None, []
    if lr != 0.0:
        return True, []
    through = f" (through {v.via})" if v.via else ""
    return True, [Hit(message=f"{c.cls}(learning_rate={v.text}) is 0{through}: the optimizer will not move the weights",
                      evidence={"learning_rate": lr, "config": c.cls, "via": v.via or ""},
                      location=_loc(facts, v), related=_via(facts, v))]


def check_zero_lr(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    return _each_config(facts, _zero_lr, "learning_rate")


ZERO_LR_RULE = Rule(id="TP-SCRIPT-ZERO-LR", name="script-zero-learning-rate", level=Level.FAIL,
                    doc=ZERO_LR_DOC, check=check_zero_lr, family=SCRIPT)


# --- warmup as long as the run -----------------------------------------------------------

WARMUP_DOC = """Warmup lasts as long as the whole run, or longer.

What it flags: `warmup_steps` >= `max_steps` (max_steps > 0) — or, without max_steps (or
with -1, its default), >= the run's length from epochs x the rows of the dataset the script names on disk / (batch
x accumulation x processes) — or `warmup_ratio` >= 1, in a TrainingArguments-family
call; located on the warmup keyword.
Why it matters: the learning rate is still ramping up when training ends — the run never
trains at the learning rate it was configured with, and a linear-decay schedule never
decays.
What it does not mean: anything when the run's length is unknown (no max_steps and no
dataset on disk), or for a warmup_steps below 1 (a fraction of the run in transformers 5).
"""


def _warmup(facts: ScriptFacts, c: ConfigCall) -> tuple[bool, list[Hit]]:
    hits: list[Hit] = []
    ratio_v = c.kwargs.get("warmup_ratio")
    ratio = _num(ratio_v)
    if ratio_v is not None and ratio is not None and ratio >= 1.0:
        hits.append(Hit(message=f"warmup_ratio={ratio_v.text} is {ratio:g} >= 1: warmup spans the whole run",
                        evidence={"warmup_ratio": ratio, "config": c.cls},
                        location=_loc(facts, ratio_v), related=_via(facts, ratio_v)))
    steps_v, max_v = c.kwargs.get("warmup_steps"), c.kwargs.get("max_steps")
    warm, total = _num(steps_v), _num(max_v)
    ratio_open = ratio_v is not None and ratio is None
    if steps_v is None or (warm is not None and warm < 1):
        return not ratio_open, hits
    # from here warmup_steps is >= 1 or unknown: transformers uses it instead of
    # warmup_ratio when it is > 0, so an unknown ratio decides nothing below
    if warm is None or (max_v is not None and total is None):
        return False, hits
    if max_v is not None and total is not None and total > 0:
        if warm >= total:
            hits.append(Hit(
                message=(f"warmup_steps={steps_v.text} ({warm:g}) >= max_steps={max_v.text} ({total:g}): the "
                         "learning rate is still warming up when training ends"),
                evidence={"warmup_steps": warm, "max_steps": total, "config": c.cls},
                location=_loc(facts, steps_v),
                related=(Related(location=_loc(facts, max_v), message=f"max_steps {total:g} set here"),
                         *_via(facts, steps_v)),
            ))
        return True, hits
    # no max_steps (or -1, the default): the length comes from epochs and the dataset
    p = plan(facts, c)
    if not isinstance(p, str) and warm >= p.steps:
        hits.append(Hit(
            message=(f"warmup_steps={steps_v.text} ({warm:g}) >= the run's {p.words()}: the learning rate "
                     "is still warming up when training ends"),
            evidence={"warmup_steps": warm, "planned_steps": p.steps, "exact": p.exact, "config": c.cls},
            location=_loc(facts, steps_v), related=_via(facts, steps_v)))
    return True, hits


def check_warmup(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    return _each_config(facts, _warmup, "warmup_steps", "max_steps", "warmup_ratio")


WARMUP_RULE = Rule(id="TP-SCRIPT-WARMUP-EXCEEDS-RUN", name="warmup-exceeds-run", level=Level.WARN,
                   doc=WARMUP_DOC, check=check_warmup, family=SCRIPT)


# --- fp16 and bf16 --------------------------------------------------------------------------

FP16_BF16_DOC = """The training config turns on both fp16 and bf16.

What it flags: a TrainingArguments-family call (or an `args.fp16 = ...` after it) with
both `fp16` and `bf16` true; located on the second of the two.
Why it matters: TrainingArguments refuses the combination with a ValueError ("At most
one of fp16 and bf16 can be True"): the script dies before the first step, after the
model and data are loaded.
What it does not mean: anything about which precision is right for the hardware.
"""


def _fp16_bf16(facts: ScriptFacts, c: ConfigCall) -> tuple[bool, list[Hit]]:
    fp16_v, bf16_v = c.kwargs.get("fp16"), c.kwargs.get("bf16")
    # an absent flag is False (TrainingArguments' default) unless **kwargs may hold it
    fp16 = _flag(fp16_v) if fp16_v is not None else (None if c.opaque else False)
    bf16 = _flag(bf16_v) if bf16_v is not None else (None if c.opaque else False)
    if fp16 is False or bf16 is False:
        return True, []
    if fp16_v is None or bf16_v is None or fp16 is None or bf16 is None:
        return False, []
    named = sorted((("fp16", fp16_v), ("bf16", bf16_v)), key=lambda kv: (kv[1].span.start_line,
                                                                       kv[1].span.start_char))
    (_, first), (_, second) = named
    said = "; ".join(f"{v.text if v.assigned else f'{k}={v.text}'} on line {_line(v)}" for k, v in named)
    return True, [Hit(
        message=f"fp16 and bf16 are both on ({said}): {c.cls} raises ValueError before training starts",
        evidence={"fp16": True, "bf16": True, "config": c.cls},
        location=_loc(facts, second),
        related=(Related(location=_loc(facts, first), message="the other one is turned on here"),),
    )]


def check_fp16_bf16(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    return _each_config(facts, _fp16_bf16, "fp16", "bf16")


FP16_BF16_RULE = Rule(id="TP-SCRIPT-FP16-BF16", name="fp16-and-bf16", level=Level.FAIL, doc=FP16_BF16_DOC,
                      check=check_fp16_bf16, family=SCRIPT)


# --- the best checkpoint will be deleted ----------------------------------------------------

def _eval_strategy(c: ConfigCall) -> tuple[str | None, Value | None]:
    """The evaluation strategy, lower-case ("no", "steps", "epoch"); HF's default "no"
    when the keyword is absent and no **kwargs could hide it; None when unknown."""
    for key in ("eval_strategy", "evaluation_strategy"):
        v = c.kwargs.get(key)
        if v is not None:
            if v.known and isinstance(v.value, str):
                return v.value.lower(), v
            return None, v
    return (None if c.opaque else "no"), None


BEST_DOC = """save_total_limit=1 without load_best_model_at_end: the best checkpoint gets deleted.

What it flags: a TrainingArguments-family call with evaluation on, `save_total_limit`
of 1 and `load_best_model_at_end` not true; located on save_total_limit.
Why it matters: with one checkpoint kept, each save deletes the previous one — including
the best by eval loss. Only `load_best_model_at_end=True` makes the Trainer keep the best
checkpoint beside the last; otherwise an overfitting run ends with only its worst state.
What it does not mean: a problem when evaluation is off (there is no best to keep), or
when the last checkpoint is the one you want.
"""


def check_best(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    configs = _configs(facts)
    for c in configs:
        limit_v = c.kwargs.get("save_total_limit")
        if limit_v is None or _num(limit_v) != 1.0:
            continue
        best = c.kwargs.get("load_best_model_at_end")
        if best is not None and (not best.known or bool(best.value)):
            continue
        if best is None and c.opaque:
            continue
        strategy, strategy_v = _eval_strategy(c)
        if strategy in (None, "no"):
            continue
        related = (Related(location=_loc(facts, strategy_v), message=f"evaluation is on: {strategy_v.text}"),) \
            if strategy_v is not None else ()
        yield Hit(fix=_keep_best_fix(facts, c, strategy),
            message=(f"save_total_limit={limit_v.text} with evaluation on ({strategy}) and "
                     f"load_best_model_at_end={'False' if best is not None else 'unset'}: each save deletes the "
                     "previous checkpoint, the best one included"),
            evidence={"save_total_limit": 1, "eval_strategy": strategy, "config": c.cls,
                      "load_best_model_at_end": False},
            location=_loc(facts, limit_v), related=related,
        )


def _keep_best_fix(facts: ScriptFacts, c: ConfigCall, strategy: str | None) -> Fix | None:
    """load_best_model_at_end=True, with save_strategy matching the eval strategy (the
    Trainer refuses the option otherwise)."""
    from ._run_length import set_keyword

    edits = []
    best = set_keyword(facts, c, "load_best_model_at_end", "True")
    if best is None:
        return None
    edits.append(best)
    save_v = c.kwargs.get("save_strategy")
    save = save_v.value.lower() if save_v is not None and save_v.known and isinstance(save_v.value, str) else \
        ("steps" if save_v is None else None)
    if save is None or strategy is None:
        return None
    if save != strategy:
        other = set_keyword(facts, c, "save_strategy", repr(strategy))
        if other is None:
            return None
        if other.span == best.span:  # both added after the last keyword: one insertion
            edits[0] = Edit(span=best.span, new_text=best.new_text + other.new_text)
        else:
            edits.append(other)
    return Fix(title="keep the best checkpoint: load_best_model_at_end=True"
                     + (f", save_strategy={strategy!r}" if save != strategy else ""), edits=tuple(edits))


BEST_RULE = Rule(id="TP-SCRIPT-BEST-CKPT-DELETED", name="best-checkpoint-deleted", level=Level.WARN,
                 doc=BEST_DOC, check=check_best, family=SCRIPT)


# --- eval dataset with evaluation disabled ------------------------------------------------------

EVAL_DOC = """An eval dataset is passed to the Trainer but evaluation is disabled.

What it flags: a `*Trainer(..., eval_dataset=X)` whose config has `eval_strategy`
"no" (HF's default when the keyword is absent); located on the eval_dataset argument,
with the config call as related location.
Why it matters: the Trainer never evaluates during training: no eval loss, no early
warning of overfitting, no best checkpoint — the eval set is loaded for nothing.
What it does not mean: a problem when the script calls `trainer.evaluate()` itself (then
the rule stands down), or when the config comes from somewhere the source does not show.
"""


def check_eval(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    if not facts.trainers:
        raise Skip("no *Trainer(...) call in the script")
    if facts.calls_evaluate:
        raise Skip("the script calls .evaluate() itself")
    for t in facts.trainers:
        if t.eval_dataset is None or t.config is None:
            continue
        c = facts.configs[t.config]
        strategy, strategy_v = _eval_strategy(c)
        if strategy != "no":
            continue
        where = strategy_v if strategy_v is not None else None
        related = (Related(location=_loc(facts, where), message=f"evaluation is off here: {where.text}"),) \
            if where is not None else (Related(location=Location(path=facts.path, span=c.span),
                                               message=f"{c.cls} without eval_strategy (HF default \"no\")"),)
        yield Hit(
            message=(f"{t.cls} gets eval_dataset={t.eval_dataset.text} but {c.cls} has evaluation off "
                     f"(eval_strategy \"no\"{'' if where else ', the default'}): it is never evaluated"),
            evidence={"eval_strategy": "no", "trainer": t.cls, "config": c.cls, "explicit": where is not None},
            location=_loc(facts, t.eval_dataset), related=related,
        )


EVAL_RULE = Rule(id="TP-SCRIPT-EVAL-DISABLED", name="eval-dataset-never-used", level=Level.WARN,
                 doc=EVAL_DOC, check=check_eval, family=SCRIPT)


# --- logging interval longer than the run ---------------------------------------------------------

LOGGING_DOC = """logging_steps is larger than max_steps: no training loss will be logged.

What it flags: `logging_steps` (a whole number, not a ratio below 1; 500 by default, 10
in TRL) greater than the run's length — `max_steps` (> 0), or epochs x the rows of the
dataset the script names on disk / (batch x accumulation x processes) — in a
TrainingArguments-family call; located on logging_steps (or the config when the default
applies).
Why it matters: the Trainer logs the loss every logging_steps steps; the run ends first,
so the log has no loss curve and every log rule (NaN, divergence, flat loss) has nothing
to judge.
What it does not mean: anything when the run's length is unknown (no max_steps and no
dataset on disk): the check says so.
"""


def _logging(facts: ScriptFacts, c: ConfigCall) -> tuple[bool, list[Hit]]:
    log_v, max_v = c.kwargs.get("logging_steps"), c.kwargs.get("max_steps")
    if log_v is None or max_v is None:
        return _logging_planned(facts, c)
    every, total = _num(log_v), _num(max_v)
    if every is None or total is None:
        return False, []
    if not (total > 0 and every >= 1 and every > total):
        return True, []
    return True, [Hit(
        message=(f"logging_steps={log_v.text} ({every:g}) > max_steps={max_v.text} ({total:g}): the run "
                 "ends before the first loss is logged"),
        evidence={"logging_steps": every, "max_steps": total, "config": c.cls},
        location=_loc(facts, log_v),
        related=(Related(location=_loc(facts, max_v), message=f"max_steps {total:g} set here"),
                 *_via(facts, log_v)),
    )]


def _logging_planned(facts: ScriptFacts, c: ConfigCall) -> tuple[bool, list[Hit]]:
    """logging_steps (as written or the default) against the length from plan()."""
    p = plan(facts, c)
    every_s = setting(c, "logging_steps")
    every = number(every_s)
    if isinstance(p, str) or every is None:
        # the length or the interval is not known: undecided, so an unknown logging_steps
        # or max_steps stands the check down by name (_stand_down)
        return False, []
    if not (every >= 1 and every > p.steps):
        return True, []
    log_v = every_s.given
    return True, [Hit(
        message=(f"{every_s.said('logging_steps')} > the run's {p.words()}: the run ends before the first "
                 "loss is logged"),
        evidence={"logging_steps": every, "planned_steps": p.steps, "exact": p.exact, "config": c.cls},
        location=_loc(facts, log_v) if log_v is not None else Location(path=facts.path, span=c.span),
        related=_via(facts, log_v) if log_v is not None else ())]


def check_logging(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    return _each_config(facts, _logging, "logging_steps", "max_steps")


LOGGING_RULE = Rule(id="TP-SCRIPT-LOGGING-EXCEEDS-RUN", name="logging-exceeds-run", level=Level.WARN,
                    doc=LOGGING_DOC, check=check_logging, family=SCRIPT)


RULES: tuple[Rule[ScriptFacts, Context], ...] = (ZERO_LR_RULE, WARMUP_RULE, FP16_BF16_RULE, BEST_RULE, EVAL_RULE, LOGGING_RULE)
