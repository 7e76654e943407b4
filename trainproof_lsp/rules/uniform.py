"""Loss above the loss of a uniform guess over the output classes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from ..core.model import LOSS, Hit, Level, Related, Run
from ._stats import median, rolling_levels, window_for
from .base import Context, METRICS, Rule, Skip, fmt, need, times

DOC = """Where the run ends up, the loss sits above ln(number of classes): worse than guessing.

What it flags: a cross-entropy loss whose level at the end of the log (median of the last
window; the run's best level is never lower) exceeds `margin` x ln(V), where V is the
vocabulary size (language models) or the number of labels (classifiers), from
`--vocab-size`/`--num-classes`, `vocab_size`/`num_classes` in the config, or the
`config.json` beside the log.
Why it matters: predicting every class with equal probability scores exactly ln(V); a
model that settles far above that is confidently wrong — labels that do not match their
inputs (shuffled, misaligned, wrong tokenizer) or an optimizer that blew the weights up. A
single-run loss curve can look healthy in shape while this is true.
Noisy logs: levels are window medians, so no single batch can fire it.
Short logs: it needs `min_points` points; fewer make it NOT-CHECKED with the count.
Resumed runs: judged like any other — the level where the run ends is what counts.
What it does not mean: a high start. Many runs begin above ln(V) — a freshly initialised
head, an mT5 fine-tune at 21.8 with ln(250112) = 12.4 — and fall below it; only where the
run ends up is judged. Without V the check is skipped and says so.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    min_points: int = 3  # a level needs at least a median of 3 logged points
    # 15% above ln(V): a freshly initialised model starts at ln(V) plus a few percent;
    # shuffled labels on a pretrained model stay 50%+ above it.
    margin: float = 1.15


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    if not ctx.num_classes or ctx.num_classes < 2:
        raise Skip("number of classes unknown: pass --vocab-size or --num-classes, set vocab_size or "
                   "num_classes in the config, or keep config.json beside the log")
    loss = need(run, LOSS, limits.min_points, "loss")
    values = loss.values
    n = len(values)
    bound = math.log(ctx.num_classes)
    limit = limits.margin * bound
    w = window_for(n, divisor=10, lo=3, hi=20)
    end = median(values[-w:])
    if end <= limit:
        return
    levels = rolling_levels(values, w, head=False)
    best_idx, best = min(levels, key=lambda t: (t[1], t[0]))
    first = n - w
    yield Hit(
        message=(
            f"loss level {fmt(end)} at the end (steps {loss.steps[first]}-{loss.steps[-1]}) is "
            f"{times(end / bound)} ln({ctx.num_classes}) = {fmt(bound)}, the loss of a uniform guess; its best "
            f"level was {fmt(best)} (limit {limits.margin}x, classes from {ctx.num_classes_source})"
        ),
        evidence={"level": end, "best_level": best, "uniform_bound": bound, "ratio": end / bound,
                  "num_classes": ctx.num_classes, "step": loss.steps[first], "last_step": loss.steps[-1]},
        location=run.location(loss.records[first]),
        related=(Related(location=run.location(loss.records[best_idx]),
                         message=f"best loss level {fmt(best)} around step {loss.steps[best_idx]}"),),
    )


RULE = Rule(id="TP-LOSS-ABOVE-UNIFORM", name="loss-above-uniform", level=Level.FAIL, doc=DOC,
            limits=Limits, check=check, needs=(LOSS,), family=METRICS)
