"""Loss above the loss of a uniform guess over the output classes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from ..model import LOSS, Hit, Level, Run
from ._stats import rolling_levels
from .base import Context, Rule, Skip, fmt, need

DOC = """The loss sits above ln(number of classes): worse than guessing uniformly.

What it flags: a cross-entropy loss whose rolling median (`window` points) exceeds
`margin` x ln(V), where V is the vocabulary size (language models) or the number of
labels (classifiers), from `--vocab-size`, `vocab_size` in the config, or the
`config.json` beside the log.
Why it matters: predicting every class with equal probability scores exactly ln(V); a
model far above that is confidently wrong — labels that do not match their inputs
(shuffled, misaligned, wrong tokenizer) or an optimizer that blew the weights up. A
single-run loss curve can look healthy in shape while this is true.
What it does not mean: a from-scratch run starts near ln(V) and is fine; the margin
keeps it from firing there. Without V the check is skipped and says so.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    window: int = 3  # a median of 3 logged points: one bad batch cannot fire it
    # 15% above ln(V): a freshly initialised model starts at ln(V) plus a few percent;
    # shuffled labels on a pretrained model start 50%+ above it.
    margin: float = 1.15


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    if not ctx.num_classes or ctx.num_classes < 2:
        raise Skip("number of classes unknown: pass --vocab-size, set vocab_size in the config, "
                   "or keep config.json beside the log")
    loss = need(run, LOSS, limits.window, "loss")
    bound = math.log(ctx.num_classes)
    limit = limits.margin * bound
    levels = rolling_levels(loss.values, limits.window, head=False)
    above = [(i, lv) for i, lv in levels if lv > limit]
    if not above:
        return
    idx, level = max(above, key=lambda t: t[1])
    lo = max(0, idx - limits.window + 1)
    yield Hit(
        message=(
            f"loss level {fmt(level)} over steps {loss.steps[lo]}-{loss.steps[idx]} is "
            f"{level / bound:.2f}x ln({ctx.num_classes}) = {fmt(bound)}, the loss of a uniform guess "
            f"(limit {limits.margin}x, classes from {ctx.num_classes_source})"
        ),
        evidence={"level": level, "uniform_bound": bound, "ratio": level / bound,
                  "num_classes": ctx.num_classes, "step": loss.steps[lo], "last_step": loss.steps[idx],
                  "points_above": len(above)},
        location=run.location(loss.records[lo]),
    )


RULE = Rule(id="TP-LOSS-ABOVE-UNIFORM", name="loss-above-uniform", level=Level.FAIL, doc=DOC,
            limits=Limits, check=check, needs=(LOSS,))
