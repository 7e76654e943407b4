"""A preference or RL run against its baseline, on the series that say whether it learns.

A GRPO/PPO run's loss sits near 0 (and below it) whatever the run does, so loss ratios
against a baseline mean nothing; a DPO run's loss is comparable, but its reward margins
say more directly how far it got. Here a run and its baseline are aligned on the optimizer
step over the span both logs cover, on the reward (RL) or the reward margins (preference),
and their levels — medians of windows, higher is better — are compared. The engine
(judge/compare_objective.py) builds the pair; rules never read files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from ..core import objectives as ob
from ..core.model import Hit, Level, Related, Run, Series
from ._stats import median, point_noise
from .base import Context, Family, Rule, Skip, fmt
from .compare import Uncomparable, in_step_order
from .objective import RL, objective_of


@dataclass(frozen=True, kw_only=True)
class ObjectivePair:
    """A run and its baseline on the step span both log, on one higher-is-better series."""

    run: Run
    baseline: Run
    series: str  # the canonical series compared (reward, rewards/margins)
    run_series: Series  # each side's finite points inside the common span, in step order
    base_series: Series
    lo: int
    hi: int
    window: int
    run_start: float
    run_end: float
    base_start: float
    base_end: float
    run_noise: float  # level noise of a window median, at each side's own point noise
    base_noise: float

    def summary(self) -> dict[str, float | int | str | None]:
        return {"axis": "step", "compared_series": self.series, "common_from": self.lo, "common_to": self.hi,
                "run_start_level": self.run_start, "run_end_level": self.run_end,
                "baseline_start_level": self.base_start, "baseline_end_level": self.base_end,
                "run_gain": self.run_end - self.run_start, "baseline_gain": self.base_end - self.base_start}


OBJECTIVE_COMPARISON: Family[ObjectivePair, Context] = Family("comparison")


def compared_series(run: Run) -> str | None:
    """The series a run of this objective is compared on: the reward of an RL run, the
    margins of a preference run; None for a run whose loss is its learning curve."""
    got = objective_of(run)
    if got is None:
        return None
    return ob.REWARD if got[0] is RL else ob.REWARDS_MARGINS


def align_objective(run: Run, baseline: Run, series: str, limits: "BelowLimits") -> ObjectivePair:
    """Both runs' `series` on their common step span, with start and end levels; raises
    Uncomparable with a one-line reason when they cannot be put side by side."""
    sides = []
    for who, r in (("run", run), ("baseline", baseline)):
        s = r.get(series)
        if s is None:
            raise Uncomparable(f"the {who} logs no {series}", side=who)
        sides.append(in_step_order(s.finite()))
    a, b = sides
    for who, s in (("run", a), ("baseline", b)):
        if not len(s):
            raise Uncomparable(f"the {who} logs no finite {series}", side=who)
    lo, hi = max(a.steps[0], b.steps[0]), min(a.steps[-1], b.steps[-1])
    cut = []
    for who, s in (("run", a), ("baseline", b)):
        keep = [i for i, st in enumerate(s.steps) if lo <= st <= hi]
        if len(keep) < limits.min_points:
            raise Uncomparable(f"the {who} has {len(keep)} finite {series} point(s) in the steps both logs cover "
                               f"({lo}-{hi}); a comparison needs at least {limits.min_points}", side=who)
        cut.append(Series(s.name, s.source_name, [s.steps[i] for i in keep], [s.values[i] for i in keep],
                          [s.records[i] for i in keep]))
    ra, rb = cut
    w = max(limits.min_window_points, math.ceil(limits.window_fraction * min(len(ra), len(rb))))
    return ObjectivePair(
        run=run, baseline=baseline, series=series, run_series=ra, base_series=rb, lo=lo, hi=hi, window=w,
        run_start=median(ra.values[:w]), run_end=median(ra.values[-w:]),
        base_start=median(rb.values[:w]), base_end=median(rb.values[-w:]),
        run_noise=point_noise(ra.values) / math.sqrt(w), base_noise=point_noise(rb.values) / math.sqrt(w))


BELOW_DOC = """A preference or RL run ends with a lower reward (or reward margin) than its baseline reached.

What it flags: a run compared with a known-good baseline of the same task whose reward
(GRPO/PPO family) or reward margins (DPO family), at the end of the steps both logs cover
(median of the last tenth, at least 3 points), fall short of the baseline's by more than
`max_shortfall` of the baseline's own gain over that span, and by more than `noise_sigmas`
times the two end levels' combined noise.
Why it matters: the loss of such runs does not compare (a GRPO loss is ~0 by construction);
the reward is what the run is for. A run that learns less than its baseline did over the
same steps has a worse setup — a learning rate, beta, reward or data change.
What it does not mean: a worse model in every respect; and when the baseline's own reward
did not rise over the span (gain within its noise), there is nothing to hold the run to:
the check is skipped and says so.
"""


@dataclass(frozen=True, kw_only=True)
class BelowLimits:
    # Points each run needs inside the common span: a start and an end window of three.
    min_points: int = 6
    # The start and end windows: a tenth of the common span's points each, at least 3.
    window_fraction: float = 0.1
    min_window_points: int = 3
    # A quarter of the baseline's gain: two runs of one setup with different seeds end
    # within a few percent of each other's gain; a quarter short is a different run.
    max_shortfall: float = 0.25
    # Two combined level noises: a gap two window medians of equal runs exceed ~5% of the time.
    noise_sigmas: float = 2.0


def check_below(pair: ObjectivePair, limits: BelowLimits, ctx: Context) -> Iterator[Hit]:
    gain = pair.base_end - pair.base_start
    if gain <= limits.noise_sigmas * pair.base_noise:  # (the noise is >= 0: no gain is in here)
        raise Skip(f"the baseline's {pair.series} did not rise over steps {pair.lo}-{pair.hi} ({fmt(pair.base_start)} "
                   f"-> {fmt(pair.base_end)}, level noise {fmt(pair.base_noise)}): nothing to hold the run to")
    shortfall = pair.base_end - pair.run_end
    noise = math.hypot(pair.run_noise, pair.base_noise)
    if shortfall <= limits.max_shortfall * gain or shortfall <= limits.noise_sigmas * noise:
        return
    r = pair.run_series
    yield Hit(
        message=(f"{pair.series} ends at {fmt(pair.run_end)} against the baseline's {fmt(pair.base_end)} over steps "
                 f"{pair.lo}-{pair.hi} (medians of the last {pair.window}): {fmt(shortfall)} short, {shortfall / gain:.0%} "
                 f"of the baseline's gain {fmt(gain)} (limits: {limits.max_shortfall:.0%} of it, and "
                 f"{limits.noise_sigmas:g} x the level noise {fmt(noise)})"),
        evidence={"series": pair.series, "run_end_level": pair.run_end, "baseline_end_level": pair.base_end,
                  "shortfall": shortfall, "baseline_gain": gain, "noise": noise},
        location=pair.run.location(r.records[-1]),
        related=(Related(location=pair.baseline.location(pair.base_series.records[-1]),
                         message=f"baseline {pair.series} {fmt(pair.base_series.values[-1])} at step "
                                 f"{pair.base_series.steps[-1]}"),),
    )


BELOW_RULE = Rule(id="TP-CMP-REWARD-BELOW", name="reward-below-baseline", level=Level.WARN, doc=BELOW_DOC,
                  limits=BelowLimits, check=check_below, family=OBJECTIVE_COMPARISON)

RULES = (BELOW_RULE,)
