"""Step order in one log: appended runs (split into segments), rewinds and repeats."""

from __future__ import annotations

from dataclasses import dataclass
from operator import lt
from typing import Iterator

from ..core.model import EVAL_LOSS, LOSS, Hit, Level, Related, Run, Series
from .base import Context, METRICS, Rule, need

DOC = """The train-loss steps go backwards inside one run (a rewind), or repeat throughout.

What it flags: a train-loss point whose step is lower than the one before it without going
back to the start (a resume from an earlier checkpoint that re-logs steps already logged),
or many points whose step repeats the one before (at least `max_repeat_fraction` of them:
two writers share one column).
Why it matters: the re-logged points shadow the earlier ones; every curve rule reads the
overlap twice, so a rise or a fall there may be the seam, not the run.
What it does not mean: a step logged twice now and then (a resume re-logging the step it
resumed at, a last log at the final step) — that is one run and is not flagged. A step that
goes back to the start is a new run appended to the same file: the log is split there and
each run judged on its own (TP-APPENDED-RUNS), never flagged here. An eval entry at the
same step as a train entry belongs to another series and is fine.
Noisy logs: the loss values play no part, only the steps. Short logs: two points are
enough. Resumed runs: a resume that re-logs the step it resumed at is one repeat and is not
flagged; a resume from an earlier checkpoint (the step goes back part-way) is the rewind
this rule reports, with the step it went back to.
"""


@dataclass(frozen=True, kw_only=True)
class StepLimits:
    # A tenth of the points repeating their predecessor's step: beyond what resumes
    # re-logging one step each can produce, the sign of two writers in one column.
    max_repeat_fraction: float = 0.1


def check(run: Run, limits: StepLimits, ctx: Context) -> Iterator[Hit]:
    loss = need(run, LOSS, 2, "loss")
    steps = loss.steps
    if all(map(lt, steps, steps[1:])):  # strictly increasing, checked in C
        return
    back = [i for i in range(1, len(steps)) if steps[i] < steps[i - 1]]
    repeats = [i for i in range(1, len(steps)) if steps[i] == steps[i - 1]]
    if back:
        i = back[0]
        earlier = next(j for j in range(i) if steps[j] >= steps[i])  # steps[i - 1] is one
        overlap = sum(1 for j in range(i) if steps[j] >= steps[i])
        yield Hit(
            message=(
                f"train loss step goes back to {steps[i]} after step {steps[i - 1]}: a resume from an "
                f"earlier checkpoint re-logs {overlap} step(s) already logged; {len(back)} rewind(s) in "
                "this run (limit 0)"
            ),
            evidence={"step": steps[i], "previous_step": steps[i - 1], "rewinds": len(back),
                      "overlap": overlap},
            location=run.location(loss.records[i]),
            related=(Related(location=run.location(loss.records[earlier]),
                             message=f"earlier point at step {steps[earlier]}"),),
        )
        return
    if len(repeats) >= limits.max_repeat_fraction * len(steps):
        i = repeats[0]
        yield Hit(
            message=(
                f"train loss step repeats: {len(repeats)} of {len(steps)} points log the step of the point "
                f"before them, first {steps[i]} (limit: fewer than {limits.max_repeat_fraction:.0%}); two "
                "writers may share this column"
            ),
            evidence={"step": steps[i], "repeats": len(repeats), "points": len(steps)},
            location=run.location(loss.records[i]),
            related=(Related(location=run.location(loss.records[i - 1]),
                             message=f"earlier point at step {steps[i - 1]}"),),
        )


RULE = Rule(id="TP-STEP-ORDER", name="step-order", level=Level.WARN, doc=DOC, limits=StepLimits,
            check=check, needs=(LOSS,), family=METRICS)


APPENDED_DOC = """The log holds several runs, appended one after another; each is judged alone.

What it flags: a point whose step goes back to the start of the run before it (into its
first `restart_fraction` of steps) — what a logger opened in append mode (Keras
`CSVLogger(append=True)`, a JSONL file reopened with "a") writes when the script is run
again. The log is split at each such point; every segment is judged on its own, and the
finding (INFO, at the first line of each segment after the first) names the segment's
lines and steps.
Why it matters: read as one curve, appended runs look like a divergence or a dead run at
every seam. Judged one by one, no finding spans a seam.
What it does not mean: a broken run; INFO never changes a verdict. A step logged twice, or
a resume that goes back a little (to its last checkpoint), is one run (TP-STEP-ORDER).
"""


@dataclass(frozen=True, kw_only=True)
class SegmentLimits:
    # "Back to the start": into the first tenth of the steps the run before had covered.
    # A resume from a checkpoint goes back to the last save (most of the way through);
    # a script run again starts from its first step.
    restart_fraction: float = 0.1


APPENDED_RULE = Rule(id="TP-APPENDED-RUNS", name="appended-runs", level=Level.INFO, doc=APPENDED_DOC,
                     limits=SegmentLimits, family=METRICS)


def seams(run: Run, limits: SegmentLimits) -> tuple[int, ...]:
    """Record indices where a new run starts in a log of appended runs (empty for one
    run). Read from the train loss, or the eval loss when the log has no train loss."""
    primary: Series | None = run.get(LOSS) or run.get(EVAL_LOSS)
    if primary is None or len(primary) < 2:
        return ()
    steps = primary.steps
    if all(map(lt, steps, steps[1:])):
        return ()
    out: list[int] = []
    first = steps[0]
    for i in range(1, len(steps)):
        prev, here = steps[i - 1], steps[i]
        if here < prev and here <= first + limits.restart_fraction * (prev - first):
            out.append(primary.records[i])
            first = here
    return tuple(out)
