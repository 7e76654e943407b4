"""fp16 dynamic loss scaling: a scale that keeps halving toward its floor, and a scaler
that reached its floor and stopped the run.

A dynamic loss scaler (DeepSpeed, Megatron, apex, torch.amp) multiplies the loss before
the backward pass so fp16 gradients do not underflow; on an overflow it skips the step and
halves the scale, and after a window of clean steps it doubles it again. Text logs state
it (readers/stdout_log.py): DeepSpeed's `OVERFLOW! ... Attempted loss scale: X, reducing
to Y` lines, Megatron's `loss scale:` field, DeepSpeed's `Current loss scale already at
minimum` exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..core.model import LOSS_SCALE, LOSS_SCALE_AT_MINIMUM, Hit, Level, Related, Run
from .base import Context, METRICS, NoLimits, Rule, fmt

COLLAPSE_DOC = """The fp16 loss scale keeps halving toward its floor.

What it flags: a loss scale that fell `min_halvings` or more times in a row with no growth
between, to `max_scale` or lower, and had not grown back by the end of the log. The finding
points at the first fall of that streak, with its last fall related.
Why it matters: each fall is a skipped optimizer step whose gradients overflowed even at
the lower scale. When a scale this low still overflows, the gradients or activations are
inf/NaN whatever the scale is (a learning rate too high, a bad batch, fp16 activations out
of range), and the next falls reach the scaler's floor: DeepSpeed then stops the run
("Current loss scale already at minimum", TP-LOSS-SCALE-MIN), Megatron keeps skipping every
step.
What it does not mean: the falls at the start of a run are the scaler finding its level
(DeepSpeed starts at 2^16, Megatron at 2^32): a run that settles at a scale above
`max_scale`, or grows back from a low one, is not flagged. bf16 runs have no loss scale.
"""


@dataclass(frozen=True, kw_only=True)
class CollapseLimits:
    # A scale this low is within three halvings of the scalers' default floor of 1
    # (DeepSpeed `min_loss_scale`, Megatron `--min-loss-scale`); a run settled this low is
    # one bad stretch from the end.
    max_scale: float = 8.0
    # Falls in a row without a growth between: the scaler's start-up settling stops once
    # one step fits; this many in a row, ending this low, is a scale being pushed down.
    min_halvings: int = 4


def check_collapse(run: Run, limits: CollapseLimits, ctx: Context) -> Iterator[Hit]:
    scale = run.get(LOSS_SCALE)
    assert scale is not None
    values = scale.values
    # The streak of falls that ends the log: from the last growth on, every change a fall.
    falls: list[int] = []  # indexes of the points each fall lands on
    for i in range(1, len(values)):
        prev, now = values[i - 1], values[i]
        # a NaN (no scale stated) compares False both ways: neither a growth nor a fall
        if now > prev:
            falls = []
        elif now < prev:
            falls.append(i)
    last = values[-1]
    if len(falls) < limits.min_halvings or not last <= limits.max_scale:
        return
    first_fall, last_fall = falls[0], falls[-1]
    top = values[first_fall - 1]
    yield Hit(
        message=(f"loss scale fell {len(falls)} times in a row, from {fmt(top)} to {fmt(last)}, with no growth "
                 f"between; limits: {limits.min_halvings} falls in a row ending at {fmt(limits.max_scale)} or lower"),
        evidence={"falls": len(falls), "from_scale": top, "to_scale": last, "first_step": scale.steps[first_fall],
                  "last_step": scale.steps[last_fall]},
        location=run.location(scale.records[first_fall]),
        related=(Related(location=run.location(scale.records[last_fall]),
                         message=f"the last fall, to {fmt(values[last_fall])}"),),
    )


COLLAPSE_RULE = Rule(
    id="TP-LOSS-SCALE-COLLAPSE", name="loss-scale-collapse", level=Level.WARN, doc=COLLAPSE_DOC,
    limits=CollapseLimits, check=check_collapse, needs=(LOSS_SCALE,), family=METRICS,
)


MIN_DOC = """The fp16 loss scaler reached its minimum and could go no lower.

What it flags: DeepSpeed's `Current loss scale already at minimum - cannot decrease scale
anymore. Exiting run.` in a captured training log; the finding points at the first.
Why it matters: DeepSpeed raises it when a step overflows at the smallest scale allowed:
the gradients are inf/NaN whatever the scale, and the run stopped there.
What it does not mean: nothing about why; usual causes are a learning rate too high, a bad
batch, or fp16 activations out of range (bf16 has the range fp16 lacks).
"""


def check_minimum(run: Run, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    at_min = run.get(LOSS_SCALE_AT_MINIMUM)
    assert at_min is not None
    scale = run.get(LOSS_SCALE)
    before = f" (the last loss scale stated before it: {fmt(scale.values[-1])})" if scale is not None else ""
    yield Hit(
        message=(f"the loss scaler says the loss scale is already at its minimum and stops the run{before}; "
                 f"{len(at_min)} such line(s) (limit 0)"),
        evidence={"count": len(at_min), "step": at_min.steps[0]},
        location=run.location(at_min.records[0]),
    )


MIN_RULE = Rule(
    id="TP-LOSS-SCALE-MIN", name="loss-scale-at-minimum", level=Level.FAIL, doc=MIN_DOC,
    check=check_minimum, needs=(LOSS_SCALE_AT_MINIMUM,), family=METRICS,
)

RULES = (COLLAPSE_RULE, MIN_RULE)
