"""Steps that repeat or go backwards in one log."""

from __future__ import annotations

from operator import lt
from typing import Iterator

from ..model import LOSS, Hit, Level, Related, Run
from .base import Context, NoLimits, Rule, need

DOC = """The train-loss steps repeat or go backwards.

What it flags: a train-loss point whose step is not greater than the one before it.
Why it matters: two runs (or a resumed run) were appended to one log, so every curve
rule reads two runs as one; the later run's points also shadow the earlier ones.
What it does not mean: an eval entry at the same step as a train entry — those are
different series and are fine.
"""


def check(run: Run, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    loss = need(run, LOSS, 2, "loss")
    steps = loss.steps
    if all(map(lt, steps, steps[1:])):  # strictly increasing, checked in C
        return
    bad = [i for i in range(1, len(steps)) if steps[i] <= steps[i - 1]]
    if not bad:
        return
    i = bad[0]
    # The earlier point with the same (or the nearest larger) step.
    earlier = next((j for j in range(i) if steps[j] >= steps[i]), i - 1)
    kind = "repeats" if steps[i] in steps[:i] else "goes back to"
    yield Hit(
        message=(
            f"train loss step {kind} {steps[i]} after step {steps[i - 1]}; {len(bad)} point(s) "
            "out of order (limit 0): several runs may share this log"
        ),
        evidence={"step": steps[i], "previous_step": steps[i - 1], "out_of_order": len(bad)},
        location=run.location(loss.records[i]),
        related=(Related(location=run.location(loss.records[earlier]),
                         message=f"earlier point at step {steps[earlier]}"),),
    )


RULE = Rule(id="TP-STEP-ORDER", name="step-order", level=Level.WARN, doc=DOC, check=check,
            needs=(LOSS,))
