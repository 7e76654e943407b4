"""TP-NEGATIVE-LOSS and TP-LOSS-COLLAPSE at the edges tests/rule_cases/ does not reach: a
binary classifier (2 classes), a single point, the related location of the lowest loss,
the skip reasons in full, a collapse judged on the eval loss, and the start and end levels
at 0 or below."""

from __future__ import annotations

import pytest

from rule_cases.metrics import run_of
from trainproof_lsp.rules import Context, Skip
from trainproof_lsp.rules.degenerate import CollapseLimits, check_collapse, check_negative
from trainproof_lsp.rules.base import NoLimits

BINARY = Context(num_classes=2, num_classes_source="config.json")
TEN = Context(num_classes=10, num_classes_source="config.json")


def _negative(run, ctx=BINARY):
    return list(check_negative(run, NoLimits(), ctx))


def _collapse(run, ctx=TEN):
    return list(check_collapse(run, CollapseLimits(), ctx))


@pytest.mark.parametrize("check", [check_negative, check_collapse])
def test_without_two_classes_neither_judges_and_each_says_why(check):
    run = run_of(loss=[0.7, -0.1] + [1e-6] * 10)
    with pytest.raises(Skip) as skipped:
        list(check(run, NoLimits() if check is check_negative else CollapseLimits(),
                   Context(num_classes=1, num_classes_source="config.json")))
    assert str(skipped.value) == {
        check_negative: "number of classes unknown: the loss may not be a cross-entropy (pass --num-classes or "
                        "--vocab-size, or keep config.json / hparams.yaml beside the log)",
        check_collapse: "number of classes unknown: the loss may be a regression's, which can fall to ~0 (pass "
                        "--num-classes or --vocab-size, or keep config.json / hparams.yaml beside the log)",
    }[check]


def test_a_binary_classifiers_single_negative_point_is_reported():
    (hit,) = _negative(run_of(loss=[-0.05]))
    assert hit.message == ("train loss is negative at 1 of 1 points (steps 10-10), first -0.05 at step 10, lowest "
                           "-0.05 at step 10: a cross-entropy over 2 classes (from config.json) is never below 0")
    assert hit.related == ()


def test_the_lowest_negative_loss_is_related_when_it_is_not_the_first():
    (hit,) = _negative(run_of(loss=[0.7, -0.1, 0.3, -0.4, 0.2]))
    assert hit.location.span is not None and hit.location.span.start_line == 1
    (related,) = hit.related
    assert related.message == "lowest loss -0.4 at step 40"
    assert related.location.span is not None and related.location.span.start_line == 3


def test_a_binary_classifiers_collapse_is_reported():
    (hit,) = _collapse(run_of(loss=[0.69] * 4 + [0.69 * 10 ** (-i / 2) for i in range(1, 9)] + [1e-5] * 4), BINARY)
    assert hit.evidence["start_level"] == 0.69 and hit.evidence["end_level"] == 1e-5
    assert "series" not in hit.evidence


def test_a_short_log_is_judged_on_medians_of_three():
    (hit,) = _collapse(run_of(loss=[5.0, 5.0, 5.0, 1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-4, 1e-4]))
    assert "(10 points; medians of the first and last 3)" in hit.message
    assert hit.evidence["end_level"] == 1e-4


def test_a_collapse_judged_on_the_eval_loss_names_that_series():
    evals = [5.0, 5.0, 5.0, 1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4]
    (hit,) = _collapse(run_of(loss=[5.0, 4.0, None, None, None, None, None, None, None, None, None, None],
                              eval_loss=evals))
    assert hit.evidence["series"] == "eval_loss"
    assert hit.message.startswith("eval loss collapsed from 5 to 0.0001 over steps 10-120")


@pytest.mark.parametrize("values,fires", [
    # a start level at 0 or below has nothing to collapse from
    ([0.0] * 5 + [0.0] * 5, False),
    ([-1.0] * 5 + [1e-5] * 5, False),
    # a start under 1 collapses all the same
    ([0.5] * 5 + [1e-6] * 5, True),
    # an end exactly at 0 is a collapse (TP-ZERO-LOSS says more of it)
    ([3.0] * 5 + [0.0] * 5, True),
])
def test_the_levels_a_collapse_is_judged_from(values, fires):
    assert bool(_collapse(run_of(loss=values))) is fires
