"""Short logs are judged on what their points support (issue 26, class 7).

A trend check judges a series of 10 points always, and a shorter one from 7 points when
the Mann-Kendall test is expected to reach z 2 at the series' own pace of fall (or a 2%
fall) under its own noise; below that the report says what the noise needs. A short log
frozen at a uniform guess is dead, not too short. Fixtures are made here: exact series,
or numpy's seeded noise."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Verdict
from trainproof_lsp.rules._views import SHORT_FLOOR, expected_trend_z, points_needed

from conftest import judge, none_of, only, ran, skip_reason

LN2 = math.log(2)


def _epochs(folder: Path, losses: list[float]) -> Path:
    """A Keras CSVLogger file: one train loss per epoch."""
    path = folder / "training_log.csv"
    path.write_text("epoch,loss\n" + "".join(f"{i},{v}\n" for i, v in enumerate(losses)), encoding="utf-8")
    return path


def _zigzag(n: int, amplitude: float) -> list[float]:
    """A fall of 0.01 per epoch from 1.0 with +-amplitude alternating noise: its point noise
    is 1.4826 * 4 * amplitude / sqrt(6) exactly (every second difference is +-4 amplitude)."""
    return [round(1.0 - 0.01 * i + amplitude * (-1) ** i, 4) for i in range(n)]


def test_the_expected_trend_z_of_a_noiseless_fall_is_the_tests_maximum():
    # S = n(n-1)/2 with the continuity correction over sqrt(n(n-1)(2n+5)/18)
    assert round(expected_trend_z(5, 1.0, 0.0), 3) == 2.205
    assert round(expected_trend_z(4, 1.0, 0.0), 3) == 1.698
    assert round(expected_trend_z(7, 1.0, 1.0), 3) == 2.431
    assert expected_trend_z(2, 1.0, 0.0) == 0.0


def test_an_eight_epoch_log_that_falls_is_judged_and_passes(tmp_path):
    rng = np.random.default_rng(7)
    losses = [round(0.6 * 0.8 ** i + 0.3 + float(rng.normal(0, 0.005)), 4) for i in range(8)]
    assert points_needed(losses, 10)[0] == 7
    report = judge(_epochs(tmp_path, losses), Config())
    assert ran(report, "TP-DEAD-RUN") and ran(report, "TP-DIVERGE")
    assert report.findings == ()
    assert report.verdict is Verdict.PASS


def test_an_eight_epoch_log_that_stays_flat_at_low_noise_is_dead(tmp_path):
    rng = np.random.default_rng(7)
    losses = [round(1.0 + float(rng.normal(0, 0.002)), 4) for _ in range(8)]
    report = judge(_epochs(tmp_path, losses), Config())
    assert [f.id for f in report.findings] == ["TP-DEAD-RUN"]
    f = only(report, "TP-DEAD-RUN")
    assert f.level is Level.FAIL and report.verdict is Verdict.FAIL
    assert f.message.startswith("loss level went from ")
    assert "(8 points; " in f.message and "no downward trend (z " in f.message


def test_an_eight_epoch_log_too_noisy_for_the_test_says_what_its_noise_needs(tmp_path):
    rng = np.random.default_rng(7)
    losses = [round(1.0 + float(rng.normal(0, 0.05)), 4) for _ in range(8)]
    report = judge(_epochs(tmp_path, losses), Config())
    needed, noise = points_needed(losses, 10)
    assert needed == 10 and round(noise, 4) == 0.0291
    reason = ("8 finite loss points; at the loss's own noise (0.0291) the trend test reaches z 2 on a fall at its "
              "pace, or of 2%, only from 10 points (the trend checks judge from 7 points when the noise allows, "
              "always from 10)")
    assert skip_reason(report, "TP-DEAD-RUN") == reason
    assert skip_reason(report, "TP-DIVERGE") == reason
    f = only(report, "TP-NOT-CHECKED")
    assert f.message == f"too short to judge the loss curve: {reason} (TP-DEAD-RUN, TP-DIVERGE not checked)"
    assert report.verdict is Verdict.NOT_CHECKED


def test_the_floor_six_clean_points_are_too_short_seven_are_judged(tmp_path):
    six, seven = tmp_path / "six", tmp_path / "seven"
    six.mkdir()
    seven.mkdir()
    assert SHORT_FLOOR == 7
    short = judge(_epochs(six, [round(2.0 - 0.2 * i, 4) for i in range(6)]), Config())
    assert skip_reason(short, "TP-DEAD-RUN") == "6 finite loss points; the trend checks need at least 7, up to 10 as the loss's own noise requires"
    assert short.verdict is Verdict.NOT_CHECKED
    judged = judge(_epochs(seven, [round(2.0 - 0.2 * i, 4) for i in range(7)]), Config())
    assert ran(judged, "TP-DEAD-RUN") and judged.findings == () and judged.verdict is Verdict.PASS


def test_the_power_limit_each_side(tmp_path):
    # amplitude 0.004: noise 0.00968, the test reaches z 2 from 8 points -> an 8-point log is judged;
    # amplitude 0.005: noise 0.0121, it needs 9 -> 8 points are too short, 9 are judged.
    assert points_needed(_zigzag(8, 0.004), 10)[0] == 8
    assert points_needed(_zigzag(8, 0.005), 10)[0] == 9
    assert points_needed(_zigzag(9, 0.005), 10)[0] == 7  # a ninth point moves the end level down
    for name, losses, judged in (("a", _zigzag(8, 0.004), True), ("b", _zigzag(8, 0.005), False),
                                 ("c", _zigzag(9, 0.005), True)):
        folder = tmp_path / name
        folder.mkdir()
        report = judge(_epochs(folder, losses), Config())
        assert ran(report, "TP-DEAD-RUN") is judged, name
        if judged:
            assert report.findings == () and report.verdict is Verdict.PASS, name
        else:
            assert skip_reason(report, "TP-DEAD-RUN").startswith(
                "8 finite loss points; at the loss's own noise (0.0121) the trend test reaches z 2 on a fall at its "
                "pace, or of 2%, only from 9 points")
            assert report.verdict is Verdict.NOT_CHECKED


def test_six_identical_losses_at_ln2_are_dead_not_too_short(tmp_path):
    report = judge(_epochs(tmp_path, [0.6931] * 6), Config())
    assert [f.id for f in report.findings] == ["TP-FLAT", "TP-DEAD-RUN"]
    f = only(report, "TP-DEAD-RUN")
    assert f.level is Level.FAIL and report.verdict is Verdict.FAIL
    assert f.message == ("loss is 0.6931 at all 6 points (steps 0-5; spread 0, limit 0.0001 of the level), -0.01% "
                         "from ln 2 (a binary guess) = 0.6931 (limit 1%): a loss frozen at a uniform guess, too short "
                         "for the trend test but not for this")
    assert f.evidence["points"] == 6 and f.evidence["uniform_bound"] == LN2


def test_six_identical_losses_at_ln_vocab_are_dead(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "vocab_size": 50257}),
                                          encoding="utf-8")
    level = round(math.log(50257), 4)
    report = judge(_epochs(tmp_path, [level] * 6), Config())
    f = only(report, "TP-DEAD-RUN")
    assert f.level is Level.FAIL and report.verdict is Verdict.FAIL
    assert f.evidence["uniform_bound"] == math.log(50257)
    assert "-0.00% from ln(50257) (classes from " in f.message and "config.json) = 10.82 (limit 1%)" in f.message


def test_the_frozen_uniform_limits_each_side(tmp_path):
    cases = {
        "four_identical": ([0.6931] * 4, False),          # under constant_points (5)
        "five_identical": ([0.6931] * 5, True),
        "spread_over_1e-4": ([0.6931, 0.6932] * 3, False),  # spread 1.4e-4 of the level
        "spread_under_1e-4": ([0.6931] * 6, True),
        "level_2pct_off": ([0.7070] * 6, False),         # +2.0% from ln 2
        "level_under_1pct_off": ([0.6990] * 6, True),    # +0.85% from ln 2
        "identical_not_at_a_guess": ([0.5] * 6, False),
    }
    for name, (losses, dead) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        report = judge(_epochs(folder, losses), Config())
        if dead:
            assert only(report, "TP-DEAD-RUN").message.startswith(f"loss is {losses[0]:.4g} at all"), name
        else:
            none_of(report, "TP-DEAD-RUN")
            assert skip_reason(report, "TP-DEAD-RUN") == f"{len(losses)} finite loss points; the trend checks need at least 7, up to 10 as the loss's own noise requires", name
