"""rules/steps.py, case by case: TP-STEP-ORDER's two findings whole (message, evidence,
place, related place) and each side of its limits, and `seams` (where TP-APPENDED-RUNS
splits a log) on each side of its restart limit. Runs are built from step lists."""

from __future__ import annotations

import pytest

from trainproof_lsp.core.model import EVAL_LOSS, LOSS
from trainproof_lsp.rules.base import Context, Skip
from trainproof_lsp.rules.steps import SegmentLimits, StepLimits, check, seams

from rule_cases.metrics import run_of


def _run(steps: list[int], name: str = LOSS):
    return run_of(steps=steps, **{name: [1.0] * len(steps)})


def _hits(steps: list[int], limits: StepLimits = StepLimits()) -> list[tuple]:
    run = _run(steps)
    return [(h.message, dict(h.evidence), h.location.span.start_line,
             [(r.location.span.start_line, r.message) for r in h.related]) for h in check(run, limits, Context())]


def test_a_rewind_is_reported_whole_with_the_first_point_it_shadows():
    # 25 after 40 re-logs 30 and 40 (lines 2 and 3); the related place is the first of them
    assert _hits([10, 20, 30, 40, 25, 35]) == [(
        "train loss step goes back to 25 after step 40: a resume from an earlier checkpoint re-logs 2 step(s) "
        "already logged; 1 rewind(s) in this run (limit 0)",
        {"step": 25, "previous_step": 40, "rewinds": 1, "overlap": 2}, 4, [(2, "earlier point at step 30")])]


def test_a_rewind_at_the_second_point_of_two_is_reported():
    assert _hits([50, 40]) == [(
        "train loss step goes back to 40 after step 50: a resume from an earlier checkpoint re-logs 1 step(s) "
        "already logged; 1 rewind(s) in this run (limit 0)",
        {"step": 40, "previous_step": 50, "rewinds": 1, "overlap": 1}, 1, [(0, "earlier point at step 50")])]


def test_repeats_are_reported_whole_with_the_point_before_the_first():
    # all three points at one step: two repeat the point before them
    assert _hits([10, 10, 10]) == [(
        "train loss step repeats: 2 of 3 points log the step of the point before them, first 10 (limit: fewer "
        "than 10%); two writers may share this column",
        {"step": 10, "repeats": 2, "points": 3}, 1, [(0, "earlier point at step 10")])]


def test_a_repeat_after_other_steps_names_the_point_it_repeats():
    assert _hits([10, 20, 20, 30]) == [(
        "train loss step repeats: 1 of 4 points log the step of the point before them, first 20 (limit: fewer "
        "than 10%); two writers may share this column",
        {"step": 20, "repeats": 1, "points": 4}, 2, [(1, "earlier point at step 20")])]


def test_one_repeat_is_flagged_at_a_tenth_of_the_points_and_not_below():
    at_limit = [10, 10] + [20 + 10 * i for i in range(8)]  # 1 repeat of 10 points: 10%
    (hit,) = _hits(at_limit)
    assert hit[1] == {"step": 10, "repeats": 1, "points": 10} and hit[2] == 1
    assert _hits([10, 10] + [20 + 10 * i for i in range(9)]) == []  # 1 of 11


def test_strictly_increasing_steps_are_quiet_and_too_few_points_say_so():
    assert _hits([10, 20, 30]) == []
    with pytest.raises(Skip, match=r"^1 finite loss point\(s\); this check needs at least 2$"):
        _hits([10])
    with pytest.raises(Skip, match=r"^no loss in the log$"):
        list(check(_run([10, 20], EVAL_LOSS), StepLimits(), Context()))


@pytest.mark.parametrize("steps,expected", [
    ([10, 20, 30], ()),                  # one run
    ([100, 10], (1,)),                   # two points are enough
    ([10, 5, 20], (1,)),                 # a restart at the second point, the third above the first
    ([0, 100, 10], (2,)),                # exactly at the limit: back into the first tenth (0 + 0.1 x 100)
    ([0, 100, 11], ()),                  # just past it: a resume, one run
    ([50, 150, 60], (2,)),               # the limit counts from the run's first step: 50 + 0.1 x 100
    ([50, 150, 65], ()),
    ([50, 60, 200, 70], ()),             # the first step of the run, not its second
    ([10, 10, 20, 30], ()),              # a repeated first step is not a new run
    ([0, 100, 5, 100, 3], (2, 4)),       # the second run's first step is where the next limit counts from
])
def test_seams_where_a_step_goes_back_to_the_start(steps, expected):
    assert seams(_run(steps), SegmentLimits()) == expected


def test_seams_are_read_from_the_eval_loss_when_there_is_no_train_loss():
    assert seams(_run([0, 100, 5], EVAL_LOSS), SegmentLimits()) == (2,)
    assert seams(_run([100], EVAL_LOSS), SegmentLimits()) == ()
    assert seams(run_of(steps=[0, 100, 5], lr=[1.0] * 3), SegmentLimits()) == ()
