"""Coverage honesty for metric logs: a log too short for the trend checks is not a PASS.

The trend checks (divergence, no improvement) are what says a run is learning; on a log
with fewer points than they need (`min_points` of each, 10 by default) nothing has judged
the curve, whatever the other checks found. The report then carries a TP-NOT-CHECKED
finding saying how many points there were and how many the trend checks need, so its
verdict is NOT-CHECKED (exit 2) unless something else FAILs or WARNs — never a bare PASS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.model import EVAL_LOSS, LOSS, LOSS_EPOCH, Run
from ..rules import BY_ID
from ..rules._views import is_too_short
from ..rules.objective import RL, objective_of, stand_down, too_short_for_rewards

if TYPE_CHECKING:
    from ..core.config import Config

# The checks that judge the shape of the loss curve; when none of them can run, the curve
# was not judged.
TREND_RULES = ("TP-DEAD-RUN", "TP-DIVERGE")


def too_short(run: Run, config: "Config") -> tuple[str, int | None] | None:
    """(reason, record of the last loss point) when every enabled trend check lacks points;
    None when one of them has enough, or none is enabled (then nothing was asked)."""
    objective = objective_of(run)
    if objective is not None and objective[0] is RL:  # its loss is not a learning curve
        return too_short_for_rewards(run)
    reasons = []
    for rule_id in TREND_RULES:
        rule = BY_ID[rule_id]
        if not config.enabled(rule) or stand_down(run, rule_id):
            continue
        reason = is_too_short(run, config.limits_for(rule).min_points)
        if reason is None:
            return None
        reasons.append(reason)
    if not reasons:
        return None
    last = None
    for name in (LOSS, LOSS_EPOCH, EVAL_LOSS):
        series = run.get(name)
        if series is not None:
            last = series.records[-1]
            break
    reason = max(reasons, key=len)  # one line; the rules agree unless limits differ
    return f"too short to judge the loss curve: {reason} ({', '.join(TREND_RULES)} not checked)", last
