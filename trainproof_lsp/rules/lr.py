"""A learning rate of zero: the optimizer takes no steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..core.model import LR, Hit, Level, Run
from ._views import judged_on
from .base import Context, NoLimits, METRICS, Rule, all_zero, need, whole_series_hit

ZERO_DOC = """The learning rate is zero at every logged step.

What it flags: a learning-rate series (at least 2 points) that is 0.0 throughout.
Why it matters: with a zero learning rate the optimizer never changes the weights; any
movement of the loss is batch-order noise. Usually a typo, a scheduler misconfiguration
or a warmup longer than the run.
What it does not mean: nothing about a schedule that merely ends at zero.
"""


def check_zero_lr(run: Run, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    lr = need(run, LR, 2, "learning rate")
    if all_zero(lr):
        yield whole_series_hit(run, lr, "learning rate is 0 at all {points} logged steps ({first_step}-{last_step})")


ZERO_LR_RULE = Rule(
    id="TP-ZERO-LR", name="zero-learning-rate", level=Level.FAIL, doc=ZERO_DOC,
    check=check_zero_lr, needs=(LR,), origin="trainproof",
    family=METRICS,
)


@dataclass(frozen=True, kw_only=True)
class PartialLimits:
    # More than 10% of logged steps at exactly zero is not a schedule's endpoint (which
    # is one point) but a stretch of training that changes nothing.
    max_zero_fraction: float = 0.1


PARTIAL_DOC = """The learning rate is zero for a stretch of the run.

What it flags: more than `max_zero_fraction` of the logged learning rates are exactly 0.0
(but not all of them).
Why it matters: those steps train nothing — often a warmup or restart misconfigured, or
a scheduler that reached zero early.
What it does not mean: a schedule that starts its warm-up at zero, decays to zero at its
last step, or touches zero at the boundaries of a cosine-with-restarts cycle: a lone zero
(one logged point between non-zero ones, or at either end) is the schedule, not a stretch,
and is not counted — only zeros in a stretch of two or more logged points are.
"""


def check_zero_lr_partial(run: Run, limits: PartialLimits, ctx: Context) -> Iterator[Hit]:
    lr = need(run, LR, 2, "learning rate")
    values, n = lr.values, len(lr)
    # A schedule's ends are one point each however short the log: HF logs lr 0 at the
    # first step of a warm-up, and a linear decay reaches 0 at the last step. A lone zero
    # there is the schedule, not a stretch, so it is not counted.
    lone = {i for i, nb in ((0, 1), (n - 1, n - 2)) if values[i] == 0.0 and values[nb] != 0.0}
    if values.count(0.0) - len(lone) <= limits.max_zero_fraction * n:
        return
    # A restart schedule reaches zero at the end of each cycle and starts the next one: a
    # zero between two non-zero points is one such boundary, whatever how many cycles.
    lone |= {i for i in range(1, n - 1) if values[i] == 0.0 and values[i - 1] != 0.0 and values[i + 1] != 0.0}
    zeros = [i for i, v in enumerate(values) if v == 0.0 and i not in lone]
    fraction = len(zeros) / len(lr)
    if zeros and len(zeros) < len(lr) and fraction > limits.max_zero_fraction:
        first = zeros[0]
        yield Hit(
            message=(
                f"learning rate is 0 at {len(zeros)} of {len(lr)} logged steps ({fraction:.0%}; limit "
                f"{limits.max_zero_fraction:.0%}), first at step {lr.steps[first]}; "
                + judged_on(run, lr, window="a lone zero between non-zero points is a restart boundary, not counted")
            ),
            evidence={"zero_points": len(zeros), "points": len(lr), "fraction": fraction,
                      "first_step": lr.steps[first]},
            location=run.location(lr.records[first]),
        )


ZERO_LR_PARTIAL_RULE = Rule(
    id="TP-ZERO-LR-PARTIAL", name="zero-learning-rate-partial", level=Level.WARN, doc=PARTIAL_DOC,
    limits=PartialLimits, check=check_zero_lr_partial, needs=(LR,), origin="trainproof",
    family=METRICS,
)
