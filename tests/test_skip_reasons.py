"""Every reason a metric rule gives for not judging a log, asserted whole: the series it names,
the count it found and the count it needs. A reason is what NOT-CHECKED prints to the user, so a
word changed in one (a series named wrongly, a wrong minimum) must fail a test."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from rule_cases.metrics import run_of, skip_of
from trainproof_lsp.core.model import Run
from trainproof_lsp.rules import Context, degenerate, flat, loss_parts, lr, overfit, uniform, zero
from trainproof_lsp.rules.base import NoLimits

EIGHT = Context(num_classes=8, num_classes_source="config.json")
NO_CLASSES_CE = ("number of classes unknown: the loss may not be a cross-entropy (pass --num-classes or --vocab-size, "
                 "or keep config.json / hparams.yaml beside the log)")
NO_CLASSES_REGRESSION = ("number of classes unknown: the loss may be a regression's, which can fall to ~0 (pass "
                         "--num-classes or --vocab-size, or keep config.json / hparams.yaml beside the log)")
NO_CLASSES_UNIFORM = ("number of classes unknown: pass --vocab-size or --num-classes, set vocab_size or num_classes in "
                      "the config, or keep config.json beside the log")

CASES: list[tuple[str, Callable[..., Any], Any, Run, Context, str]] = [
    ("zero-loss short", zero.check_zero_loss, NoLimits(), run_of(loss=[0.0, 0.0]), Context(),
     "2 finite loss point(s); this check needs at least 3"),
    ("zero-loss none", zero.check_zero_loss, NoLimits(), run_of(lr=[1.0]), Context(), "no loss in the log"),
    ("onset short", zero.check_zero_onset, zero.OnsetLimits(), run_of(loss=[1.0, 0.0, 0.0]), Context(),
     "3 finite loss point(s); this check needs at least 4"),
    ("onset none", zero.check_zero_onset, zero.OnsetLimits(), run_of(lr=[1.0]), Context(), "no loss in the log"),
    ("onset all zero", zero.check_zero_onset, zero.OnsetLimits(), run_of(loss=[0.0] * 5), Context(),
     "every loss is zero: reported by TP-ZERO-LOSS"),
    ("zero-grad short", zero.check_zero_grad, zero.ZeroGradLimits(), run_of(grad_norm=[0.0, 0.0]), Context(),
     "2 finite gradient norm point(s); this check needs at least 3"),
    ("zero-grad none", zero.check_zero_grad, zero.ZeroGradLimits(), run_of(loss=[1.0]), Context(),
     "no gradient norm in the log"),
    ("negative classes", degenerate.check_negative, NoLimits(), run_of(loss=[1.0]), Context(), NO_CLASSES_CE),
    ("negative none", degenerate.check_negative, NoLimits(), run_of(lr=[1.0]), EIGHT, "no loss in the log"),
    ("collapse classes", degenerate.check_collapse, degenerate.CollapseLimits(), run_of(loss=[1.0]), Context(),
     NO_CLASSES_REGRESSION),
    ("uniform classes", uniform.check, uniform.Limits(), run_of(loss=[1.0]), Context(), NO_CLASSES_UNIFORM),
    ("uniform short", uniform.check, uniform.Limits(), run_of(loss=[1.0] * 2), EIGHT,
     "2 finite loss point(s); this check needs at least 3"),
    ("uniform none", uniform.check, uniform.Limits(), run_of(lr=[1.0]), EIGHT, "no loss in the log"),
    ("zero-lr short", lr.check_zero_lr, NoLimits(), run_of(lr=[0.0]), Context(),
     "1 finite learning rate point(s); this check needs at least 2"),
    ("zero-lr none", lr.check_zero_lr, NoLimits(), run_of(loss=[1.0]), Context(), "no learning rate in the log"),
    ("partial short", lr.check_zero_lr_partial, lr.PartialLimits(), run_of(lr=[0.0]), Context(),
     "1 finite learning rate point(s); this check needs at least 2"),
    ("partial none", lr.check_zero_lr_partial, lr.PartialLimits(), run_of(loss=[1.0]), Context(),
     "no learning rate in the log"),
    ("parts none", loss_parts.check, loss_parts.Limits(), run_of(loss=[1.0] * 3), Context(),
     "no named parts of the loss in the log"),
    ("parts total short", loss_parts.check, loss_parts.Limits(), run_of(loss=[1.0] * 3, cols={"loss_part:ce": [1.0] * 3}),
     Context(), "3 finite loss point(s); this check needs at least 20"),
    ("parts total none", loss_parts.check, loss_parts.Limits(), run_of(lr=[1.0] * 3, cols={"loss_part:ce": [1.0] * 3}),
     Context(), "no loss in the log"),
    ("parts short", loss_parts.check, loss_parts.Limits(), run_of(loss=[1.0] * 30, cols={"loss_part:ce": [1.0] * 3}),
     Context(), "no part of the loss has 20 finite points"),
    ("parts flat", loss_parts.check, loss_parts.Limits(), run_of(loss=[1.0] * 30, cols={"loss_part:ce": [1.0] * 30}),
     Context(), "the total loss does not fall clearly (1 -> 1, +0.0%) and no part of it collapses: the total's own "
                "checks judge it"),
    ("flat short", flat.check, flat.Limits(), run_of(loss=[1.0] * 3), Context(),
     "3 finite loss point(s); this check needs at least 5"),
    ("flat none", flat.check, flat.Limits(), run_of(lr=[1.0]), Context(), "no loss in the log"),
    ("flat zeros", flat.check, flat.Limits(), run_of(loss=[0.0] * 30), Context(),
     "the loss is all zeros: reported by TP-ZERO-LOSS"),
    ("overfit short", overfit.check, overfit.Limits(), run_of(eval_loss=[1.0] * 4, loss=[1.0] * 4), Context(),
     "4 finite eval loss point(s); this check needs at least 5"),
    ("overfit none", overfit.check, overfit.Limits(), run_of(loss=[1.0] * 10), Context(), "no eval loss in the log"),
    ("overfit no train", overfit.check, overfit.Limits(), run_of(eval_loss=[1.0] * 10), Context(),
     "no train loss to compare the eval curve with"),
]


@pytest.mark.parametrize("check,limits,run,ctx,reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_reason_is_given_whole(check, limits, run, ctx, reason):
    assert skip_of(check, run, limits, ctx) == reason
