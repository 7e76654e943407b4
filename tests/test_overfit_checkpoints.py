"""TP-OVERFIT's words on the best checkpoint: whether the best eval's step was saved, which
checkpoints were (the first six), and the related location at the best eval. The cases of
tests/rule_cases/ judge logs without checkpoints; these give the run's metadata."""

from __future__ import annotations

import dataclasses

import pytest

from rule_cases.metrics import OVERFIT_EVALS, overfit, run_of
from trainproof_lsp.rules import Context
from trainproof_lsp.rules.overfit import Limits, check

# The firing case of tests/rule_cases: its best eval is 0.99 at step 600 (row 59).
EVALS = [v + 0.01 * (-1) ** i for i, v in enumerate(OVERFIT_EVALS)]
PREFIX = ("train loss fell from 1.142 to 0.9324 (median of 5 points each; 31.1 times its level noise, "
          "limit 2.0); ")


def _hit(**meta):
    run = overfit(EVALS)
    run = dataclasses.replace(run, meta=dataclasses.replace(run.meta, **meta))
    hits = list(check(run, Limits(), Context()))
    assert len(hits) == 1
    return hits[0]


@pytest.mark.parametrize("meta,saved,exists", [
    ({"checkpoint_steps": (300, 600, 900)}, "checkpoint-600 exists beside the log", True),
    # the log names the best checkpoint, at the rule's best step
    ({"best_step": 600, "best_checkpoint": "out/checkpoint-600"}, "the log names out/checkpoint-600 as best", True),
    # ...or at another step: that is not the best eval's checkpoint
    ({"best_step": 500, "best_checkpoint": "out/checkpoint-500"}, "no checkpoint from step 600 found beside the log",
     False),
    ({"best_step": 500, "best_checkpoint": "out/checkpoint-500", "checkpoint_steps": (500,)},
     "no checkpoint from step 600 beside the log (saved: 500)", False),
    # more than six checkpoints: the first six are named
    ({"checkpoint_steps": (100, 200, 300, 400, 500, 700, 800, 1100)},
     "no checkpoint from step 600 beside the log (saved: 100, 200, 300, 400, 500, 700)", False),
])
def test_what_the_finding_says_of_the_best_checkpoint(meta, saved, exists):
    hit = _hit(**meta)
    assert hit.message.endswith(PREFIX + saved), hit.message
    assert hit.evidence["best_checkpoint_exists"] is exists
    assert hit.evidence["best_step"] == 600


def test_the_related_location_is_the_best_eval():
    hit = _hit()
    assert len(hit.related) == 1
    related = hit.related[0]
    assert related.message == "best eval loss 0.99 at step 600"
    # the eval of step 600 is row 59 of the log (one row per step of 10, evals at every 10th)
    assert related.location.span is not None and related.location.span.start_line == 59
    assert hit.location.span is not None and hit.location.span.start_line == 119


def _fired(run):
    hits = list(check(run, Limits(), Context()))
    assert len(hits) == 1
    return hits[0]


@pytest.mark.parametrize("evals,step,value", [
    # a lone low eval long before the best level is not the cited best eval (the search
    # stays in the best level's neighbourhood)
    ([1.3, 0.9, 1.3, 1.2, 1.0, 1.0, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5], 500, 1.0),
    # the best level at the second eval: its neighbourhood starts at the first, the lowest
    ([0.98, 1.0, 1.0, 1.05, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6], 100, 0.98),
    # a low eval two after the best level is outside its neighbourhood
    ([1.3, 1.2, 1.1, 1.0, 1.0, 1.05, 0.99, 1.2, 1.3, 1.4, 1.5, 1.6], 400, 1.0),
])
def test_the_cited_best_eval_is_the_lowest_in_the_best_levels_neighbourhood(evals, step, value):
    hit = _fired(overfit(evals))
    assert (hit.evidence["best_step"], hit.evidence["best_eval"]) == (step, value)
    assert f"the best eval {value:.4g} was at step {step};" in hit.message


def _sparse_train(points: dict[int, float]):
    """The firing case's evals (at every 10th of 120 rows) beside a train loss logged only
    at the given rows."""
    evals = [None] * 120
    for k, v in enumerate(OVERFIT_EVALS):
        evals[10 * k + 9] = v
    return run_of(loss=[points.get(i) for i in range(120)], eval_loss=evals)


def test_a_train_loss_of_two_points_is_judged():
    hit = _fired(_sparse_train({0: 1.5, 119: 1.0}))
    assert hit.evidence["best_step"] == 500
    assert (hit.evidence["train_at_best"], hit.evidence["train_end"]) == (1.5, 1.25)
    assert "train loss fell from 1.5 to 1.25 (median of 5 points each; inf times its level noise" in hit.message


def test_one_train_point_before_the_best_eval_is_its_train_level():
    hit = _fired(_sparse_train({0: 1.5, **{i: 1.2 - 0.004 * (i - 70) for i in range(70, 120)}}))
    assert hit.evidence["train_at_best"] == 1.5
    assert hit.evidence["train_end"] == pytest.approx(1.2 - 0.004 * 47)


def test_each_reason_the_overfit_check_stands_down_in_full():
    from trainproof_lsp.rules import Skip
    with pytest.raises(Skip) as few:
        list(check(run_of(loss=[1.0] * 4, eval_loss=[1.0, 1.1, 1.2, 1.3]), Limits(), Context()))
    assert str(few.value) == "4 finite eval loss point(s); this check needs at least 5"
    with pytest.raises(Skip) as none:
        list(check(run_of(eval_loss=[1.0, 0.9, 0.8, 1.0, 1.1, 1.2]), Limits(), Context()))
    assert str(none.value) == "no train loss to compare the eval curve with"
    with pytest.raises(Skip) as no_evals:
        list(check(run_of(loss=[1.0] * 6), Limits(), Context()))
    assert str(no_evals.value) == "no eval loss in the log"
