"""TP-OVERFIT's words on the best checkpoint: whether the best eval's step was saved, which
checkpoints were (the first six), and the related location at the best eval. The cases of
tests/rule_cases/ judge logs without checkpoints; these give the run's metadata."""

from __future__ import annotations

import dataclasses

import pytest

from rule_cases.metrics import OVERFIT_EVALS, overfit
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
