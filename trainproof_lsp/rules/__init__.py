"""The rule registry: one explicit tuple, in the order rules run and are documented.

Docs (docs/rules.md), hover text and SARIF rule metadata are all generated from these
entries; tests/test_registry.py fails when they drift.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ..core.model import Level, Run
from . import chance, compare, dead, degenerate, diverge, eventfile, flat, lr, nonfinite, overfit, spikes, steps, timing, uniform, zero
from . import loss_parts, loss_scale
from . import preference, rl, objective_compare
from . import checkpoint, entrypoint, env, script, script_best_strategy
from . import script_api, script_lora, script_precision, script_run
from . import dataset, tokenizer, tokens
from . import token_map
from . import speech
from . import labels
from . import bundle
from .base import ANY, METRICS, Context, Family, Rule, Skip

NOT_CHECKED_DOC = """The artefact could not be judged.

What it flags: a file that could not be read as what it looks like (empty, binary,
truncated, malformed, or a layout with no loss to judge); the message says why, with
the line where the reader stopped when there is one. Also a check you asked for that
could not run (`--max-len` without the optional transformers package, or with a
tokenizer folder transformers cannot load): the rest of the file is still judged. And a
training log too short for the trend checks (TP-DIVERGE, TP-DEAD-RUN): the message says how
many points it has and how many they need, so a short log is never a bare PASS.
Why it matters: nothing was checked, so nothing can be said about the run — this is
never a pass and never a failure (exit code 2).
What it does not mean: that the run is broken; only that this file (or the check named)
told us nothing.
"""

# A security rule: ignoring it would turn a file that could not be read (a checkpoint
# whose pickle was never walked among them) into a pass.
NOT_CHECKED = Rule(id="TP-NOT-CHECKED", name="not-checked", level=Level.NOT_CHECKED,
                   doc=NOT_CHECKED_DOC, family=ANY, origin="trainproof", security=True)

SKIPPED_RECORDS_DOC = """Some records of a log could not be used and were read past.

What it flags: log entries or rows without a usable step, values that are not numbers
(text, null), or lines that are not JSON objects; the first is located and the rest
counted.
Why it matters: every curve rule ran without those points, so a problem there would not
be seen; nothing is dropped silently.
What it does not mean: a broken run — it is INFO and never changes a verdict.
"""

SKIPPED_RECORDS = Rule(id="TP-SKIPPED-RECORDS", name="skipped-records", level=Level.INFO,
                       doc=SKIPPED_RECORDS_DOC, family=METRICS)

# Rules of every family side by side; `rules_of` gives one family's rules, typed.
REGISTRY: tuple[Rule[Any, Any], ...] = (
    nonfinite.NAN_RULE,
    nonfinite.NAN_GRAD_RULE,
    nonfinite.OVERFLOW_RULE,
    *loss_scale.RULES,  # rules/loss_scale.py: fp16 loss scale halving to its floor, and at it
    *preference.RULES,  # rules/preference.py: DPO-family runs by their reward margins and log-probs
    *rl.RULES,  # rules/rl.py: GRPO/PPO-family runs by their rewards, KL, entropy, lengths
    zero.ZERO_LOSS_RULE,
    zero.ZERO_ONSET_RULE,
    zero.ZERO_GRAD_RULE,
    degenerate.NEGATIVE_RULE,  # rules/degenerate.py: a cross-entropy below 0
    degenerate.COLLAPSE_RULE,  # ...and one that collapses to ~0 (label leakage)
    flat.RULE,
    dead.RULE,
    loss_parts.RULE,  # rules/loss_parts.py: a task part of a composite loss stands still
    diverge.RULE,
    spikes.LOSS_SPIKE_RULE,
    spikes.LOSS_SPIKE_UNRECOVERED_RULE,
    spikes.GRAD_SPIKE_RULE,
    uniform.RULE,
    chance.RULE,  # TP-AT-CHANCE: loss stays at ln(C)
    chance.EVAL_ACC_RULE,  # TP-EVAL-ACC-AT-CHANCE: eval accuracy at 1/C or one class's share
    lr.ZERO_LR_RULE,
    lr.ZERO_LR_PARTIAL_RULE,
    overfit.RULE,
    steps.RULE,
    # Log structure and every loss series: appended runs split, eval losses judged.
    steps.APPENDED_RULE,
    nonfinite.NAN_EVAL_RULE,
    timing.STEP_CLIFF_RULE,
    timing.LOADER_BOUND_RULE,
    timing.THROUGHPUT_RULE,
    eventfile.TRUNCATED_RULE,
    eventfile.CORRUPT_RULE,
    compare.FLOOR_RULE,
    compare.END_RULE,
    compare.NEG_RULE,
    compare.DEFICIT_RULE,
    compare.GRADNORM_RULE,
    compare.EVAL_BEST_RULE,
    compare.EVAL_END_RULE,
    compare.OVERFIT_RULE,
    compare.BAD_BASELINE_RULE,
    compare.UNCOMPARABLE_RULE,
    compare.CMP_ERROR_RULE,
    *objective_compare.RULES,  # rules/objective_compare.py: a DPO/GRPO run's reward or margins vs the baseline's
    *checkpoint.RULES,  # explicit tuples in rules/checkpoint.py, rules/script.py, rules/env.py
    *script.RULES,
    script_best_strategy.RULE,  # rules/script_best_strategy.py
    *script_run.RULES,  # rules/script_run.py: the config against the run's length
    *script_precision.RULES,  # rules/script_precision.py: the config's precision against the model
    *script_lora.RULES,  # rules/script_lora.py: LoRA's target_modules against the model's modules
    *env.RULES,
    *script_api.RULES,  # rules/script_api.py: the script's library calls against installed signatures
    entrypoint.FROM_CWD_RULE,
    *dataset.DATASET_RULES,  # rules/dataset.py, rules/tokens.py, rules/tokenizer.py
    *tokens.TOKEN_RULES,
    *token_map.RULES,  # rules/token_map.py: the trained-tokens map of a dataset
    *tokenizer.TOKENIZER_RULES,
    *speech.SPEECH_RULES,  # rules/speech.py: speech/TTS listings and their audio
    *labels.RULES,  # rules/labels.py: the objective's targets (ignore_index, range, classes, shift)
    *bundle.RULES,  # rules/bundle.py: an output folder's files checked against each other
    SKIPPED_RECORDS,
    NOT_CHECKED,
)

BY_ID: dict[str, Rule[Any, Any]] = {r.id: r for r in REGISTRY}
# The rules a settings file in the tree being checked cannot turn off (Rule.security).
SECURITY_IDS: frozenset[str] = frozenset(r.id for r in REGISTRY if r.security)


S = TypeVar("S")
C = TypeVar("C")


def rules_of(family: Family[S, C]) -> tuple[Rule[S, C], ...]:
    """The rules of one family that have a check, in registry order: the judge calls
    each with that family's subject and context."""
    return tuple(r for r in REGISTRY if r.family is family and r.check is not None)


def metric_rules() -> tuple[Rule[Run, Context], ...]:
    return rules_of(METRICS)


__all__ = ["REGISTRY", "BY_ID", "SECURITY_IDS", "Rule", "Skip", "Context", "NOT_CHECKED", "SKIPPED_RECORDS", "metric_rules", "rules_of", "Family", "METRICS"]
