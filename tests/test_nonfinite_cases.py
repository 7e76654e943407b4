"""TP-NAN, TP-NAN-EVAL, TP-NAN-GRAD and TP-GRAD-OVERFLOW with their whole messages: the first
bad value and the count, each side of the streak of 3, a lone non-finite norm at the end, the
first qualifying streak only, and the overflow list cut at 8 steps and 5 related places."""

from __future__ import annotations

import pytest

from rule_cases.metrics import INF, NAN, hits_of, run_of, skip_of
from trainproof_lsp.rules.base import NoLimits
from trainproof_lsp.rules.nonfinite import GradLimits, check_nan_eval, check_nan_grad, check_nan_loss, check_overflow


def test_the_loss_finding_names_the_first_bad_value_and_counts_every_one():
    assert hits_of(check_nan_loss, run_of(loss=[1.0, NAN, 2.0, -INF]), NoLimits()) == [
        ("loss is nan at step 20; 2 of 4 logged losses are not finite (limit 0)",
         {"first_step": 20, "count": 2, "points": 4}, 1, [])]
    assert hits_of(check_nan_loss, run_of(loss=[1.0, 2.0]), NoLimits()) == []


def test_the_eval_finding_names_the_column_it_read():
    assert hits_of(check_nan_eval, run_of(eval_loss=[1.0, INF]), NoLimits()) == [
        ("eval loss (eval_loss) is inf at step 20; 1 of 2 logged eval losses are not finite (limit 0)",
         {"first_step": 20, "count": 1, "points": 2}, 1, [])]
    assert hits_of(check_nan_eval, run_of(eval_loss=[1.0]), NoLimits()) == []


def _norms(*parts: tuple[float, int]) -> list[float]:
    return [v for value, k in parts for v in [value] * k]


def test_two_overflows_in_a_row_are_skipped_steps_and_three_a_broken_run():
    norms = _norms((1.0, 3), (NAN, 2), (1.0, 3), (INF, 3), (1.0, 1))
    assert hits_of(check_nan_grad, run_of(grad_norm=norms), GradLimits()) == [
        ("gradient norm is inf for 3 logged step(s) in a row from step 90 (limit: fewer than 3 in a row, and "
         "finite at the end)", {"first_step": 90, "streak": 3, "at_end": False}, 8, [])]
    assert hits_of(check_overflow, run_of(grad_norm=norms), GradLimits()) == [
        ("1 isolated gradient-norm overflow(s) at step(s) 40, each followed by finite steps: consistent with fp16 "
         "dynamic loss scaling skipping those steps", {"count": 1, "first_step": 40, "points": 12}, 3, [])]


def test_only_the_first_broken_streak_is_reported():
    norms = _norms((1.0, 1), (NAN, 4), (1.0, 1), (NAN, 5), (1.0, 1))
    assert [h[1] for h in hits_of(check_nan_grad, run_of(grad_norm=norms), GradLimits())] == [
        {"first_step": 20, "streak": 4, "at_end": False}]


def test_one_non_finite_norm_at_the_last_step_is_a_broken_run_not_an_overflow():
    norms = [1.0] + [NAN, 1.0] * 9 + [NAN]
    assert hits_of(check_nan_grad, run_of(grad_norm=norms), GradLimits()) == [
        ("gradient norm is nan for 1 logged step(s) in a row from step 200 to the end of the log (limit: fewer "
         "than 3 in a row, and finite at the end)", {"first_step": 200, "streak": 1, "at_end": True}, 19, [])]
    ((message, evidence, line, related),) = hits_of(check_overflow, run_of(grad_norm=norms), GradLimits())
    assert message == ("9 isolated gradient-norm overflow(s) at step(s) 20, 40, 60, 80, 100, 120, 140, 160, ..., "
                       "each followed by finite steps: consistent with fp16 dynamic loss scaling skipping those steps")
    assert (evidence, line) == ({"count": 9, "first_step": 20, "points": 20}, 1)
    assert related == [(3, "overflow at step 40"), (5, "overflow at step 60"), (7, "overflow at step 80"),
                       (9, "overflow at step 100"), (11, "overflow at step 120")]


def test_eight_overflows_are_all_listed():
    norms = [1.0] + [NAN, 1.0] * 8
    ((message, _, _, related),) = hits_of(check_overflow, run_of(grad_norm=norms), GradLimits())
    assert "at step(s) 20, 40, 60, 80, 100, 120, 140, 160, each followed" in message and len(related) == 5


@pytest.mark.parametrize("check", [check_nan_grad, check_overflow])
def test_without_a_gradient_norm_both_say_so(check):
    assert skip_of(check, run_of(loss=[1.0]), GradLimits()) == "no gradient norm in the log"


@pytest.mark.parametrize("check", [check_nan_grad, check_overflow])
def test_finite_norms_are_quiet(check):
    assert hits_of(check, run_of(grad_norm=[1.0, 2.0, 3.0]), GradLimits()) == []


def test_a_streak_of_three_at_the_end_is_not_an_overflow():
    assert hits_of(check_overflow, run_of(grad_norm=_norms((1.0, 2), (NAN, 3))), GradLimits()) == []
    assert hits_of(check_overflow, run_of(grad_norm=_norms((1.0, 2), (NAN, 2), (1.0, 1))), GradLimits())[0][1] == {
        "count": 1, "first_step": 30, "points": 5}
