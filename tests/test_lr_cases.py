"""TP-ZERO-LR-PARTIAL at the edges tests/rule_cases/ does not reach: a two-point log is
judged, and which zeros are a schedule's lone ends or restart boundaries (never counted) and
which are a stretch (counted)."""

from __future__ import annotations

import pytest

from rule_cases.metrics import run_of
from trainproof_lsp.rules import Context
from trainproof_lsp.rules.lr import PartialLimits, check_zero_lr_partial

LR = 1e-4


def _zeros(values):
    hits = list(check_zero_lr_partial(run_of(lr=values), PartialLimits(), Context()))
    return [(h.evidence["zero_points"], h.evidence["points"], h.evidence["first_step"]) for h in hits]


def test_a_two_point_log_is_judged():
    assert _zeros([LR, 0.0]) == []  # judged (no skip): a lone zero at the end is the schedule's


@pytest.mark.parametrize("values,found", [
    # two zeros at the start are a stretch, not the warm-up's one lone zero
    ([0.0, 0.0] + [LR] * 8, [(2, 10, 10)]),
    # a lone zero at the end is not counted; the stretch before it is
    ([LR] * 3 + [0.0, 0.0] + [LR] * 4 + [0.0], [(2, 10, 40)]),
    # restart boundaries (a zero between two non-zero points) next to each end are not counted
    ([LR, 0.0, LR, 0.0, 0.0, LR, LR, LR, 0.0, LR], [(2, 10, 40)]),
    # a stretch of exactly 10% once a restart boundary is set aside: at the limit, not over it
    ([LR] * 5 + [0.0, 0.0] + [LR] * 3 + [0.0] + [LR] * 9, []),
])
def test_which_zeros_count(values, found):
    assert _zeros(values) == found
