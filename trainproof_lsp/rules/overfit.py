"""Eval loss climbs while train loss keeps falling."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from ..core.model import EVAL_LOSS, LOSS, Hit, Level, Related, Run
from ._stats import centred_medians, mann_kendall_z, median, point_noise
from .base import Context, METRICS, Rule, Skip, fmt, need, times

DOC = """Eval loss rises while train loss keeps falling: the model memorises.

What it flags: an eval-loss series (at least `min_evals` points) whose smoothed level (the
median of each eval with its neighbours, `smooth` each side) rose from its lowest point to
the end: the end level (median of the last `several` evals, all above the lowest level) is
more than `rise_noise` times the eval series' own noise above it and at least `min_rise`
above it, the evals from the lowest level on rise with a Mann-Kendall z of `rise_z` or more
— while the train loss fell from the best eval's step to the end by more than `train_noise`
times its level noise. The finding names the best eval step and whether a checkpoint from
that step exists beside the log.
Why it matters: every step after the best eval makes the model worse on unseen data;
the checkpoint to keep is the one from the best step — if it was saved.
Noisy logs: the noise is the eval series' own (the robust spread of its eval-to-eval
differences), and the rise is measured between smoothed levels, so a one-off low eval in a
noisy plateau is not a best to rise from; the train fall is measured against the train
loss's own noise, so a plateau that drifts by a percent is not "still falling".
Short logs: it needs `min_evals` evals; fewer make it NOT-CHECKED with the count.
Resumed runs: judged like any other — the best eval may be before the resume.
What it does not mean: the run crashed or diverged; the train curve looks healthy.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    # Fewer evals cannot show a minimum, a rise and its persistence (a level of 3 evals at
    # the bottom and 3 at the end, apart).
    min_evals: int = 5
    # Levels are medians of an eval and one neighbour each side: one low (or high) eval in
    # a noisy plateau moves no level.
    smooth: int = 1
    # The end level is the median of the last 3 evals, each above the lowest level: a rise
    # that has lasted three evaluations, not one bad eval.
    several: int = 3
    # The end level must be 1.4 noise units above the lowest. Levels are medians of 3
    # (spread ~0.67 sigma each), so two of them differ by ~0.95 sigma: 1.4 sigma is ~1.5 of
    # those, which a noisy plateau reaches between two given levels ~7% of the time; the
    # all-above and trend conditions remove most of those. Set on the calibration sample
    # (its overfit runs rise 1.5-20 noise units, its healthy runs fail the other conditions).
    rise_noise: float = 1.4
    # And 5% above it: on a series almost free of noise a rise of a fraction of a percent is
    # many noise units but no harm to the model.
    min_rise: float = 0.05
    # The evals from the lowest level to the end lean upward (Mann-Kendall z >= 0.5, more
    # rising pairs than falling): a plateau that wanders after its lowest point scores
    # around 0 or below; a noisy overfit's short tail is too short to reach significance.
    rise_z: float = 0.5
    # The train loss fell by more than 2 of its own level noise (point noise / sqrt(points
    # in the level window)) from the best eval's step to the end: the train curve is really
    # still falling, not a plateau drifting by a percent.
    train_noise: float = 2.0
    # Train levels are medians of up to 5 points at each end of the comparison.
    train_window: int = 5


# An eval-to-eval noise under a billionth of the series' level is floating-point residue
# (a noise-free series' second differences leave ~1e-16), not noise: it is reported as none
# rather than as a rise of quadrillions of noise units.
ROUNDING_NOISE = 1e-9

def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    ev = need(run, EVAL_LOSS, limits.min_evals, "eval loss")
    train = run.get(LOSS)
    if train is None:
        raise Skip("no train loss to compare the eval curve with")
    train = train.finite()
    values = list(ev.values)
    n = len(values)
    levels = centred_medians(values, limits.smooth)
    # The lowest level before the end window (earliest of equals).
    last_start = n - limits.several
    best_i = min(range(last_start), key=lambda i: (levels[i], i)) if last_start > 0 else 0
    best_level = levels[best_i]
    end_level = median(values[last_start:])
    noise = point_noise(values)
    if noise <= ROUNDING_NOISE * abs(median(values)):
        noise = 0.0  # the rounding residue of the differences of a noise-free series
    if best_level <= 0 or best_i >= last_start:
        return
    rise = end_level - best_level
    if not (rise > limits.rise_noise * noise and end_level >= best_level * (1 + limits.min_rise)
            and all(v > best_level for v in values[last_start:])):
        return
    z = mann_kendall_z(values[best_i:])
    if z < limits.rise_z:
        return
    # The best eval itself: the lowest eval within the best level's neighbourhood.
    lo_i, hi_i = max(0, best_i - limits.smooth), min(n, best_i + limits.smooth + 1)
    best_eval_i = min(range(lo_i, hi_i), key=lambda i: (values[i], i))
    best_step = ev.steps[best_eval_i]
    # Train level at the best eval step vs at the end (medians of nearby points).
    near = [v for s, v in zip(train.steps, train.values) if s <= best_step][-limits.train_window:]
    if len(near) < 1 or len(train) < 2:
        return
    train_at_best = median(near)
    end_train = median(train.values[-limits.train_window:])
    train_level_noise = point_noise(train.values) / math.sqrt(min(len(near), limits.train_window))
    train_fall = train_at_best - end_train
    if not train_fall > limits.train_noise * train_level_noise:
        return
    ckpt = run.meta.checkpoint_steps
    if best_step in ckpt:
        saved = f"checkpoint-{best_step} exists beside the log"
    elif run.meta.best_step == best_step and run.meta.best_checkpoint:
        saved = f"the log names {run.meta.best_checkpoint} as best"
    elif ckpt:
        saved = f"no checkpoint from step {best_step} beside the log (saved: {', '.join(map(str, ckpt[:6]))})"
    else:
        saved = f"no checkpoint from step {best_step} found beside the log"
    ratio = end_level / best_level
    window = 2 * limits.smooth + 1
    yield Hit(
        message=(
            f"eval loss ({n} evals, steps {ev.steps[0]}-{ev.steps[-1]}): its level (median of {window} evals) "
            f"rose from its lowest {fmt(best_level)} at step {ev.steps[best_i]} to {fmt(end_level)} over the last "
            f"{limits.several} evals (to step {ev.steps[-1]}; {times(ratio)}, "
            f"{f'{rise / noise:.1f} times its eval-to-eval noise {fmt(noise)}' if noise else 'the evals have no eval-to-eval noise'}; limits {limits.rise_noise} noise and {limits.min_rise:.0%}), "
            f"rising with z {z:.2f} (limit {limits.rise_z}); the best eval {fmt(values[best_eval_i])} was at step "
            f"{best_step}; train loss fell from {fmt(train_at_best)} to {fmt(end_train)} "
            f"(median of {limits.train_window} points each; {train_fall / train_level_noise if train_level_noise else math.inf:.1f} "
            f"times its level noise, limit {limits.train_noise}); {saved}"
        ),
        evidence={"best_eval": values[best_eval_i], "best_step": best_step, "best_level": best_level,
                  "end_level": end_level, "last_eval": values[-1],
                  "last_step": ev.steps[-1], "ratio": ratio, "eval_noise": noise, "rise_z": z,
                  "train_at_best": train_at_best,
                  "train_end": end_train, "best_checkpoint_exists": best_step in ckpt or (
                      run.meta.best_step == best_step and bool(run.meta.best_checkpoint))},
        location=run.location(ev.records[-1]),
        related=(Related(location=run.location(ev.records[best_eval_i]),
                         message=f"best eval loss {fmt(values[best_eval_i])} at step {best_step}"),),
    )


RULE = Rule(id="TP-OVERFIT", name="overfitting", level=Level.WARN, doc=DOC, limits=Limits,
            check=check, needs=(EVAL_LOSS,), origin="trainproof", family=METRICS)
