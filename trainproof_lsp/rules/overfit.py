"""Eval loss climbs while train loss keeps falling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..core.model import EVAL_LOSS, LOSS, Hit, Level, Related, Run
from ._stats import median
from .base import Context, METRICS, Rule, Skip, fmt, need

DOC = """Eval loss rises while train loss keeps falling: the model memorises.

What it flags: an eval-loss series (at least `min_evals` points) whose last value is
more than `max_ratio` times its best, with the last two evals both above the best by
`min_rise` or more — or whose last `several` evals are all `sustained_rise` above it — while the train loss at the end is below the train loss at the
best eval step. The finding names the best eval step and whether a checkpoint from
that step exists beside the log.
Why it matters: every step after the best eval makes the model worse on unseen data;
the checkpoint to keep is the one from the best step — if it was saved.
Noisy logs: eval points are judged as logged (an eval is already an average over a set);
a single noisy eval cannot fire it — two (or `several`) in a row must be up.
Short logs: it needs `min_evals` evals; fewer make it NOT-CHECKED with the count.
Resumed runs: judged like any other — the best eval may be before the resume.
What it does not mean: the run crashed or diverged; the train curve looks healthy.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    min_evals: int = 4  # fewer evals cannot show a minimum followed by a rise
    # Last eval 20% above the best (the published trainproof number): a rise well beyond
    # eval-to-eval noise, which is a few percent on a fixed eval set.
    max_ratio: float = 1.2
    min_rise: float = 0.05  # the last two evals both 5% above the best: the rise persists
    # Or a smaller rise that has lasted: the last 3 evals all 10% above the best. Eval noise
    # on a fixed set is a few percent, so three evals in a row that far up is a trend.
    several: int = 3
    sustained_rise: float = 0.1


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    ev = need(run, EVAL_LOSS, limits.min_evals, "eval loss")
    train = run.get(LOSS)
    if train is None:
        raise Skip("no train loss to compare the eval curve with")
    train = train.finite()
    best_i = min(range(len(ev)), key=lambda i: (ev.values[i], i))
    best, last = ev.values[best_i], ev.values[-1]
    if best <= 0 or best_i >= len(ev) - 2:
        return
    ratio = last / best
    persists = all(v > best * (1 + limits.min_rise) for v in ev.values[-2:])
    sustained = best_i < len(ev) - limits.several and all(
        v > best * (1 + limits.sustained_rise) for v in ev.values[-limits.several:])
    if not ((ratio > limits.max_ratio and persists) or sustained):
        return
    best_step = ev.steps[best_i]
    # Train level at the best eval step vs at the end (medians of nearby points).
    near = [v for s, v in zip(train.steps, train.values) if s <= best_step][-5:]
    end_train = median(train.values[-5:]) if len(train) else float("nan")
    if not near or not end_train < median(near):
        return
    train_at_best = median(near)
    ckpt = run.meta.checkpoint_steps
    if best_step in ckpt:
        saved = f"checkpoint-{best_step} exists beside the log"
    elif run.meta.best_step == best_step and run.meta.best_checkpoint:
        saved = f"the log names {run.meta.best_checkpoint} as best"
    elif ckpt:
        saved = f"no checkpoint from step {best_step} beside the log (saved: {', '.join(map(str, ckpt[:6]))})"
    else:
        saved = f"no checkpoint from step {best_step} found beside the log"
    yield Hit(
        message=(
            f"eval loss rose from its best {fmt(best)} at step {best_step} to {fmt(last)} at step "
            f"{ev.steps[-1]} ({ratio:.2f}x; limit {limits.max_ratio}x) while train loss fell from "
            f"{fmt(train_at_best)} to {fmt(end_train)}; {saved}"
        ),
        evidence={"best_eval": best, "best_step": best_step, "last_eval": last,
                  "last_step": ev.steps[-1], "ratio": ratio, "train_at_best": train_at_best,
                  "train_end": end_train, "best_checkpoint_exists": best_step in ckpt or (
                      run.meta.best_step == best_step and bool(run.meta.best_checkpoint))},
        location=run.location(ev.records[-1]),
        related=(Related(location=run.location(ev.records[best_i]),
                         message=f"best eval loss {fmt(best)} at step {best_step}"),),
    )


RULE = Rule(id="TP-OVERFIT", name="overfitting", level=Level.WARN, doc=DOC, limits=Limits,
            check=check, needs=(EVAL_LOSS,), origin="trainproof", family=METRICS)
