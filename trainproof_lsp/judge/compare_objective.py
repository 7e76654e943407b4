"""A preference or RL run compared with its baseline on its reward or margins
(rules/objective_compare.py), wired the way judge/compare.py wires loss comparisons.

An RL run's comparison is made on its reward alone: its loss is not comparable (near 0 by
construction), and the loss comparison rules are listed as skipped with that reason. A
preference run keeps the loss comparison and adds the margins one.
"""

from __future__ import annotations

from ..core.config import Config
from ..core.model import Check, Finding, Number, Run
from ..rules import rules_of
from ..rules.base import Context
from ..rules.compare import Uncomparable
from ..rules.objective import RL, objective_of
from ..rules.objective_compare import BELOW_RULE, OBJECTIVE_COMPARISON, align_objective, compared_series
from .base import run_rules


def loss_not_comparable(run: Run) -> str | None:
    """Why a run's loss is not compared with its baseline's (an RL run), or None."""
    got = objective_of(run)
    if got is None or got[0] is not RL:
        return None
    return f"the run is an {got[0].words}: its loss is near 0 by construction; compared on its reward instead"


def compare_objective(run: Run, baseline: Run, config: Config) -> tuple[list[Finding], list[Check],
                                                                        dict[str, Number]] | None:
    """The reward/margins comparison of a preference or RL run: (findings, checks, summary),
    or None for a run whose loss is its learning curve. A pair that cannot be aligned gives
    a skipped check with the reason (the loss comparison, when there is one, still stands)."""
    series = compared_series(run)
    if series is None:
        return None
    rules = rules_of(OBJECTIVE_COMPARISON)
    try:
        pair = align_objective(run, baseline, series, config.limits_for(BELOW_RULE))
    except Uncomparable as e:
        reason = f"cannot compare {series} with baseline {baseline.path}: {e}"
        return [], [Check(group=r.id, ran=False, reason=reason) for r in rules], {"compared_series": series}
    findings, checks = run_rules(rules, pair, Context(), config)
    return findings, checks, dict(pair.summary())

