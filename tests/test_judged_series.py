"""Messages say which series a rule judged and over which window (issue 26, class 9), and
single-step gradient-norm peaks the loss does not notice are not spikes (class 6). Fixtures
are exact series made here."""

from __future__ import annotations

import math
from typing import Any

from trainproof_lsp.core.model import Level

from conftest import judge_rows, none_of, only, ran


def _peaks(bump: float, *, two_step: bool = False, amplitude: float = 0.01) -> list[dict[str, Any]]:
    """200 steps of a loss at 1.0 +- amplitude (alternating: point noise 1.4826 * 4 a / sqrt 6 =
    0.02421 for a = 0.01), gradient norms ~1 with 40x peaks at steps 121 and 151 (the losses
    just before them are at 1 - a); the loss at each peak's step is 1 - a + bump."""
    rows = []
    for i in range(200):
        grad = 1.0 + 0.1 * (i % 4)
        loss = 1.0 + amplitude * (-1) ** i
        if i in (120, 150) or (two_step and i in (121, 151)):
            grad = 40.0
        if i in (120, 150):
            loss = 1.0 - amplitude + bump
        rows.append({"step": i + 1, "loss": round(loss, 4), "grad_norm": grad})
    return rows


def test_single_step_grad_peaks_the_loss_does_not_notice_are_not_spikes(tmp_path):
    _, report = judge_rows(tmp_path, _peaks(0.0))
    assert ran(report, "TP-GRAD-SPIKE")
    none_of(report, "TP-GRAD-SPIKE")


def test_grad_peaks_the_loss_notices_are_spikes_and_the_message_says_what_was_judged(tmp_path):
    _, report = judge_rows(tmp_path, _peaks(0.2))
    f = only(report, "TP-GRAD-SPIKE")
    assert f.level is Level.WARN
    assert f.evidence["spikes"] == 2 and f.evidence["quiet_peaks"] == 0 and f.evidence["step"] == 121
    assert f.message.endswith("; judged on the grad norm per logged step, points 1-200 of 200 (steps 1-200); "
                              "each norm also against the median of the 10 before it")


def test_the_quiet_loss_limit_each_side(tmp_path):
    # 3 point noises of the loss = 3 x 0.02421 = 0.0726 above its level before (0.99)
    quiet, moved = tmp_path / "quiet", tmp_path / "moved"
    quiet.mkdir()
    moved.mkdir()
    _, report = judge_rows(quiet, _peaks(0.070))
    none_of(report, "TP-GRAD-SPIKE")
    _, report = judge_rows(moved, _peaks(0.075))
    assert only(report, "TP-GRAD-SPIKE").evidence["spikes"] == 2


def test_a_two_step_peak_is_a_spike_even_when_the_loss_is_quiet(tmp_path):
    _, report = judge_rows(tmp_path, _peaks(0.0, two_step=True))
    f = only(report, "TP-GRAD-SPIKE")
    assert f.evidence["spikes"] == 4 and f.evidence["quiet_peaks"] == 0  # both steps of both peaks


def test_flat_says_it_judged_every_point_of_the_train_loss(tmp_path):
    rows = [{"step": 10 * (i + 1), "loss": 2.5} for i in range(12)]
    _, report = judge_rows(tmp_path, rows)
    assert only(report, "TP-FLAT").message == (
        "loss stays at 2.5 over 12 points (steps 10-120): relative spread 0 < limit 0.0001; judged on the train "
        "loss per logged point, points 1-12 of 12 (steps 10-120); the spread is over all its points")


def test_zero_lr_stretch_says_it_judged_the_learning_rate_per_step(tmp_path):
    rows = [{"step": 10 * (i + 1), "loss": round(3.0 - 0.05 * i, 4), "learning_rate": 0.0 if 5 <= i < 10 else 1e-4}
            for i in range(30)]
    _, report = judge_rows(tmp_path, rows)
    assert only(report, "TP-ZERO-LR-PARTIAL").message == (
        "learning rate is 0 at 5 of 30 logged steps (17%; limit 10%), first at step 60; judged on the lr per "
        "logged step, points 1-30 of 30 (steps 10-300); a lone zero between non-zero points is a restart "
        "boundary, not counted")


def test_diverge_says_it_judged_the_per_epoch_train_loss_and_its_windows(tmp_path):
    rows: list[dict[str, Any]] = []
    for e in range(12):
        level = 2.0 * math.exp(-e / 2) + 0.2 if e < 6 else 1.5
        for j in range(5):
            rows.append({"step": 50 * e + 10 * (j + 1), "train_loss_step": round(level + 0.01 * (j % 2), 4)})
        rows.append({"step": 50 * e + 50, "train_loss_epoch": round(level, 4)})
    _, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-DIVERGE")
    assert "judged on the train loss per epoch, points 1-12 of 12 (steps 50-600); levels: rolling medians of 3 " \
           "points, the end level the last 3" in f.message
