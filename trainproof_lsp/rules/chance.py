"""The loss sits at ln(number of classes): the model predicts no better than chance."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from ..core.model import EVAL_ACCURACY, LOSS, Hit, Level, Related, Run
from ._stats import MAD_TO_SIGMA, mad, median, rolling_levels, window_for
from ._views import SERIES_WORDS, trend_series
from .base import Context, METRICS, Rule, Skip, fmt, need

DOC = """The loss stays at ln(C): the model predicts no better than a uniform guess.

What it flags: a cross-entropy loss whose level (rolling median) stays in a band around
ln(C) — at it, above or below — from some point to the end of the log, for at least
`min_fraction` of the logged points (and `min_points` of them): for the whole run, or after the run returned there. C is the
number of labels of a classifier or the vocabulary of a language model. The band is the
larger of `tolerance` of ln(C) and `noise_sigmas` spreads of a rolling median at the run's
own point noise (1.4826 x MAD of its first differences / sqrt 2), so a loss at ln 2 at the
noise of a small batch stays in it. C comes
from `--num-classes`/`--vocab-size`, `num_classes`/`vocab_size` in the config, or the
`config.json` beside the log (`num_labels` or `id2label` for a classifier; a
`single_label_classification` config that names no labels has transformers' default of 2).
When the log carries an eval accuracy, its last value is reported beside 1/C: accuracy near
chance corroborates the finding.
Why it matters: ln(C) is exactly the loss of predicting every class with equal probability.
A classifier whose labels were shuffled, or one a learning rate too hot collapsed onto one
class, sits there for good while its curve looks calm; so does a language model that
learned nothing.
Noisy logs: levels are window medians; when the log carries the train loss per step and
per epoch it judges the per-epoch series.
Short logs: it needs `min_points` points (train loss, or the eval loss when the train loss
is too short); fewer make it NOT-CHECKED with the count.
Resumed runs: judged like any other — a run resumed at ln(C) is still at chance.
What it does not mean: a run that passes through ln(C) on its way down (a language model
trained from scratch starts there). Without C the check is skipped and says so.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    min_points: int = 10  # the trend checks' minimum: fewer points say nothing about staying
    # 3% of ln(C): a 2-class model at 0.672 (3% under ln 2 = 0.693) gives the right class
    # ~51% on average — a coin flip; batch noise of a loss that sits still is about this size.
    tolerance: float = 0.03
    # Where the run settled, not a crossing: the stay covers a third of the log at least.
    min_fraction: float = 1 / 3
    # Eval accuracy within 0.05 of 1/C is "at chance" (a collapsed classifier scores the
    # majority-class share, which on a balanced set is 1/C).
    accuracy_margin: float = 0.05
    # The band widens with the run's own noise: 3 spreads of a window median (the point
    # noise, 1.4826 x MAD of first differences / sqrt 2, times 1.25 / sqrt(window) for a
    # median) — a loss at ln 2 at the noise of a batch of 16 has rolling medians that leave
    # a fixed 3% band by chance; 3 spreads leave it ~0.3% of the time.
    noise_sigmas: float = 3.0


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    if not ctx.num_classes or ctx.num_classes < 2:
        raise Skip("number of classes unknown: pass --num-classes or --vocab-size, set num_classes or "
                   "vocab_size in the config, or keep config.json beside the log")
    loss = trend_series(run, limits.min_points)
    what = SERIES_WORDS[loss.name]
    values = loss.values
    n = len(values)
    bound = math.log(ctx.num_classes)
    w = window_for(n, divisor=10, lo=3, hi=20)
    diffs = [b - a for a, b in zip(values, values[1:])]
    noise = MAD_TO_SIGMA * mad(diffs) / math.sqrt(2.0)
    half = max(limits.tolerance * bound, limits.noise_sigmas * 1.25 * noise / math.sqrt(w))
    lo, hi = bound - half, bound + half
    levels = rolling_levels(values, w, head=False)
    first = len(levels)
    while first > 0 and lo <= levels[first - 1][1] <= hi:
        first -= 1
    if first == len(levels):
        return
    # The stay starts at the first in-band point of the first window whose level is in the band.
    if first == 0:
        start = 0
    else:
        j = levels[first][0]
        start = next((k for k in range(max(0, j - w + 1), j + 1) if lo <= values[k] <= hi), j)
    stayed = n - start
    if stayed < limits.min_points or stayed < limits.min_fraction * n:
        return
    level = median(values[start:])
    evidence: dict[str, float | int | str | bool] = {
        "level": level, "uniform_bound": bound, "ratio": level / bound, "num_classes": ctx.num_classes,
        "step": loss.steps[start], "last_step": loss.steps[-1], "points": stayed, "band": half}
    if loss.name != LOSS:
        evidence["series"] = loss.name
    related: tuple[Related, ...] = ()
    acc_text = ""
    acc = run.get(EVAL_ACCURACY)
    if acc is not None and len(acc.finite()):
        acc = acc.finite()
        chance = 1 / ctx.num_classes
        at_chance = abs(acc.values[-1] - chance) <= limits.accuracy_margin
        evidence.update(eval_accuracy=acc.values[-1], chance_accuracy=chance, accuracy_at_chance=at_chance)
        acc_text = (f"; eval accuracy {acc.values[-1]:.3g} at step {acc.steps[-1]} "
                    f"{'is' if at_chance else 'is not'} near chance 1/{ctx.num_classes} = {chance:.3g}")
        related = (Related(location=run.location(acc.records[-1]),
                           message=f"eval accuracy {acc.values[-1]:.3g} (chance {chance:.3g})"),)
    whole = "for the whole log" if start == 0 else f"from step {loss.steps[start]} to the end"
    yield Hit(
        message=(
            f"{what} stays at {fmt(level)}, within {half / bound:.1%} of ln({ctx.num_classes}) = "
            f"{fmt(bound)} (a uniform guess), {whole} ({stayed} of {n} points, steps {loss.steps[start]}-"
            f"{loss.steps[-1]}; classes from {ctx.num_classes_source}; band the larger of {limits.tolerance:.0%} and "
            f"{limits.noise_sigmas:g} spreads of a {w}-point median at the point noise {fmt(noise)}){acc_text}"
        ),
        evidence=evidence,
        location=run.location(loss.records[start]),
        related=related,
    )


RULE = Rule(id="TP-AT-CHANCE", name="at-chance", level=Level.FAIL, doc=DOC, limits=Limits,
            check=check, needs=(LOSS,), family=METRICS)


EVAL_ACC_DOC = """Eval accuracy stays at chance: the classifier predicts no better than a guess.

What it flags: an eval-accuracy series of at least `min_evals` evals that shows no
learning on its own, whatever the loss says: with C classes known, the median eval sits
within `margin` of 1/C and no eval reaches 1/C + 2 x `margin`; with or without C, one value
repeated at `constant_share` of the evals or more (below `max_constant`) — the score of a
model that predicts one class every time, which is that class's share of the eval set.
Why it matters: a classifier whose labels were shuffled, or one a hot learning rate
collapsed onto one class, scores chance on held-out data at every eval while its loss
may drift enough to look like learning.
Noisy logs: the median of all evals is compared, and the band is wide enough for the
binomial noise of a small eval set (0.45-0.55 around 0.5 on ~400 samples).
Short logs: it needs `min_evals` evals; fewer make it NOT-CHECKED with the count.
What it does not mean: a constant perfect score (1.0, or at least `max_constant`) is a
solved eval set, not a collapse; it is not flagged.
"""


@dataclass(frozen=True, kw_only=True)
class EvalAccuracyLimits:
    # Five evals: a median of fewer is one or two values, and a repeat of 4 of 5 is a pattern.
    min_evals: int = 5
    # 0.05 around 1/C: on a balanced eval set of a few hundred samples a guessing model
    # scores 1/C +- 0.025 (one binomial sigma at n=400, C=2); twice that is the band.
    margin: float = 0.05
    # The same value at 80% of the evals: a learning model's accuracy moves from eval to
    # eval; a model predicting one class scores that class's share every time.
    constant_share: float = 0.8
    # A constant at or above 0.95 is a solved (or tiny) eval set, not a collapse.
    max_constant: float = 0.95


def check_eval_accuracy(run: Run, limits: EvalAccuracyLimits, ctx: Context) -> Iterator[Hit]:
    acc = need(run, EVAL_ACCURACY, limits.min_evals, "eval accuracy")
    values = list(acc.values)
    n = len(values)
    span = f"{n} evals, steps {acc.steps[0]}-{acc.steps[-1]}"
    location = run.location(acc.records[-1])
    counts: dict[float, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    value, repeats = max(counts.items(), key=lambda kv: (kv[1], -kv[0]))
    if repeats >= limits.constant_share * n and value < limits.max_constant:
        yield Hit(
            message=(
                f"eval accuracy ({span}) is {value:.4g} at {repeats} of {n} evals (limit {limits.constant_share:.0%}): "
                "a model that predicts one class scores that class's share every time"
            ),
            evidence={"value": value, "repeats": repeats, "evals": n},
            location=location,
        )
        return
    if ctx.num_classes and ctx.num_classes >= 2:
        chance = 1 / ctx.num_classes
        level, top = median(values), max(values)
        if abs(level - chance) <= limits.margin and top < chance + 2 * limits.margin:
            yield Hit(
                message=(
                    f"eval accuracy ({span}) has median {level:.4g} and best {top:.4g}: at chance 1/{ctx.num_classes} "
                    f"= {chance:.4g} (limits: median within {limits.margin} of it, no eval {2 * limits.margin:.2g} "
                    f"above it; classes from {ctx.num_classes_source})"
                ),
                evidence={"median_accuracy": level, "best_accuracy": top, "chance_accuracy": chance,
                          "num_classes": ctx.num_classes, "evals": n},
                location=location,
            )


EVAL_ACC_RULE = Rule(id="TP-EVAL-ACC-AT-CHANCE", name="eval-accuracy-at-chance", level=Level.WARN,
                     doc=EVAL_ACC_DOC, limits=EvalAccuracyLimits, check=check_eval_accuracy,
                     needs=(EVAL_ACCURACY,), family=METRICS)
