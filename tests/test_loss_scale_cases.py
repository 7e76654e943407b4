"""rules/loss_scale.py, case by case: TP-LOSS-SCALE-COLLAPSE's finding whole (the first and
the last fall of the streak), each of its limits on both sides, a growth or an unstated
scale inside the streak, and TP-LOSS-SCALE-MIN's wording with and without a stated scale."""

from __future__ import annotations

import math

import pytest

from trainproof_lsp.core.model import LOSS_SCALE_AT_MINIMUM
from trainproof_lsp.rules.base import Context, NoLimits
from trainproof_lsp.rules.loss_scale import CollapseLimits, check_collapse, check_minimum

from rule_cases.metrics import run_of


def _collapse(values: list[float]) -> list[tuple]:
    run = run_of(loss_scale=values)
    return [(h.message, dict(h.evidence), h.location.span.start_line,
             [(r.location.span.start_line, r.message) for r in h.related])
            for h in check_collapse(run, CollapseLimits(), Context())]


def test_a_streak_of_falls_to_the_floor_is_reported_from_its_first_fall_to_its_last():
    assert _collapse([65536, 65536, 128, 256, 128, 64, 32, 16, 8, 8]) == [(
        "loss scale fell 5 times in a row, from 256 to 8, with no growth between; limits: 4 falls in a row ending "
        "at 8 or lower",
        {"falls": 5, "from_scale": 256.0, "to_scale": 8.0, "first_step": 50, "last_step": 90}, 4,
        [(8, "the last fall, to 8")])]


@pytest.mark.parametrize("values,falls", [
    ([128, 64, 32, 16, 8], 4),          # four falls ending at 8: both limits met exactly
    ([256, 128, 64, 32, 16], None),     # ending at 16: above the scale limit
    ([64, 32, 16, 8], None),            # three falls
    ([64, 32, 16, 8, 16, 8, 4, 2], None),  # a growth restarts the count: three falls after it
    ([64, 32, 16, 32, 16, 8, 4, 2], 4),
    # an unstated scale is neither a growth nor a fall: the fall across it (64 -> 32) is not counted
    ([128, 64, math.nan, 32, 16, 8, 4], 4),
    # the first point is not a fall from the last one
    ([2, math.nan, 64, 32, 16, 8, 8], None),
    ([128, 64, math.nan, 32, 16, 8], None),
])
def test_the_streak_and_its_limits(values, falls):
    hits = _collapse([float(v) for v in values])
    assert [h[1]["falls"] for h in hits] == ([falls] if falls else [])


def test_an_unstated_scale_does_not_break_the_streak_around_it():
    # 128 -> 64 (fall), NaN, 64 -> 32 -> 16 -> 8: the NaN's two comparisons are neither way
    ((message, evidence, line, _),) = _collapse([128.0, 64.0, math.nan, 64.0, 32.0, 16.0, 8.0])
    assert evidence == {"falls": 4, "from_scale": 128.0, "to_scale": 8.0, "first_step": 20, "last_step": 70}
    assert line == 1


def test_the_scaler_at_its_minimum_names_the_last_scale_stated_before_it():
    run = run_of(loss_scale=[4.0, 2.0, 1.0, None], cols={LOSS_SCALE_AT_MINIMUM: [None, None, None, 1.0]})
    ((message, evidence, line),) = [(h.message, dict(h.evidence), h.location.span.start_line)
                                    for h in check_minimum(run, NoLimits(), Context())]
    assert message == ("the loss scaler says the loss scale is already at its minimum and stops the run (the last "
                       "loss scale stated before it: 1); 1 such line(s) (limit 0)")
    assert (evidence, line) == ({"count": 1, "step": 40}, 3)
    alone = run_of(loss=[1.0, 1.0], cols={LOSS_SCALE_AT_MINIMUM: [1.0, 1.0]})
    (hit,) = check_minimum(alone, NoLimits(), Context())
    assert hit.message == ("the loss scaler says the loss scale is already at its minimum and stops the run; "
                           "2 such line(s) (limit 0)")
    assert dict(hit.evidence) == {"count": 2, "step": 10} and hit.location.span.start_line == 0
