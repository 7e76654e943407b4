"""rules/flat.py, case by case: TP-FLAT's shortcut (a range too wide to be flat) never
passes over a loss whose spread is under the limit, the limit on both sides, and the skip
reasons."""

from __future__ import annotations

import math

import pytest

from trainproof_lsp.rules.base import Context, Skip
from trainproof_lsp.rules.flat import Limits, check

from rule_cases.metrics import run_of


def _spread(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / abs(mean)


def _ends(n: int, half_range: float) -> list[float]:
    """n points at 1.0 but the first two, at 1 -/+ half_range: the smallest spread a range allows."""
    return [1.0 - half_range, 1.0 + half_range] + [1.0] * (n - 2)


def _fires(values: list[float]) -> bool:
    return bool(list(check(run_of(loss=values), Limits(), Context())))


@pytest.mark.parametrize("factor,fires", [
    # a range 1.1x limit x sqrt(n): its spread is 1.1 / sqrt(2) = 0.78 of the limit: flat
    (1.1 * 3 / 2, True),
    # a range just under limit x sqrt(2n): spread just under the limit: flat
    (0.999 * math.sqrt(18) / 2, True),
    # just over: spread just over the limit
    (1.001 * math.sqrt(18) / 2, False),
])
def test_a_range_is_judged_by_the_spread_it_allows(factor, fires):
    values = _ends(9, factor * 1e-4)
    assert (_spread(values) < 1e-4) is fires
    assert _fires(values) is fires


def test_the_whole_finding_and_the_skip_reasons():
    (hit,) = check(run_of(loss=[2.0] * 5), Limits(), Context())
    assert hit.message.startswith("loss stays at 2 over 5 points (steps 10-50): relative spread 0 < limit 0.0001; ")
    assert dict(hit.evidence) == {"mean": 2.0, "relative_spread": 0.0, "points": 5}
    assert hit.location.span.start_line == 0
    with pytest.raises(Skip, match=r"^the loss is all zeros: reported by TP-ZERO-LOSS$"):
        list(check(run_of(loss=[0.0] * 5), Limits(), Context()))
    with pytest.raises(Skip, match=r"^4 finite loss point\(s\); this check needs at least 5$"):
        list(check(run_of(loss=[2.0] * 4), Limits(), Context()))
