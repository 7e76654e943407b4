"""Loss values a real task cannot produce: negative cross-entropy, a collapse to nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from ..core.model import LOSS, Hit, Level, Related, Run
from ._stats import median, window_for
from ._views import SERIES_WORDS, trend_series
from .base import Context, METRICS, NoLimits, Rule, Skip, fmt, need

NEGATIVE_DOC = """A cross-entropy loss below zero: impossible, the loss is computed wrongly.

What it flags: a train loss with negative values when the run is known to be a classifier
or a language model (the number of classes or the vocabulary is known: `--num-classes`,
`--vocab-size`, the config, or a config.json / hparams.yaml beside the log), whose loss is
then a cross-entropy — a mean of -log p with p <= 1, never below 0. The finding points at
the first negative value and counts them all.
Why it matters: the loss being minimised is not the one the model is meant to learn
(a sign flipped, log-probabilities summed where losses were meant, a label smoothing or
auxiliary term gone wrong); every later number of the run is meaningless.
Noisy logs: one negative value is enough: no noise makes a cross-entropy negative.
Short logs: judged from one point on.
What it does not mean: for losses that may be negative (a Gaussian negative
log-likelihood, a GAN or contrastive objective) the check does not run: without a number
of classes it is skipped and says so.
"""

COLLAPSE_DOC = """The loss collapses to a tiny fraction of its start: a degenerate target.

What it flags: a train loss whose end level (median of the last window) is below
`max_ratio` of its start level (median of the first window) and below `max_end` in
absolute terms.
Why it matters: real tasks keep a floor — a language model's next-token loss stays near
1-3, a classifier's near its label noise. A loss that falls by three or more orders of
magnitude to ~0 is the classic sign of label leakage (the target is in the input, the
labels are copied from the features) or of a degenerate target (every label the same, the
padding counted as the answer).
Noisy logs: both levels are window medians, so a single tiny value does not fire it
(exact zeros are TP-ZERO-LOSS / TP-ZERO-LOSS-ONSET).
Short logs: it needs the trend checks' points (the per-epoch series when there is one).
It judges only a cross-entropy: a run whose classes or vocabulary are known (config.json,
hparams.yaml, `--num-classes`/`--vocab-size`); a regression's error may fall to ~0.
What it does not mean: always a bug — a toy or synthetic task can be learned perfectly;
the finding says the numbers so a reader can tell.
"""


@dataclass(frozen=True, kw_only=True)
class CollapseLimits:
    min_points: int = 10  # the trend checks' minimum: a level of fewer points is one point
    # End level below 1/1000 of the start: three orders of magnitude. Healthy fine-tunes
    # end at 1/2 to 1/100 of their start (a classifier from ln 2 to ~0.01 is 1/70); leaked
    # labels take a language model from ~9 to ~1e-3 (1/10,000).
    max_ratio: float = 1e-3
    # ...and below 0.01 in absolute terms: a regression loss in squared units (1e8 ->
    # 1e4) is not a collapse to nothing.
    max_end: float = 0.01


def check_negative(run: Run, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    if not ctx.num_classes or ctx.num_classes < 2:
        raise Skip("number of classes unknown: the loss may not be a cross-entropy (pass --num-classes or "
                   "--vocab-size, or keep config.json / hparams.yaml beside the log)")
    loss = need(run, LOSS, 1, "loss")
    negative = [i for i, v in enumerate(loss.values) if v < 0]
    if not negative:
        return
    first = negative[0]
    low = min(negative, key=lambda i: (loss.values[i], i))
    yield Hit(
        message=(
            f"train loss is negative at {len(negative)} of {len(loss)} points (steps {loss.steps[0]}-"
            f"{loss.steps[-1]}), first {fmt(loss.values[first])} at step {loss.steps[first]}, lowest "
            f"{fmt(loss.values[low])} at step {loss.steps[low]}: a cross-entropy over {ctx.num_classes} classes "
            f"(from {ctx.num_classes_source}) is never below 0"
        ),
        evidence={"count": len(negative), "points": len(loss), "first_step": loss.steps[first],
                  "first_value": loss.values[first], "min_value": loss.values[low],
                  "num_classes": ctx.num_classes},
        location=run.location(loss.records[first]),
        related=() if low == first else (
            Related(location=run.location(loss.records[low]),
                    message=f"lowest loss {fmt(loss.values[low])} at step {loss.steps[low]}"),),
    )


def check_collapse(run: Run, limits: CollapseLimits, ctx: Context) -> Iterator[Hit]:
    # Only a cross-entropy keeps a floor: a regression's squared error on clean targets
    # falls to ~1e-4 of its start when it learns (a Lightning MSE fit on a linear target
    # does), so the rule judges only runs whose classes or vocabulary are known.
    if not ctx.num_classes or ctx.num_classes < 2:
        raise Skip("number of classes unknown: the loss may be a regression's, which can fall to ~0 (pass "
                   "--num-classes or --vocab-size, or keep config.json / hparams.yaml beside the log)")
    loss = trend_series(run, limits.min_points)
    values = loss.values
    w = window_for(len(values), divisor=5, lo=3, hi=20)
    start, end = median(values[:w]), median(values[-w:])
    if not (start > 0 and math.isfinite(start)) or end < 0:
        return
    ratio = end / start
    if ratio >= limits.max_ratio or end >= limits.max_end:
        return
    what = SERIES_WORDS[loss.name]
    evidence: dict[str, float | int | str] = {"start_level": start, "end_level": end, "ratio": ratio}
    if loss.name != LOSS:
        evidence["series"] = loss.name
    yield Hit(
        message=(
            f"{what} collapsed from {fmt(start)} to {fmt(end)} over steps {loss.steps[0]}-{loss.steps[-1]} "
            f"({len(values)} points; medians of the first and last {w}): {ratio:.2g} of its start (limit "
            f"{limits.max_ratio:g}) and below {limits.max_end:g}; a real task keeps a floor — check for labels "
            "leaking into the inputs or a degenerate target"
        ),
        evidence=evidence,
        location=run.location(loss.records[-1]),
    )


NEGATIVE_RULE = Rule(id="TP-NEGATIVE-LOSS", name="negative-loss", level=Level.FAIL, doc=NEGATIVE_DOC,
                     check=check_negative, needs=(LOSS,), family=METRICS)
COLLAPSE_RULE = Rule(id="TP-LOSS-COLLAPSE", name="loss-collapse", level=Level.WARN, doc=COLLAPSE_DOC,
                     limits=CollapseLimits, check=check_collapse, needs=(LOSS,), family=METRICS)
