"""Non-finite values: a NaN/Inf loss, and NaN/Inf gradient norms told apart by shape."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from ..core.model import EVAL_LOSS, GRAD_NORM, LOSS, Hit, Level, Related, Run, Series
from .base import Context, NoLimits, METRICS, Rule, Skip, fmt

NAN_DOC = """The loss is NaN or infinite.

What it flags: every logged loss value that is NaN or +/-Inf; the finding points at the
first one and counts the rest.
Why it matters: once the loss is NaN the weights are NaN too (or soon will be); every
later step is wasted compute.
What it does not mean: nothing about why — usual causes are a learning rate too high,
fp16 overflow without loss scaling, a log of zero, or a bad batch.
"""


def non_finite_hits(run: Run, series: Series, what: str, plural: str) -> Iterator[Hit]:
    """One hit at the first NaN/Inf value of `series`, counting the rest."""
    if series.all_finite:
        return
    bad = [i for i, v in enumerate(series.values) if not math.isfinite(v)]
    if not bad:
        return
    first = bad[0]
    yield Hit(
        message=(
            f"{what} is {series.values[first]} at step {series.steps[first]}; "
            f"{len(bad)} of {len(series)} logged {plural} are not finite (limit 0)"
        ),
        evidence={"first_step": series.steps[first], "count": len(bad), "points": len(series)},
        location=run.location(series.records[first]),
    )


def check_nan_loss(run: Run, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    loss = run.get(LOSS)
    assert loss is not None
    yield from non_finite_hits(run, loss, "loss", "losses")


NAN_RULE = Rule(
    id="TP-NAN", name="non-finite-loss", level=Level.FAIL, doc=NAN_DOC,
    check=check_nan_loss, needs=(LOSS,), origin="trainproof",
    family=METRICS,
)


NAN_EVAL_DOC = """The eval (validation) loss is NaN or infinite.

What it flags: every logged eval or validation loss (`eval_loss`, `val_loss`, `ValLoss`,
`Validation Loss`, `eval/loss`, ...) that is NaN or +/-Inf; the finding points at the first
one and counts the rest. It judges the eval series whatever the train loss does.
Why it matters: the model gives NaN on held-out data — its weights are broken, or its eval
pass overflows (fp16 without loss scaling at eval time); a checkpoint chosen "by eval loss"
is chosen on NaN, and early stopping never fires. A finite train loss does not rescue it:
the train loss can be an average that skipped the bad batches.
Noisy, short and resumed logs: one non-finite value is enough, so it judges a log of any
length (a single eval point included) and is not smoothed; in a file of appended runs each
run is judged on its own, so a NaN in an earlier run is reported against that run.
What it does not mean: nothing about why; an eval set with an empty batch (a division by
zero in the averaging) gives NaN too — check the eval data before the weights.
"""


def check_nan_eval(run: Run, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    ev = run.get(EVAL_LOSS)
    assert ev is not None
    yield from non_finite_hits(run, ev, f"eval loss ({ev.source_name})", "eval losses")


NAN_EVAL_RULE = Rule(
    id="TP-NAN-EVAL", name="non-finite-eval-loss", level=Level.FAIL, doc=NAN_EVAL_DOC,
    check=check_nan_eval, needs=(EVAL_LOSS,),
    family=METRICS,
)


@dataclass(frozen=True, kw_only=True)
class GradLimits:
    # This many non-finite grad norms in a row (or one at the last logged step) is a run
    # whose gradients stay broken: fp16 loss scaling recovers from an overflow within a
    # step or two, so a streak of 3 is no longer a skipped step.
    max_streak: int = 3


NAN_GRAD_DOC = """The gradient norm stays NaN or infinite.

What it flags: a streak of non-finite gradient norms (at least `max_streak` in a row), or a
non-finite gradient norm at the last logged step.
Why it matters: the optimizer is stepping on broken gradients, or every step is being
skipped; either way the run no longer trains.
What it does not mean: isolated overflow steps under fp16 dynamic loss scaling are normal
and are reported as TP-GRAD-OVERFLOW instead.
"""

OVERFLOW_DOC = """Isolated gradient-norm overflows, each followed by finite steps.

What it flags: non-finite gradient norms that are not part of a streak (fewer than
`max_streak` in a row) and after which the gradient norm is finite again.
Why it matters: with fp16 dynamic loss scaling an overflowing step is skipped and the loss
scale lowered; a few are expected early in a run, many mean the scale keeps overflowing.
What it does not mean: not a broken run on its own — it is the scaler doing its job, so
the finding is INFO and leaves the verdict alone; a scale that keeps overflowing shows as a
streak (TP-NAN-GRAD) or in the loss (TP-NAN, TP-DIVERGE).
"""


def _streaks(flags: list[bool]) -> list[tuple[int, int]]:
    out, start = [], None
    for i, bad in enumerate(flags + [False]):
        if bad and start is None:
            start = i
        elif not bad and start is not None:
            out.append((start, i - start))
            start = None
    return out


def _grad_streaks(run: Run) -> tuple[list[tuple[int, int]], list[float]]:
    grad = run.get(GRAD_NORM)
    if grad is None:
        raise Skip("no gradient norm in the log")
    if grad.all_finite:
        return [], list(grad.values)
    flags = [not math.isfinite(v) for v in grad.values]
    return _streaks(flags), list(grad.values)


def check_nan_grad(run: Run, limits: GradLimits, ctx: Context) -> Iterator[Hit]:
    grad = run.get(GRAD_NORM)
    streaks, values = _grad_streaks(run)
    assert grad is not None
    n = len(values)
    for start, length in streaks:
        at_end = start + length == n
        if length >= limits.max_streak or at_end:
            yield Hit(
                message=(
                    f"gradient norm is {values[start]} for {length} logged step(s) in a row from "
                    f"step {grad.steps[start]}"
                    + (" to the end of the log" if at_end else "")
                    + f" (limit: fewer than {limits.max_streak} in a row, and finite at the end)"
                ),
                evidence={"first_step": grad.steps[start], "streak": length, "at_end": at_end},
                location=run.location(grad.records[start]),
            )
            return


NAN_GRAD_RULE = Rule(
    id="TP-NAN-GRAD", name="non-finite-grad-norm", level=Level.FAIL, doc=NAN_GRAD_DOC,
    limits=GradLimits, check=check_nan_grad, needs=(GRAD_NORM,), origin="trainproof",
    family=METRICS,
)


def check_overflow(run: Run, limits: GradLimits, ctx: Context) -> Iterator[Hit]:
    grad = run.get(GRAD_NORM)
    streaks, values = _grad_streaks(run)
    assert grad is not None
    n = len(values)
    isolated = [s for s, length in streaks if length < limits.max_streak and s + length < n]
    if not isolated:
        return
    first = isolated[0]
    steps = [grad.steps[s] for s in isolated]
    shown = ", ".join(str(s) for s in steps[:8]) + (", ..." if len(steps) > 8 else "")
    yield Hit(
        message=(
            f"{len(isolated)} isolated gradient-norm overflow(s) at step(s) {shown}, each followed "
            "by finite steps: consistent with fp16 dynamic loss scaling skipping those steps"
        ),
        evidence={"count": len(isolated), "first_step": steps[0], "points": n},
        location=run.location(grad.records[first]),
        related=tuple(
            Related(location=run.location(grad.records[s]), message=f"overflow at step {grad.steps[s]}")
            for s in isolated[1:6]
        ),
    )


OVERFLOW_RULE = Rule(
    id="TP-GRAD-OVERFLOW", name="grad-norm-overflow", level=Level.INFO, doc=OVERFLOW_DOC,
    limits=GradLimits, check=check_overflow, needs=(GRAD_NORM,),
    family=METRICS,
)

__all__ = ["NAN_RULE", "NAN_EVAL_RULE", "NAN_GRAD_RULE", "OVERFLOW_RULE", "fmt"]
