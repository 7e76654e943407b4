"""The training config against the run's length: checkpoints, the best model and
evaluations that the run ends before reaching.

The length is `max_steps`, or epochs x the rows of the dataset the script names on disk
(counted by the preflight reader) / (batch x accumulation x processes)
(rules/_run_length.py); values come from the config call, HfArgumentParser's dataclass
defaults and the launch script's flags (readers/script.py). Without a process count the
run is taken on one process, the longest it can be, so "never reached" is never a guess.
"""

from __future__ import annotations

from typing import Iterator

from ..core.model import Fix, Hit, Level, Location, Related
from ..readers.script import ConfigCall, ScriptFacts, Value
from ._run_length import Plan, Setting, number, plan, set_keyword, setting
from .base import Context, NoLimits, Rule, Skip
from .script import SCRIPT, _configs


def _where(facts: ScriptFacts, c: ConfigCall, v: Value | None) -> Location:
    if v is not None:
        return Location(path=v.path or facts.path, span=v.span)
    return Location(path=facts.path, span=c.span)


def _plan_related(facts: ScriptFacts, p: Plan) -> tuple[Related, ...]:
    if p.max_steps is not None:
        return (Related(location=Location(path=p.max_steps.path or facts.path, span=p.max_steps.span),
                        message=f"the run is {p.steps} steps"),)
    if p.dataset_span is not None:
        return (Related(location=Location(path=p.dataset_path or facts.path, span=p.dataset_span),
                        message=f"the dataset counted: {p.how}"),)
    return ()


def _plans(facts: ScriptFacts) -> Iterator[tuple[ConfigCall, Plan]]:
    """Each config with a known length; Skip with the first reason when none has one."""
    reasons = []
    for c in _configs(facts):
        p = plan(facts, c)
        if isinstance(p, str):
            reasons.append(p)
            continue
        yield c, p
    if reasons and len(reasons) == len(facts.configs):
        raise Skip(f"the run's length is unknown: {reasons[0]}")


def _steps_strategy(c: ConfigCall, key: str) -> Setting | None:
    s = setting(c, key, *(("evaluation_strategy",) if key == "eval_strategy" else ()))
    return s if s.value == "steps" else None


def _interval(c: ConfigCall, key: str) -> tuple[float | None, Setting]:
    """save_steps / eval_steps in force (eval_steps falls back to logging_steps); a value
    below 1 is a fraction of the run (HF), which always falls inside it: None."""
    s = setting(c, key)
    if key == "eval_steps" and s.given is None:
        s = setting(c, "logging_steps")
    n = number(s)
    return (n if n is not None and n >= 1 else None), s


def _save_fix(facts: ScriptFacts, c: ConfigCall, p: Plan) -> Fix | None:
    """save_steps at eval_steps (a multiple of it, inside the run), when evaluation runs
    by steps within the run."""
    if _steps_strategy(c, "eval_strategy") is None:
        return None
    every, _ = _interval(c, "eval_steps")
    if every is None or every > p.steps:
        return None
    edit = set_keyword(facts, c, "save_steps", f"{every:g}")
    if edit is None:
        return None
    return Fix(title=f"set save_steps to {every:g} (= eval_steps, inside the {p.steps}-step run)", edits=(edit,))


SAVE_DOC = """No checkpoint is saved before the run's last step: save_steps is past it.

What it flags: a TrainingArguments-family config saving by steps (the default) whose
`save_steps` (default 500) is larger than the run — `max_steps`, or epochs x the rows of
the dataset the script names on disk / (batch x accumulation x processes) — and
`load_best_model_at_end` is not set (that is TP-SCRIPT-BEST-NEVER-SAVED); located on
save_steps (or the config when the default applies).
Why it matters: the Trainer writes no checkpoint before its last step (transformers 5 saves
once there; older versions not at all): a crash at any point loses the whole run, and
there is nothing to resume from. A 3-epoch fine-tune of a few hundred rows is 50-200
steps, far below the default 500.
What it does not mean: that the final model is lost — `trainer.save_model()` after
training still writes it. Unknown lengths (dataset not on disk, values from elsewhere)
make the check say so.
"""


def check_save(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for c, p in _plans(facts):
        if _steps_strategy(c, "save_strategy") is None or setting(c, "load_best_model_at_end").value:
            continue
        every, s = _interval(c, "save_steps")
        if every is None or every <= p.steps:
            continue
        yield Hit(message=(f"{s.said('save_steps')} but the run is {p.words()}: no checkpoint is saved "
                           "before the last step: a crash before then loses the whole run"),
                  evidence={"save_steps": every, "planned_steps": p.steps, "exact": p.exact, "config": c.cls},
                  location=_where(facts, c, s.given), related=_plan_related(facts, p), fix=_save_fix(facts, c, p))


SAVE_RULE = Rule(id="TP-SCRIPT-NO-CHECKPOINT-SAVED", name="no-checkpoint-saved", level=Level.WARN,
                 doc=SAVE_DOC, check=check_save, family=SCRIPT)


BEST_DOC = """load_best_model_at_end=True with no checkpoint saved before the last step: the best is never kept.

What it flags: `load_best_model_at_end=True` with `save_steps` (default 500) larger than
the run's length (max_steps, or epochs x dataset rows / (batch x accumulation x
processes)); located on load_best_model_at_end, with save_steps and the length as
related locations. The fix sets save_steps to eval_steps (a multiple of it inside the run).
Why it matters: the best model is loaded from the best *saved* checkpoint; with only the
last step saved (transformers 5 saves there) the run ends on its last state, whatever
eval said — the option the script asks for silently does nothing (seen in real scripts:
the default save_steps=500 in a 50-180-step run).
What it does not mean: anything when save_strategy is "epoch" or "best", or when the
length is unknown (the check says why).
"""


def check_best(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for c, p in _plans(facts):
        best = setting(c, "load_best_model_at_end")
        if best.value is not True or _steps_strategy(c, "save_strategy") is None:
            continue
        every, s = _interval(c, "save_steps")
        if every is None or every <= p.steps:
            continue
        related = _plan_related(facts, p)
        if s.given is not None:
            related = (Related(location=_where(facts, c, s.given), message=f"save_steps {every:g}"), *related)
        yield Hit(message=(f"load_best_model_at_end=True but {s.said('save_steps')} and the run is {p.words()}: "
                           "no checkpoint is saved before the last step, so the best model by eval is never kept "
                           "(load_best_model_at_end can only load the final state)"),
                  evidence={"save_steps": every, "planned_steps": p.steps, "exact": p.exact, "config": c.cls},
                  location=_where(facts, c, best.given), related=related, fix=_save_fix(facts, c, p))


BEST_RULE = Rule(id="TP-SCRIPT-BEST-NEVER-SAVED", name="best-model-never-saved", level=Level.WARN,
                 doc=BEST_DOC, check=check_best, family=SCRIPT)


EVAL_DOC = """Evaluation by steps never runs during training: eval_steps is past the run's end.

What it flags: `eval_strategy="steps"` whose `eval_steps` (or logging_steps, its
fallback: 500 by default, 10 in TRL) is larger than the run's length (max_steps, or
epochs x dataset rows / (batch x accumulation x processes)); located on eval_steps (or on
eval_strategy when it falls back).
Why it matters: no eval loss is computed while the run goes (transformers 5 evaluates once,
at the last step; older versions not at all) — no early warning of overfitting, no best
model to pick.
What it does not mean: that the model is never evaluated if the script calls
`trainer.evaluate()` itself afterwards.
"""


def check_eval(facts: ScriptFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for c, p in _plans(facts):
        strategy = _steps_strategy(c, "eval_strategy")
        if strategy is None:
            continue
        every, s = _interval(c, "eval_steps")
        if every is None or every <= p.steps:
            continue
        fallback = "eval_steps" not in c.kwargs
        said = s.said("logging_steps") + " (eval_steps unset: it falls back to logging_steps)" if fallback \
            else s.said("eval_steps")
        yield Hit(message=(f"eval_strategy \"steps\" with {said} but the run is {p.words()}: it never evaluates "
                           "during training (at most once, at the last step)"),
                  evidence={"eval_steps": every, "planned_steps": p.steps, "exact": p.exact, "config": c.cls},
                  location=_where(facts, c, s.given if not fallback else strategy.given),
                  related=_plan_related(facts, p))


EVAL_RULE = Rule(id="TP-SCRIPT-EVAL-NEVER-RUN", name="eval-never-runs", level=Level.WARN, doc=EVAL_DOC,
                 check=check_eval, family=SCRIPT)


RULES: tuple[Rule[ScriptFacts, Context], ...] = (SAVE_RULE, BEST_RULE, EVAL_RULE)
